"""Safe loading of an ONNX model from a path, bytes or a binary file object.

What "safe" means here:

- Only the bytes the user gave are read: the model file itself (or the upload). External-data
  references are *never* followed, whatever their location; a location that leaves the model's
  folder (``../../etc/passwd``, an absolute path, a drive letter) is refused outright.
- Input size is capped (``max_bytes``) before parsing; declared tensor sizes, function/subgraph
  nesting and the inlined node count are capped before any work (``graph_import.budgets``).
- The graph must be a well-formed DAG: one producer per tensor, every input defined, no cycle.
  Nodes stored out of topological order are re-ordered (ONNX requires the order; some tools
  break it).

Everything wrong raises :class:`ModelImportError` with what is wrong and what to do.
Weightless models (initializers whose external data is absent) load fine: only dims are used.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto, TensorProto

from roofcast.graph_import.budgets import TENSOR_ELEMS, check_nesting, check_tensor_elems
from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.node_checks import check_nodes
from roofcast.graph_import.source import DEFAULT_MAX_BYTES, read_source

MAX_TENSOR_ELEMENTS = TENSOR_ELEMS.default  # the default; ROOFCAST_MAX_TENSOR_ELEMS raises it
CHECKED_DATA_ELEMENTS = 1 << 16  # tensors up to this size may be read (folding, const inputs)
MIN_IR_VERSION = 3  # first IR version with opset imports
MAX_IR_VERSION = onnx.IR_VERSION
MIN_OPSET = 7  # ai.onnx opsets older than this predate the shape-inference rules we rely on
MAX_OPSET = onnx.defs.onnx_opset_version()

_DEFAULT_DOMAINS = ("", "ai.onnx")

Source = str | os.PathLike | bytes | bytearray | memoryview


def load_model(source: Any, max_bytes: int = DEFAULT_MAX_BYTES) -> ModelProto:
    """Read, parse and validate a model; returns a ModelProto whose nodes are topologically sorted.

    ``source``: a path (str / PathLike), bytes-like (an upload), or a binary file object.
    """
    data = read_source(source, max_bytes)
    model = parse_model(data)
    check_nesting(model)  # before validation walks subgraphs and before inlining expands them
    validate_model(model)
    if model.functions:
        model = inline_functions(model)
        validate_model(model)
    return model


def inline_functions(model: ModelProto) -> ModelProto:
    """Expand calls of model-local functions (some exporters wrap modules in them) into their
    bodies, so every node is an operator with a cost rule rather than an opaque call."""
    import onnx.inliner

    try:
        return onnx.inliner.inline_local_functions(model)
    except Exception as exc:  # onnx raises RuntimeError/ValueError variants from C++
        raise ModelImportError(
            f"cannot expand the model's local functions ({type(exc).__name__}: "
            f"{str(exc).strip()[:200]}): the file is inconsistent; re-export it without "
            "local functions (e.g. torch.onnx.export(..., export_modules_as_functions=False))"
        ) from None


def parse_model(data: bytes | bytearray) -> ModelProto:
    """Parse ModelProto bytes without touching any external data."""
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelImportError(
            f"not a readable ONNX model ({len(data)} bytes; protobuf parse failed: {exc}); the "
            "file is truncated, corrupt or not ONNX: re-export or re-download the .onnx file"
        ) from None
    if not model.HasField("graph"):
        if model.ir_version == 0 and not model.opset_import:
            raise ModelImportError(
                f"not an ONNX model ({len(data)} bytes with no ONNX model fields): "
                "give an .onnx file exported by torch.onnx.export, tf2onnx or similar"
            )
        raise ModelImportError(
            "the ONNX model has no graph: nothing to analyse; re-export the model"
        )
    return model


def validate_model(model: ModelProto) -> None:
    """Structural checks of a parsed model; sorts ``model.graph.node`` topologically in place."""
    _check_versions(model)
    graph = model.graph
    _check_text(graph)
    if len(graph.node) == 0:
        raise ModelImportError(
            f"the ONNX graph {graph.name!r} has no nodes: nothing to analyse; re-export the model"
        )
    for tensor in iter_tensors(graph):
        _check_tensor(tensor)
    for vi in (*graph.input, *graph.output, *graph.value_info):
        _check_value_info(vi)
    _check_names_and_order(graph)
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    check_nodes(graph, opsets)


def _check_text(graph: onnx.GraphProto) -> None:
    """Every name the import reads must be valid UTF-8 (protobuf hands back raw bytes when it
    is not, which only a corrupt or hand-crafted file contains)."""
    if _bad_text(graph.name):
        raise _not_text("the graph name", graph.name)
    for vi in (*graph.input, *graph.output, *graph.value_info):
        _check_value_info_text(vi)
    for t in graph.initializer:
        if _bad_text(t.name):
            raise _not_text("initializer name", t.name)
        for entry in t.external_data:
            if _bad_text(entry.key, entry.value):
                raise _not_text(f"external-data entry of {t.name!r}:", entry.value)
    for node in graph.node:
        if _bad_text(node.name, node.op_type, node.domain, *node.input, *node.output):
            raise _not_text(
                "a name in node", [node.name, node.op_type, *node.input, *node.output]
            )
        for attr in node.attribute:
            _check_attribute_text(node, attr)


def _bad_text(*texts: Any) -> bool:
    return any(isinstance(t, bytes) for t in texts)


def _not_text(what: str, text: Any) -> ModelImportError:
    return ModelImportError(
        f"{what} {text!r} is not valid UTF-8 text: the file is corrupt; re-export it"
    )


def _check_value_info_text(vi: onnx.ValueInfoProto) -> None:
    """A graph input/output/value_info: its name and its dims' names are text."""
    if _bad_text(vi.name):
        raise _not_text("tensor name", vi.name)
    if vi.type.HasField("tensor_type"):
        for d in vi.type.tensor_type.shape.dim:
            if _bad_text(d.dim_param):
                raise _not_text(f"a dim name of tensor {vi.name!r}:", d.dim_param)


