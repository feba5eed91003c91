"""Concrete shapes for every tensor: dims binding, ONNX shape inference, shape-subgraph folding.

On a working copy without weight data: bind the user's dims (by symbolic name or
``input:axis``), run ``onnx.shape_inference.infer_shapes(data_prop=True)`` afresh, fold
shape-computation subgraphs with numpy (``graph_import.fold``) into ``Constant`` nodes, type the
outputs of contrib ops (``contrib_shapes``) and re-infer after them (``propagate``); repeat while
the graph changes (at most ``max_iterations`` rounds). The result maps every tensor to its dtype
and dims (ints when concrete, else the symbolic name or ``"?"``) plus known constant values.

Rationale: ``docs/design/module-notes.md`` (roofcast.graph_import.shapes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, TensorProto, numpy_helper

from roofcast.graph_import.budgets import (
    TENSOR_ELEMS,
    check_described_shapes,
    check_user_dims,
)
from roofcast.graph_import.dims import check_dims, dim_expr_names, eval_dim_expr, split_input_axis
from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.fold import (
    FOLDERS,
    MAX_FOLD_ELEMENTS,
    FoldError,
    attribute_values,
    fold_split,
)
from roofcast.graph_import.generators import (
    DATA_PROP_MAX_VECTOR_ELEMS,
    hide_large_generators,
    long_vector_elems,
)
from roofcast.graph_import.load import tensor_has_inline_data
from roofcast.graph_import.propagate import explain_failure, propagate_pass
from roofcast.graph_import.shape_types import (
    ONNX_DOMAINS,
    LazyShapes,
    ShapeResult,
    TensorShape,
    collect_shapes,
    dtype_name,
    onnx_knows,
)

__all__ = [
    "ShapeResult",
    "TensorShape",
    "bind_dims",
    "collect_shapes",
    "dtype_name",
    "explain_failure",
    "infer_concrete",
]

FOLD_MAX_ELEMENTS = MAX_FOLD_ELEMENTS  # larger values are not kept (their shapes still are)
DEFAULT_MAX_ITERATIONS = 100  # each round resolves at least one more tensor; stops when none


def infer_concrete(
    model: ModelProto,
    dims: Mapping[str, int] | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> ShapeResult:
    """Bind ``dims``, infer and fold until shapes stop improving. ``model`` is not modified."""
    dims = check_dims(dims or {})
    check_user_dims(dims)
    state = _FoldState.of(model.graph)
    recomputed = state.recomputed
    work, values = _working_copy(model, recomputed)
    bound = bind_dims(work.graph, dims)
    unbound = _unbound_dims(work.graph, set(bound))
    iterations = 0
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    inferred_vectors = 0  # long 1-D tensors the previous round inferred
    for iterations in range(1, max_iterations + 1):
        if iterations > 1:
            inferred_vectors = long_vector_elems(work.graph)
            _forget_inferred(work.graph, recomputed)
        # fold what the bound inputs already give, so generators (Range...) are sized first
        known = _fold_pass(work.graph, LazyShapes(work.graph), values, state)
        hide_large_generators(work.graph, values, LazyShapes(work.graph))
        vectors = max(inferred_vectors, long_vector_elems(work.graph))
        work = _infer(work, data_prop=vectors <= DATA_PROP_MAX_VECTOR_ELEMS)
        check_described_shapes(work.graph)
        lazy = LazyShapes(work.graph)
        new = _fold_pass(work.graph, lazy, values, state) | known
        typed = propagate_pass(work.graph, lazy, values, opsets)
        edits = _replace_folded(work.graph, values, new, state)
        if not edits and not typed:
            break  # the graph did not change: another inference round would learn nothing
    check_described_shapes(work.graph)  # the last round's contrib-op types included
    folded_nodes = len(state.folded)
    tensors = collect_shapes(work.graph)
    for name, value in values.items():
        tensors[name] = TensorShape(_np_dtype_name(value.dtype, tensors.get(name)), value.shape)
    return ShapeResult(
        tensors=tensors,
        values=values,
        bound=bound,
        unbound=unbound,
        iterations=iterations,
        folded_nodes=folded_nodes,
        opsets=opsets,
    )


def _np_dtype_name(dtype: np.dtype, known: TensorShape | None) -> str:
    if known is not None and known.dtype != "undefined":
        return known.dtype
    try:
        return dtype_name(onnx.helper.np_dtype_to_tensor_dtype(dtype))
    except (KeyError, ValueError, TypeError):
        return "undefined"


def _working_copy(
    model: ModelProto, recomputed: set[str]
) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """A copy with nodes, types and initializer *dims*; weights kept only when small.

    ``recomputed``: the tensors ONNX inference types itself (outputs of ops with an ONNX
    schema). Returns the copy and the values of small initializers (for folding).
    """
    work = ModelProto()
    work.ir_version = model.ir_version
    work.opset_import.extend(model.opset_import)
    work.functions.extend(model.functions)
    g, src = work.graph, model.graph
    g.name = src.name
    g.node.extend(src.node)
    g.input.extend(src.input)
    # Declared types of ai.onnx node outputs are dropped: ONNX inference recomputes them from
    # the bound inputs, and exporters leave traced sizes in them (a dynamo LSTM export declares
    # its sequence axis as the sample's 7). Custom-domain outputs keep theirs: nothing else
    # knows them.
    g.output.extend(src.output)
    for vi in g.output:
        if vi.name in recomputed and vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    g.value_info.extend(vi for vi in src.value_info if vi.name not in recomputed)
    values: dict[str, np.ndarray] = {}
    for init in src.initializer:
        numel = int(np.prod(init.dims, dtype=np.int64)) if init.dims else 1
        if numel <= FOLD_MAX_ELEMENTS and tensor_has_inline_data(init):
            g.initializer.append(init)
            with contextlib.suppress(ValueError, TypeError):
                values[init.name] = numpy_helper.to_array(init)
        else:
            stub = g.initializer.add()
            stub.name = init.name
            stub.data_type = init.data_type
            stub.dims.extend(init.dims)
            stub.data_location = TensorProto.EXTERNAL  # no data: inference reads dims only
            entry = stub.external_data.add()
            entry.key, entry.value = "location", "roofcast-weights-not-loaded"
    g.sparse_initializer.extend(src.sparse_initializer)
    return work, values


def _forget_inferred(graph: GraphProto, recomputed: set[str]) -> None:
    """Drop the previous round's inferred types before re-inferring.

    ONNX inference keeps a tensor's old type when its node now fails (non-strict mode), so a
    type inferred before a shape input was folded could survive a later, decisive failure (an
    Expand of a 512-position table to a 2048 sequence). Each round therefore infers afresh.
    """
    kept = [vi for vi in graph.value_info if vi.name not in recomputed]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    for vi in graph.output:
        if vi.name in recomputed and vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")


def bind_dims(graph: GraphProto, dims: Mapping[str, int]) -> dict[str, int]:
    """Rewrite graph-input dims in place; returns the bindings that matched something.

    Name bindings (``batch``) apply to every dim with that ``dim_param`` (inputs, outputs,
    value_info). ``input:axis`` bindings must name an existing input and axis; when that axis is
    a named dim, the name is bound everywhere (ONNX: one name, one size), so
    ``input_ids:1=128`` also binds ``attention_mask``'s ``sequence`` axis. A binding that
    contradicts a fixed dim or another binding raises ModelImportError. Name bindings that
    match no dim are ignored (not returned), so one ``--dim sequence=128`` can be passed to
    models with and without a sequence axis.
    """
    initializer_names = {t.name for t in graph.initializer}
    inputs = {vi.name: vi for vi in graph.input if vi.name not in initializer_names}
    applied: dict[str, int] = {}
    params = _all_params(graph)
    by_name = {k: v for k, v in dims.items() if split_input_axis(k) is None or k in params}
    unnamed: list[tuple[onnx.TensorShapeProto.Dimension, int]] = []
    for key, value in dims.items():
        if split_input_axis(key) is None or key in params:
            continue  # a plain dim name, already in by_name
        _bind_input_axis(key, value, inputs, by_name, unnamed)
        applied[key] = value
    _apply_named(graph, by_name, applied)
    for d, value in unnamed:
        d.dim_value = value
    return applied


def _bind_input_axis(
    key: str,
    value: int,
    inputs: Mapping[str, onnx.ValueInfoProto],
    by_name: dict[str, int],
    unnamed: list[tuple[onnx.TensorShapeProto.Dimension, int]],
) -> None:
    """Bind ``input:axis`` = ``value``: a named axis goes to ``by_name``, an unnamed one to
    ``unnamed``; a fixed axis must already have that size."""
    name, axis = split_input_axis(key)  # type: ignore[misc]
    vi = inputs.get(name)
    if vi is None:
        raise ModelImportError(
            f"--dim {key}={value}: the model has no input {name!r}; its inputs are "
            f"{', '.join(sorted(inputs)) or '(none)'}"
        )
    shape_dims = vi.type.tensor_type.shape.dim
    rank = len(shape_dims)
    if not -rank <= axis < rank:
        raise ModelImportError(
            f"--dim {key}={value}: input {name!r} has rank {rank}, so axis {axis} does not "
            f"exist; use an axis in 0..{rank - 1}"
        )
    d = shape_dims[axis % rank]
    if d.HasField("dim_value"):
        if d.dim_value != value:
            raise ModelImportError(
                f"--dim {key}={value}: axis {axis % rank} of input {name!r} is fixed at "
                f"{d.dim_value} by the model; drop this --dim or re-export with a dynamic axis"
            )
    elif d.dim_param:
        earlier = by_name.get(d.dim_param)
        if earlier is not None and earlier != value:
            raise ModelImportError(
                f"--dim {key}={value} contradicts --dim {d.dim_param}={earlier}: axis "
                f"{axis % rank} of input {name!r} is the dim {d.dim_param!r}; give one value"
            )
        by_name[d.dim_param] = value
    else:
        unnamed.append((d, value))


def _apply_named(graph: GraphProto, by_name: dict[str, int], applied: dict[str, int]) -> None:
    """Set every named dim bound in ``by_name`` (and every dim expression over them)."""
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if not vi.type.HasField("tensor_type"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_param"):
                continue
            if d.dim_param in by_name:
                applied[d.dim_param] = by_name[d.dim_param]
                d.dim_value = by_name[d.dim_param]
            elif by_name and (value := eval_dim_expr(d.dim_param, by_name)) is not None:
                if value > TENSOR_ELEMS.value():
                    raise TENSOR_ELEMS.refuse(
                        f"dim {d.dim_param!r} of tensor {vi.name!r} is {value} with the bound dims"
                    )
                d.dim_value = value  # a derived axis: 'past_sequence + sequence', '2*s0'


def _all_params(graph: GraphProto) -> set[str]:
    out: set[str] = set()
    for vi in graph.input:
        if vi.type.HasField("tensor_type"):
            out.update(d.dim_param for d in vi.type.tensor_type.shape.dim if d.dim_param)
    return out


def _unbound_dims(graph: GraphProto, bound: set[str]) -> tuple[str, ...]:
    """Symbolic dims left on graph inputs: dim names, or ``input:axis`` for unnamed ones."""
    initializer_names = {t.name for t in graph.initializer}
    names: list[str] = []
    for vi in graph.input:
        if vi.name in initializer_names or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            names.append(f"{vi.name}:*")
            continue
        for axis, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value"):
                continue
            labels = [d.dim_param] if d.dim_param else [f"{vi.name}:{axis}"]
            if d.dim_param and not d.dim_param.isidentifier():
                inner = dim_expr_names(d.dim_param)  # report the unbound names of a derived axis
                labels = sorted(inner - bound) if inner else labels
            for label in labels:
                if label not in names:
                    names.append(label)
    return tuple(names)


def _infer(work: ModelProto, data_prop: bool = True) -> ModelProto:
    """ONNX shape inference; ``data_prop`` off when long 1-D tensors would make ONNX write one
    symbolic dim per element (``generators.DATA_PROP_MAX_VECTOR_ELEMS``)."""
    try:
        return onnx.shape_inference.infer_shapes(work, strict_mode=False, data_prop=data_prop)
    except Exception as exc:  # onnx raises InferenceError, ValidationError, RuntimeError...
        raise ModelImportError(
            f"ONNX shape inference failed ({type(exc).__name__}: {str(exc).strip()[:300]}): the "
            "model's declared shapes contradict each other or the --dim values; check the --dim "
            "values against the model's inputs, or run onnx.checker.check_model on the file"
        ) from None


@dataclass
class _FoldState:
    """Bookkeeping across folding rounds (node indices are stable: nodes are edited in place).

    ``pending``: nodes that may still fold (foldable op, inputs not all known yet);
    ``folded``: nodes whose outputs are all known; ``producer`` / ``consumers`` by tensor name.
    """

    pending: list[int]
    folded: set[int]
    producer: dict[str, int]
    consumers: dict[str, list[int]]
    recomputed: set[str]  # outputs of ops with an ONNX schema: ONNX inference types them

    @classmethod
    def of(cls, graph: GraphProto) -> _FoldState:
        pending: list[int] = []
        producer: dict[str, int] = {}
        consumers: dict[str, list[int]] = {}
        recomputed: set[str] = set()
        # a tensor can become a known value only if it is an initializer or comes from a
        # foldable op whose inputs can (Shape/Size need only their input's shape)
        maybe_const = {t.name for t in graph.initializer}
        for i, node in enumerate(graph.node):
            op, domain = node.op_type, node.domain
            ins = list(node.input)
            outs = list(node.output)
            if onnx_knows(op, domain):
                recomputed.update(outs)
            foldable = domain in ONNX_DOMAINS and (
                op in _SHAPE_OF_OPS
                or (
                    (op in FOLDERS or op == "Split") and all(not t or t in maybe_const for t in ins)
                )
            )
            if foldable:
                pending.append(i)
                maybe_const.update(outs)
            for name in outs:
                producer[name] = i
            for name in ins:
                consumers.setdefault(name, []).append(i)
        return cls(pending, set(), producer, consumers, recomputed)


_SHAPE_OF_OPS = ("Shape", "Size")


def _fold_pass(
    graph: GraphProto, tensors: LazyShapes, values: dict[str, np.ndarray], state: _FoldState
) -> set[str]:
    """Evaluate pending nodes whose inputs are known; adds to ``values``; returns new names."""
    new: set[str] = set()
    still: list[int] = []
    nodes = graph.node
    for i in state.pending:
        node = nodes[i]
        outs = _fold_node(node, tensors, values)
        if outs is None:
            still.append(i)
            continue
        complete = True
        for name, value in zip(node.output, outs, strict=False):
            if not name:
                continue
            if value.size > FOLD_MAX_ELEMENTS:
                complete = False  # too large to keep; its shape still comes from inference
            elif name not in values:
                values[name] = value
                new.add(name)
        if complete:
            state.folded.add(i)
    state.pending = still
    return new


def _fold_node(
    node: onnx.NodeProto, tensors: LazyShapes, values: dict[str, np.ndarray]
) -> list[np.ndarray] | None:
    op = node.op_type
    if op in _SHAPE_OF_OPS:
        try:
            return _fold_shape_of(node, tensors)
        except (TypeError, ValueError):  # malformed start/end attributes
            return None
    if op != "Split" and op not in FOLDERS:
        return None
    inputs: list[np.ndarray | None] = []
    for name in node.input:
        if not name:
            inputs.append(None)
        elif name in values:
            inputs.append(values[name])
        else:
            return None
    attrs = attribute_values(node)
    try:
        with np.errstate(all="ignore"):
            if op == "Split":
                return fold_split(attrs, inputs, len(node.output))
            return FOLDERS[op](attrs, inputs)
    except (FoldError, ValueError, TypeError, IndexError, KeyError, OverflowError, MemoryError):
        return None  # left to shape inference; the node is costed from inferred shapes


def _fold_shape_of(node: onnx.NodeProto, tensors: LazyShapes) -> list[np.ndarray] | None:
    src = tensors.get(node.input[0])
    if src is None or src.dims is None:
        return None
    dims = src.dims
    if node.op_type == "Size":
        if not all(isinstance(d, int) for d in dims):
            return None
        return [np.array(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)]
    attrs = attribute_values(node)
    rank = len(dims)
    start = int(attrs.get("start", 0))
    end = int(attrs.get("end", rank))
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    picked = dims[start:end]
    if not all(isinstance(d, int) for d in picked):
        return None
    return [np.array(picked, dtype=np.int64)]


def _replace_folded(
    graph: GraphProto, values: dict[str, np.ndarray], new: set[str], state: _FoldState
) -> int:
    """Turn folded nodes on the frontier (an output read by a node that did not fold) into
    constants, in place; returns how many nodes were edited.

    A single-output node becomes a ``Constant`` holding its value: nothing is copied or moved,
    which matters on graphs of thousands of nodes. A multi-output node (Split) keeps running
    under renamed outputs while initializers carry its values. Folded nodes read only by other
    folded nodes stay as they are.
    """
    frontier = {
        state.producer[name]
        for name in new
        if name in state.producer
        and any(c not in state.folded for c in state.consumers.get(name, ()))
    }
    added: set[str] = set()
    edits = 0
    for i in sorted(frontier):
        if i not in state.folded:
            continue
        node = graph.node[i]
        if node.op_type == "Constant" and node.domain in ONNX_DOMAINS:
            continue
        edits += 1
        if len(node.output) == 1:
            name = node.output[0]
            node.CopyFrom(
                onnx.helper.make_node(
                    "Constant", [], [name], name=node.name,
                    value=numpy_helper.from_array(values[name], name),
                )
            )
            continue
        for j, name in enumerate(node.output):
            if name:
                graph.initializer.append(numpy_helper.from_array(values[name], name))
                added.add(name)
                node.output[j] = f"{name}__roofcast_folded"
    if added:  # value_info overrides initializer types in ONNX inference: drop stale ones
        fresh = [vi for vi in graph.value_info if vi.name not in added]
        del graph.value_info[:]
        graph.value_info.extend(fresh)
    return edits
