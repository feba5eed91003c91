"""Concrete shapes for every tensor: dims binding, ONNX shape inference, shape-subgraph folding.

Steps (all on a *working copy* that carries initializer dims but not their weights, so big
models stay cheap to re-infer):

1. Bind the user's dims on the graph inputs before inference, by symbolic name (``batch``) or
   by ``input_name:axis``; the same symbolic names are bound in declared value_info/outputs.
2. ``onnx.shape_inference.infer_shapes(strict_mode=False, data_prop=True)``, afresh each round
   (types of the previous round are forgotten, so a node that now fails is not left with a
   stale shape).
3. Fold shape-computation subgraphs with numpy (``graph_import.fold.FOLDERS``): a node whose
   inputs all have known values (small initializers, Constants, Shape/Size of a tensor whose
   shape is concrete, earlier folded nodes) is evaluated; folded nodes read by unfolded ones
   become ``Constant`` nodes in place, so the next inference sees constant ``shape`` inputs of
   Reshape/Expand/Tile/ConstantOfShape/Range/Slice/Resize/Pad.
4. Type the outputs of ops ONNX has no schema for (onnxruntime contrib ops,
   ``graph_import.contrib_shapes``) and re-infer the ONNX nodes after them node by node.
5. Repeat 2-4 while the graph changes (at most ``max_iterations`` rounds).

The result maps every tensor name to its dtype and dims (ints when concrete; the symbolic name,
or ``"?"`` when unknown, otherwise) plus the known constant values.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, TensorProto, numpy_helper

from graph_import.contrib_shapes import SHAPE_RULES, ContribShapeError
from graph_import.dims import check_dims, split_input_axis
from graph_import.errors import ModelImportError
from graph_import.fold import FOLDERS, MAX_FOLD_ELEMENTS, FoldError, attribute_values, fold_split
from graph_import.load import tensor_has_inline_data

FOLD_MAX_ELEMENTS = MAX_FOLD_ELEMENTS  # larger values are not kept (their shapes still are)
DEFAULT_MAX_ITERATIONS = 100  # each round resolves at least one more tensor; stops when none
UNKNOWN_DIM = "?"
_ONNX_DOMAINS = ("", "ai.onnx")

Dim = int | str


@dataclass(frozen=True)
class TensorShape:
    """dtype name (``'float'``, ``'int64'``...) and dims; ``dims is None`` when the rank is unknown."""

    dtype: str
    dims: tuple[Dim, ...] | None

    @property
    def is_concrete(self) -> bool:
        return self.dims is not None and all(isinstance(d, int) for d in self.dims)


@dataclass
class ShapeResult:
    """Shapes and known values of the model's tensors after binding, inference and folding."""

    tensors: dict[str, TensorShape]
    values: dict[str, np.ndarray]
    bound: dict[str, int]
    unbound: tuple[str, ...]
    iterations: int
    folded_nodes: int = 0
    opsets: dict[str, int] = field(default_factory=dict)


def dtype_name(elem_type: int) -> str:
    """ONNX elem_type -> lower-case name used by TensorInfo (``1 -> 'float'``)."""
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return "undefined"