def _check_attribute_text(node: onnx.NodeProto, attr: onnx.AttributeProto) -> None:
    """An attribute: names are text, it has a type, and its subgraphs pass _check_text."""
    if _bad_text(attr.name, attr.ref_attr_name):
        raise _not_text(f"an attribute name of node {node.name!r}:", attr.name)
    if attr.type == onnx.AttributeProto.UNDEFINED and not attr.ref_attr_name:
        raise ModelImportError(
            f"attribute {attr.name!r} of node {node.name!r} ({node.op_type}) has no "
            "type: the file is corrupt; re-export it"
        )
    if attr.HasField("g"):
        _check_text(attr.g)
    for sub in attr.graphs:
        _check_text(sub)


def _check_versions(model: ModelProto) -> None:
    ir = model.ir_version
    if not MIN_IR_VERSION <= ir <= MAX_IR_VERSION:
        raise ModelImportError(
            f"unsupported ONNX IR version {ir}: roofcast supports IR versions "
            f"{MIN_IR_VERSION}..{MAX_IR_VERSION} (onnx {onnx.__version__}); convert the model "
            "with onnx.version_converter or re-export it with a supported exporter"
        )
    if any(isinstance(op.domain, bytes) for op in model.opset_import):
        raise ModelImportError("an opset domain is not valid UTF-8 text: the file is corrupt")
    versions = [op.version for op in model.opset_import if op.domain in _DEFAULT_DOMAINS]
    if not versions:
        raise ModelImportError(
            "the model declares no ai.onnx opset import (a truncated file ends like this too): "
            f"re-export or re-download it (any opset {MIN_OPSET}..{MAX_OPSET})"
        )
    opset = max(versions)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ModelImportError(
            f"unsupported ai.onnx opset {opset}: "
            f"roofcast supports opsets {MIN_OPSET}..{MAX_OPSET}; "
            "convert it with onnx.version_converter.convert_version(model, 17) or re-export"
        )


def iter_tensors(graph: onnx.GraphProto) -> Iterator[TensorProto]:
    """Every TensorProto of a graph: initializers, sparse initializers, Constant/attribute
    tensors, recursively through subgraphs (If/Loop/Scan bodies)."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("sparse_tensor"):
                yield attr.sparse_tensor.values
                yield attr.sparse_tensor.indices
            if attr.HasField("g"):
                yield from iter_tensors(attr.g)
            for sub in attr.graphs:
                yield from iter_tensors(sub)


def _check_tensor(tensor: TensorProto) -> None:
    label = f"tensor {tensor.name!r}" if tensor.name else "an unnamed constant tensor"
    if tensor.data_type not in _KNOWN_DTYPES:
        raise ModelImportError(
            f"{label} has an unknown element type ({tensor.data_type}): the file is corrupt or "
            f"from an onnx newer than {onnx.__version__}; re-export it"
        )
    numel = 1
    for d in tensor.dims:
        if d < 0:
            raise ModelImportError(
                f"{label} has a negative dim ({list(tensor.dims)}): "
                "the file is corrupt; re-export it"
            )
        numel *= d
    check_tensor_elems(label, numel, tensor.dims)
    if tensor.data_location == TensorProto.EXTERNAL:
        _check_external_location(tensor, label)
    elif (
        numel <= CHECKED_DATA_ELEMENTS
        and tensor.HasField("raw_data")
        and tensor.data_type not in _VARIABLE_SIZE_DTYPES
    ):  # only small tensors' values are ever read; reading raw_data of a big one copies it
        expected = _raw_nbytes(tensor.data_type, numel)
        if expected is not None and len(tensor.raw_data) != expected:
            raise ModelImportError(
                f"{label} holds {len(tensor.raw_data)} bytes of data but its dims "
                f"{list(tensor.dims)} and dtype need {expected}: the file is corrupt; re-export it"
            )
    elif numel <= CHECKED_DATA_ELEMENTS and tensor_has_inline_data(tensor):
        _check_typed_data(tensor, label)


def _check_typed_data(tensor: TensorProto, label: str) -> None:
    """Values in the typed fields (``float_data``, ``int64_data``, ``string_data``...) must fill
    the dims exactly: decode the (small) tensor as the folding will."""
    from onnx import numpy_helper

    try:
        numpy_helper.to_array(tensor)
    except Exception as exc:  # onnx raises ValueError/TypeError/KeyError variants
        raise ModelImportError(
            f"the data of {label} does not match its dims {list(tensor.dims)} and element type "
            f"({type(exc).__name__}: {str(exc).strip()[:120]}): the file is corrupt; re-export it"
        ) from None


_VARIABLE_SIZE_DTYPES = (TensorProto.STRING, TensorProto.UNDEFINED)
_KNOWN_DTYPES = frozenset(TensorProto.DataType.values()) - {TensorProto.UNDEFINED}
_SUBBYTE_DTYPES = {TensorProto.INT4, TensorProto.UINT4}
if hasattr(TensorProto, "FLOAT4E2M1"):
    _SUBBYTE_DTYPES.add(TensorProto.FLOAT4E2M1)


def _raw_nbytes(data_type: int, numel: int) -> int | None:
    if data_type in _SUBBYTE_DTYPES:
        return (numel + 1) // 2
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None
    return numel * itemsize


def _check_external_location(tensor: TensorProto, label: str) -> None:
    """Refuse external-data locations that leave the model's folder. Nothing is ever opened."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    if location:
        posix, win = PurePosixPath(location), PureWindowsPath(location)
        if (
            posix.is_absolute()
            or win.is_absolute()
            or win.drive
            or location.startswith(("/", "\\", "~"))
            or ".." in posix.parts
            or ".." in win.parts
            or "\x00" in location
        ):
            raise ModelImportError(
                f"{label} points its external data at {location!r}, outside the model's folder: "
                "refused (roofcast never reads external data, and a path that leaves the model "
                "folder is hostile); re-export with a relative location or without external data"
            )
    for key in ("offset", "length"):
        raw = info.get(key)
        if raw is not None and not (raw.isdigit()):
            raise ModelImportError(
                f"{label} has a bad external-data {key} {raw!r}: the file is corrupt; re-export it"
            )


def _check_value_info(vi: onnx.ValueInfoProto) -> None:
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return
    numel = 1
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise ModelImportError(
                    f"tensor {vi.name!r} declares a negative dim ({d.dim_value}): the file is "
                    "corrupt; re-export it (use a named dim such as 'batch' for dynamic axes)"
                )
            numel *= d.dim_value
    check_tensor_elems(f"tensor {vi.name!r}", numel)


def _check_names_and_order(graph: onnx.GraphProto) -> None:
    """One producer per tensor, every node input defined, no cycle; sorts nodes topologically."""
    defined = _defined_names(graph)
    producer = _producers(graph, defined)
    consumers, indegree = _node_edges(graph, defined, producer)
    for vi in graph.output:
        if vi.name not in producer and vi.name not in defined:
            raise ModelImportError(
                f"graph output {vi.name!r} is produced by no node: "
                "the file is corrupt; re-export it"
            )
    order = _kahn(indegree, consumers)
    if len(order) < len(graph.node):
        stuck = sorted(set(range(len(graph.node))) - set(order))[:5]
        raise ModelImportError(
            "the graph has a cycle (nodes "
            + ", ".join(_node_label(graph, i) for i in stuck)
            + " feed each other): ONNX graphs must be acyclic; the file is corrupt; re-export it"
        )
    if order != list(range(len(graph.node))):
        _reorder_nodes(graph, order)