def infer_concrete(
    model: ModelProto,
    dims: Mapping[str, int] | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> ShapeResult:
    """Bind ``dims``, infer and fold until shapes stop improving. ``model`` is not modified."""
    dims = check_dims(dims or {})
    work, values, recomputed = _working_copy(model)
    bound = bind_dims(work.graph, dims)
    unbound = _unbound_dims(work.graph)
    iterations = 0
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    state = _FoldState.of(work.graph)
    for iterations in range(1, max_iterations + 1):
        if iterations > 1:
            _forget_inferred(work.graph, recomputed)
        work = _infer(work)
        lazy = _LazyShapes(work.graph)
        new = _fold_pass(work.graph, lazy, values, state)
        typed = _propagate_pass(work.graph, lazy, values, opsets)
        edits = _replace_folded(work.graph, values, new, state)
        if not edits and not typed:
            break  # the graph did not change: another inference round would learn nothing
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


def explain_failure(node: onnx.NodeProto, result: ShapeResult) -> str | None:
    """Why ONNX inference gives a node with concrete inputs no concrete outputs, when it says
    (e.g. ``Incompatible dimensions`` when the bound dims exceed a position table)."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    if not _onnx_knows(node.op_type, domain):
        return None
    ins = [result.tensors.get(i) if i else None for i in node.input]
    if any(i and (t is None or not t.is_concrete) for i, t in zip(node.input, ins, strict=True)):
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, result.opsets.get(domain, 1), domain)
        onnx.shape_inference.infer_node_outputs(
            schema, node, _input_types(node, ins), input_data=_input_data(node, result.values),
            opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in result.opsets.items()],
        )
    except Exception as exc:  # the error is the explanation
        return str(exc).strip().splitlines()[0][:200]
    return None


def _input_types(node: onnx.NodeProto, ins: list[TensorShape | None]) -> dict[str, onnx.TypeProto]:
    return {
        name: onnx.helper.make_tensor_type_proto(_elem_type(t.dtype), list(t.dims))
        for name, t in zip(node.input, ins, strict=True)
        if name and t is not None
    }


def _input_data(node: onnx.NodeProto, values: dict[str, np.ndarray]) -> dict[str, TensorProto]:
    return {name: numpy_helper.from_array(values[name], name) for name in node.input if name in values}


def _np_dtype_name(dtype: np.dtype, known: TensorShape | None) -> str:
    if known is not None and known.dtype != "undefined":
        return known.dtype
    try:
        return dtype_name(onnx.helper.np_dtype_to_tensor_dtype(dtype))
    except (KeyError, ValueError, TypeError):
        return "undefined"


def _working_copy(model: ModelProto) -> tuple[ModelProto, dict[str, np.ndarray], set[str]]:
    """A copy with nodes, types and initializer *dims*; weights kept only when small.

    Returns the copy, the values of small initializers (for folding) and the names of the
    tensors ONNX inference types itself (outputs of ops with an ONNX schema).
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
    recomputed = {o for n in src.node if _onnx_knows(n.op_type, n.domain) for o in n.output}
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
    return work, values, recomputed


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
        applied[key] = value
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if not vi.type.HasField("tensor_type"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in by_name:
                applied[d.dim_param] = by_name[d.dim_param]
                d.dim_value = by_name[d.dim_param]
    for d, value in unnamed:
        d.dim_value = value
    return applied


def _all_params(graph: GraphProto) -> set[str]:
    out: set[str] = set()
    for vi in graph.input:
        if vi.type.HasField("tensor_type"):
            out.update(d.dim_param for d in vi.type.tensor_type.shape.dim if d.dim_param)
    return out


def _unbound_dims(graph: GraphProto) -> tuple[str, ...]:
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
            label = d.dim_param or f"{vi.name}:{axis}"
            if label not in names:
                names.append(label)
    return tuple(names)


def _infer(work: ModelProto) -> ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(work, strict_mode=False, data_prop=True)
    except Exception as exc:  # onnx raises InferenceError, ValidationError, RuntimeError...
        raise ModelImportError(
            f"ONNX shape inference failed ({type(exc).__name__}: {str(exc).strip()[:300]}): the "
            "model's declared shapes contradict each other or the --dim values; check the --dim "
            "values against the model's inputs, or run onnx.checker.check_model on the file"
        ) from None


def collect_shapes(graph: GraphProto) -> dict[str, TensorShape]:
    """Types of all top-level tensors declared in a graph (inputs, value_info, outputs,
    initializers; initializers win)."""
    out: dict[str, TensorShape] = {}
    for vi in (*graph.input, *graph.value_info, *graph.output):
        shape = _value_info_shape(vi)
        if shape is not None:
            out[vi.name] = shape
    for init in graph.initializer:
        out[init.name] = TensorShape(dtype_name(init.data_type), tuple(int(d) for d in init.dims))
    return out


class _LazyShapes:
    """``collect_shapes`` parsed on demand: the fold pass needs only the inputs of Shape/Size."""

    def __init__(self, graph: GraphProto) -> None:
        self._protos: dict[str, onnx.ValueInfoProto | TensorProto] = {}
        for vi in (*graph.input, *graph.value_info, *graph.output):
            self._protos[vi.name] = vi
        for init in graph.initializer:
            self._protos[init.name] = init
        self._cache: dict[str, TensorShape | None] = {}

    def get(self, name: str) -> TensorShape | None:
        if name not in self._cache:
            proto = self._protos.get(name)
            if proto is None:
                self._cache[name] = None
            elif isinstance(proto, TensorProto):
                dims = tuple(int(d) for d in proto.dims)
                self._cache[name] = TensorShape(dtype_name(proto.data_type), dims)
            else:
                self._cache[name] = _value_info_shape(proto)
        return self._cache[name]


def _value_info_shape(vi: onnx.ValueInfoProto) -> TensorShape | None:
    if not vi.type.HasField("tensor_type"):
        return None
    tt = vi.type.tensor_type
    dtype = dtype_name(tt.elem_type)
    if not tt.HasField("shape"):
        return TensorShape(dtype, None)
    dims: list[Dim] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or UNKNOWN_DIM)
    return TensorShape(dtype, tuple(dims))


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

    @classmethod
    def of(cls, graph: GraphProto) -> _FoldState:
        pending: list[int] = []
        producer: dict[str, int] = {}
        consumers: dict[str, list[int]] = {}
        # a tensor can become a known value only if it is an initializer or comes from a
        # foldable op whose inputs can (Shape/Size need only their input's shape)
        maybe_const = {t.name for t in graph.initializer}
        for i, node in enumerate(graph.node):
            op = node.op_type
            ins = list(node.input)
            outs = list(node.output)
            foldable = node.domain in _ONNX_DOMAINS and (
                op in _SHAPE_OF_OPS
                or ((op in FOLDERS or op == "Split") and all(not t or t in maybe_const for t in ins))
            )
            if foldable:
                pending.append(i)
                maybe_const.update(outs)
            for name in outs:
                producer[name] = i
            for name in ins:
                consumers.setdefault(name, []).append(i)
        return cls(pending, set(), producer, consumers)


_SHAPE_OF_OPS = ("Shape", "Size")


def _fold_pass(
    graph: GraphProto, tensors: _LazyShapes, values: dict[str, np.ndarray], state: _FoldState
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
    node: onnx.NodeProto, tensors: _LazyShapes, values: dict[str, np.ndarray]
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


def _fold_shape_of(node: onnx.NodeProto, tensors: _LazyShapes) -> list[np.ndarray] | None:
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


@functools.cache
def _onnx_knows(op_type: str, domain: str) -> bool:
    """True when onnx has a schema (hence shape inference) for the op."""
    try:
        return onnx.defs.has(op_type, "" if domain == "ai.onnx" else domain)
    except Exception:  # onnx raises various errors for odd domains
        return False


def _propagate_pass(
    graph: GraphProto, tensors: _LazyShapes, values: dict[str, np.ndarray], opsets: dict[str, int]
) -> set[str]:
    """One forward sweep past the ops ONNX inference cannot type.

    Ops without an ONNX schema get their outputs from ``contrib_shapes.SHAPE_RULES``; ONNX ops
    downstream of a tensor typed in this sweep are re-inferred at once, node by node
    (``onnx.shape_inference.infer_node_outputs``), so a chain of N contrib ops resolves in one
    sweep rather than N whole-graph rounds. New types are written to the graph's value_info
    (or its outputs); returns the newly typed tensor names.
    """
    typed: dict[str, TensorShape] = {}

    def shape_of(name: str) -> TensorShape | None:
        return typed.get(name) or tensors.get(name)

    for node in graph.node:
        domain = "" if node.domain == "ai.onnx" else node.domain
        rule = SHAPE_RULES.get((domain, node.op_type))
        if rule is None and not (typed and any(i in typed for i in node.input)):
            continue  # whole-graph inference already had every chance at this node
        outs = [o for o in node.output if o]
        if not outs or all((t := shape_of(o)) is not None and t.is_concrete for o in outs):
            continue
        ins = [shape_of(i) if i else None for i in node.input]
        if any(i and (t is None or not t.is_concrete) for i, t in zip(node.input, ins, strict=True)):
            continue
        if rule is not None:
            result = _apply_rule(rule, node, ins)
        elif _onnx_knows(node.op_type, domain):
            result = _infer_node(node, domain, ins, values, opsets)
        else:
            continue
        for name, shape in result.items():
            known = shape_of(name)
            if shape is not None and shape.is_concrete and not (known and known.is_concrete):
                typed[name] = shape
    if typed:
        _write_types(graph, typed)
    return set(typed)


def _apply_rule(rule, node: onnx.NodeProto, ins: list[TensorShape | None]) -> dict[str, TensorShape]:
    in_dims = [t.dims if t is not None else None for t in ins]
    try:
        specs = rule(attribute_values(node), in_dims)
    except (ContribShapeError, KeyError, IndexError, ValueError, TypeError, ZeroDivisionError):
        return {}
    first = ins[0].dtype if ins and ins[0] is not None else "undefined"
    out: dict[str, TensorShape] = {}
    for name, spec in zip(node.output, specs, strict=False):
        if name and spec is not None:
            dims, dtype = spec
            if (dtype or first) != "undefined":
                out[name] = TensorShape(dtype or first, tuple(int(d) for d in dims))
    return out


def _infer_node(
    node: onnx.NodeProto,
    domain: str,
    ins: list[TensorShape | None],
    values: dict[str, np.ndarray],
    opsets: dict[str, int],
) -> dict[str, TensorShape]:
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return {}  # If/Loop/Scan bodies need the whole-graph inference context
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, node, _input_types(node, ins), input_data=_input_data(node, values),
            opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in opsets.items()],
        )
    except Exception:  # onnx raises InferenceError, SchemaError, RuntimeError...
        return {}
    out: dict[str, TensorShape] = {}
    for name, type_proto in inferred.items():
        vi = onnx.helper.make_value_info(name, type_proto)
        shape = _value_info_shape(vi)
        if shape is not None:
            out[name] = shape
    return out


def _elem_type(dtype: str) -> int:
    return TensorProto.DataType.Value(dtype.upper())


def _write_types(graph: GraphProto, typed: dict[str, TensorShape]) -> None:
    """Set value_info (graph outputs carry their own declared types) for each typed tensor."""
    where = {v.name: ("v", i) for i, v in enumerate(graph.value_info)}
    where.update({v.name: ("o", i) for i, v in enumerate(graph.output)})
    for name, shape in typed.items():
        vi = onnx.helper.make_tensor_value_info(name, _elem_type(shape.dtype), list(shape.dims))
        kind, index = where.get(name, ("new", -1))
        if kind == "o":
            graph.output[index].CopyFrom(vi)
        elif kind == "v":
            graph.value_info[index].CopyFrom(vi)
        else:
            graph.value_info.append(vi)


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
        if node.op_type == "Constant" and node.domain in _ONNX_DOMAINS:
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