def _defined_names(graph: onnx.GraphProto) -> dict[str, str]:
    """Tensor name -> 'graph input' | 'initializer' for the tensors no node produces."""
    defined: dict[str, str] = {}
    for vi in graph.input:
        defined.setdefault(vi.name, "graph input")
    for t in graph.initializer:
        defined.setdefault(t.name, "initializer")
    for sp in graph.sparse_initializer:
        defined.setdefault(sp.values.name, "initializer")
    return defined


def _producers(graph: onnx.GraphProto, defined: dict[str, str]) -> dict[str, int]:
    """Tensor name -> index of the one node producing it (two producers are refused)."""
    producer: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for out in node.output:
            if not out:
                continue
            if out in producer:
                raise ModelImportError(
                    f"tensor {out!r} is produced by two nodes ({_node_label(graph, producer[out])} "
                    f"and {_node_label(graph, i)}): an ONNX graph needs unique output names; "
                    "the file is corrupt; re-export it"
                )
            if out in defined:
                raise ModelImportError(
                    f"tensor {out!r} is both a {defined[out]} and the output of "
                    f"{_node_label(graph, i)}: the file is corrupt; re-export it"
                )
            producer[out] = i
    return producer


def _node_edges(
    graph: onnx.GraphProto, defined: dict[str, str], producer: dict[str, int]
) -> tuple[list[list[int]], list[int]]:
    """(consumers per node, in-degree per node) of the node graph; a dangling input is refused."""
    consumers: list[list[int]] = [[] for _ in graph.node]
    indegree = [0] * len(graph.node)
    for i, node in enumerate(graph.node):
        for name in node.input:
            if not name or name in defined:
                continue
            src = producer.get(name)
            if src is None:
                raise ModelImportError(
                    f"{_node_label(graph, i)} reads tensor {name!r}, which no node, graph input "
                    "or initializer defines (dangling input): the file is corrupt or incomplete; "
                    "re-export it"
                )
            consumers[src].append(i)
            indegree[i] += 1
    return consumers, indegree


def _reorder_nodes(graph: onnx.GraphProto, order: list[int]) -> None:
    """Rewrite ``graph.node`` in ``order``."""
    nodes = [graph.node[i] for i in order]
    copies = [onnx.NodeProto() for _ in nodes]
    for dst, src in zip(copies, nodes, strict=True):
        dst.CopyFrom(src)
    del graph.node[:]
    graph.node.extend(copies)


def _kahn(indegree: list[int], consumers: list[list[int]]) -> list[int]:
    """Topological order (stable: ties keep file order)."""
    import heapq

    deg = list(indegree)
    ready = [i for i, d in enumerate(deg) if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in consumers[i]:
            deg[j] -= 1
            if deg[j] == 0:
                heapq.heappush(ready, j)
    return order


def _node_label(graph: onnx.GraphProto, i: int) -> str:
    node = graph.node[i]
    return f"node {node.name or f'#{i}'!r} ({node.op_type})"


def skeleton(model: ModelProto) -> bytes:
    """``model`` serialised without the data of initializers over ``CHECKED_DATA_ELEMENTS``
    elements (name, dtype and dims kept; no external-data entry, so nothing can point at a
    file): the graph's structure at the size of its nodes, never its weights."""
    out = ModelProto()
    for name in ("ir_version", "producer_name", "domain", "model_version"):
        setattr(out, name, getattr(model, name))
    out.opset_import.extend(model.opset_import)
    src, dst = model.graph, out.graph
    dst.name = src.name
    for name in ("node", "input", "output", "value_info"):
        getattr(dst, name).extend(getattr(src, name))
    for t in src.initializer:
        small = tensor_has_inline_data(t) and math.prod(t.dims) <= CHECKED_DATA_ELEMENTS
        if small:
            dst.initializer.append(t)
        else:
            dst.initializer.add(name=t.name, data_type=t.data_type, dims=t.dims)
    return out.SerializeToString()


def tensor_has_inline_data(tensor: TensorProto) -> bool:
    """True when the tensor's values are inside the model (never true for external data).

    Use before ``numpy_helper.to_array``, which would otherwise open external-data files.
    """
    if tensor.data_location == TensorProto.EXTERNAL:
        return False
    numel = 1
    for d in tensor.dims:
        numel *= d
    if numel == 0:
        return True
    return bool(
        tensor.HasField("raw_data")  # not the bytes themselves: reading them copies them
        or len(tensor.float_data)
        or len(tensor.int32_data)
        or len(tensor.int64_data)
        or len(tensor.double_data)
        or len(tensor.uint64_data)
        or len(tensor.string_data)
    )
