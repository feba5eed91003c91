"""ModelProto + ShapeResult -> Graph of OpNodes with costs.

One OpNode per top-level ONNX node (empty or repeated names made unique as ``<op_type>_<index>``),
inputs at their ONNX positions, shapes as ints when resolved. A node with a non-concrete shape
gets ``cost=None`` and an entry in ``Graph.unresolved``; a node without a rule is counted in
``Graph.unsupported`` (never costed as zero); nodes whose outputs were all folded at import are
``constant_folded`` and free. ``Graph.params`` / ``weight_bytes`` count each float initializer
once, plus 8/4-bit integer initializers read by quantised ops (other integer tensors are
indices, masks or shapes).

Rationale: ``docs/design/module-notes.md`` (roofcast.graph_import.build).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import networkx as nx
import numpy as np
from onnx import ModelProto, TensorProto, numpy_helper

from roofcast.graph_import.fold import attribute_values
from roofcast.graph_import.load import tensor_has_inline_data
from roofcast.graph_import.propagate import explain_failure
from roofcast.graph_import.shape_types import ShapeResult, TensorShape, dtype_name
from roofcast.graph_import.types import (
    FREE_COST,
    Graph,
    OpCost,
    OpNode,
    TensorInfo,
    dtype_itemsize_bytes,
)

CONST_INPUT_MAX_ELEMENTS = 4096

FLOAT_PARAM_DTYPES = frozenset(
    {
        TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16,
        TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
        TensorProto.FLOAT8E5M2FNUZ,
    }
)
QUANT_PARAM_DTYPES = frozenset(
    {TensorProto.INT8, TensorProto.UINT8, TensorProto.INT4, TensorProto.UINT4}
)
#: ops that read quantised weights (plus every QLinear* op)
QUANT_WEIGHT_OPS = frozenset(
    {
        "DequantizeLinear", "MatMulInteger", "ConvInteger", "MatMulNBits", "QGemm",
        "QAttention", "DynamicQuantizeMatMul", "GatherBlockQuantized", "MatMulBnb4",
        "QOrderedMatMul", "DequantizeBFP",
    }
)

CostFn = Callable[[OpNode], OpCost | None]


def build_graph(
    model: ModelProto,
    shapes: ShapeResult,
    name: str | None = None,
    cost_fn: CostFn | None = None,
    has_rule: Callable[[str, str], bool] | None = None,
) -> Graph:
    """Assemble the Graph.

    ``cost_fn`` defaults to ``graph_import.costs.cost_of``; ``has_rule(domain, op_type)`` (default:
    the cost registry) tells whether an *unresolved* node's op would have a rule, so op types
    without one are counted in ``unsupported`` even when their shapes are unknown.
    """
    cost_fn, has_rule = _cost_rules(cost_fn, has_rule)
    g = model.graph
    initializers = {t.name: t for t in g.initializer}
    infos: dict[str, TensorInfo] = {}
    unresolved: dict[str, str] = {}
    unsupported: Counter[str] = Counter()
    nxg = nx.DiGraph()
    producer: dict[str, str] = {}
    used_names: set[str] = set()
    unbound = set(shapes.unbound)
    for index, node in enumerate(g.node):
        node_name = _unique_name(node.name, node.op_type, index, used_names)
        fields = _op_fields(node, node_name, shapes, initializers, infos)
        op = OpNode(**fields, cost=None)
        reason = _node_reason(node, op, shapes, unbound, producer, unresolved)
        if reason is not None:
            unresolved[node_name] = reason
            if not has_rule(node.domain, node.op_type):
                unsupported[_op_label(node.domain, node.op_type)] += 1
        else:
            op = _costed(op, fields, cost_fn, shapes, unresolved, unsupported)
        nxg.add_node(node_name, op=op)
        _link(nxg, node_name, node, producer, infos)
    nx.freeze(nxg)  # an imported graph does not change: Graph.order keeps its sort
    return _graph(model, shapes, name, nxg, infos, unsupported, unresolved)


def _cost_rules(
    cost_fn: CostFn | None, has_rule: Callable[[str, str], bool] | None
) -> tuple[CostFn, Callable[[str, str], bool]]:
    """The cost function and the has-a-rule test, defaults filled in."""
    if cost_fn is None:
        from roofcast.graph_import.costs import (
            cost_of as cost_fn,  # late: costs import types, not us
        )
    if has_rule is None:
        has_rule = _registry_has_rule if cost_fn is _default_cost_fn() else (lambda d, o: True)
    return cost_fn, has_rule


def _info(tensor: str, shapes: ShapeResult, infos: dict[str, TensorInfo]) -> TensorInfo:
    """The TensorInfo of ``tensor``, made once from the shape result and kept in ``infos``."""
    ti = infos.get(tensor)
    if ti is None:
        ts = shapes.tensors.get(tensor)
        if ts is None:
            ti = TensorInfo(tensor, ("?",), "undefined")  # type: ignore[arg-type]
        else:
            dims = ts.dims if ts.dims is not None else ("?",)
            ti = TensorInfo(tensor, dims, ts.dtype)  # type: ignore[arg-type]
        infos[tensor] = ti
    return ti


def _op_fields(
    node,
    node_name: str,
    shapes: ShapeResult,
    initializers: dict[str, TensorProto],
    infos: dict[str, TensorInfo],
) -> dict:
    """OpNode fields of one ONNX node (all but the cost)."""
    op_type = node.op_type
    node_inputs, node_outputs = list(node.input), list(node.output)
    return {
        "name": node_name,
        "op_type": op_type,
        "domain": node.domain,
        "inputs": tuple(_info(t, shapes, infos) if t else None for t in node_inputs),
        "outputs": tuple(_info(t, shapes, infos) for t in node_outputs if t),
        "attrs": _attrs(node, op_type, node_outputs, shapes),
        "weight_inputs": frozenset(t for t in node_inputs if t in initializers),
        "const_inputs": _const_inputs(node_inputs, shapes, initializers),
    }


def _node_reason(
    node,
    op: OpNode,
    shapes: ShapeResult,
    unbound: set[str],
    producer: dict[str, str],
    unresolved: dict[str, str],
) -> str | None:
    """Why ``node`` cannot be costed (unresolved shapes, bad Gather indices), or None."""
    node_inputs = list(node.input)
    reason = _unresolved_reason(
        node_inputs,
        list(node.output),
        shapes.tensors,
        unbound,
        explain=lambda: explain_failure(node, shapes),
    )
    if reason is None and node.op_type == "Gather" and node.domain in ("", "ai.onnx"):
        reason = _gather_index_problem(node_inputs, op.attrs, shapes)
    if reason is not None and not unbound and reason.startswith("input"):
        upstream = next(
            (producer[t] for t in node_inputs if t and producer.get(t) in unresolved), None
        )
        if upstream is not None:
            reason = f"an input comes from the unresolved node {upstream!r} (see its reason)"
    return reason


def _costed(
    op: OpNode,
    fields: dict,
    cost_fn: CostFn,
    shapes: ShapeResult,
    unresolved: dict[str, str],
    unsupported: Counter[str],
) -> OpNode:
    """``op`` with its cost; a failing rule goes to ``unresolved``, no rule to ``unsupported``."""
    try:
        cost = cost_fn(op)
    except Exception as exc:  # a rule's failure is reported per node, never hidden
        unresolved[op.name] = f"cost rule failed: {type(exc).__name__}: {exc}"
        return op
    if cost is None:
        unsupported[_op_label(op.domain, op.op_type)] += 1
        return op
    if _constant_folded([t.name for t in op.outputs], shapes):
        return OpNode(**fields, cost=FREE_COST, constant_folded=True)
    return OpNode(**fields, cost=cost)  # cheaper than dataclasses.replace


def _link(
    nxg: nx.DiGraph, node_name: str, node, producer: dict[str, str], infos: dict[str, TensorInfo]
) -> None:
    """Edges from the producers of ``node``'s inputs; ``node`` becomes its outputs' producer."""
    for t in node.input:
        src = producer.get(t) if t else None
        if src is not None:
            if nxg.has_edge(src, node_name):
                nxg.edges[src, node_name]["tensors"] += (infos[t],)
            else:
                nxg.add_edge(src, node_name, tensor=infos[t], tensors=(infos[t],))
    for t in node.output:
        if t:
            producer[t] = node_name


def _graph(
    model: ModelProto,
    shapes: ShapeResult,
    name: str | None,
    nxg: nx.DiGraph,
    infos: dict[str, TensorInfo],
    unsupported: Counter[str],
    unresolved: dict[str, str],
) -> Graph:
    """The Graph of the built node graph, with the model's inputs, outputs and weights."""
    g = model.graph
    params, weight_bytes = count_params(model)
    opset = max(
        (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0
    )
    init_names = {t.name for t in g.initializer}
    return Graph(
        name=name or g.name or "model",
        nx_graph=nxg,
        inputs=tuple(_info(vi.name, shapes, infos) for vi in g.input if vi.name not in init_names),
        outputs=tuple(_info(vi.name, shapes, infos) for vi in g.output),
        params=params,
        weight_bytes=weight_bytes,
        opset=opset,
        unsupported=dict(unsupported),
        unresolved=unresolved,
        unbound_dims=shapes.unbound,
        dims=dict(shapes.bound),
    )


def count_params(model: ModelProto) -> tuple[int, int]:
    """(elements, bytes) of the weight initializers (see module docstring for the rule)."""
    quant_read = {
        name
        for node in model.graph.node
        if node.op_type in QUANT_WEIGHT_OPS or node.op_type.startswith("QLinear")
        for name in node.input
    }
    elements = 0
    n_bytes = 0
    for t in model.graph.initializer:
        if t.data_type not in FLOAT_PARAM_DTYPES and not (
            t.data_type in QUANT_PARAM_DTYPES and t.name in quant_read
        ):
            continue
        numel = 1
        for d in t.dims:
            numel *= d
        elements += numel
        if t.data_type in (TensorProto.INT4, TensorProto.UINT4):
            n_bytes += (numel + 1) // 2
        else:
            n_bytes += numel * dtype_itemsize_bytes(dtype_name(t.data_type))
    return elements, n_bytes


def _constant_folded(outputs: list[str], shapes: ShapeResult) -> bool:
    """True when every output's value was computed at import (a shape computation: Shape ->
    Gather -> Concat ..., or a Range/ConstantOfShape of bound dims). With the dims bound, an
    inference runtime folds these nodes away at session creation, so no kernel runs them."""
    outs = [t for t in outputs if t]
    return bool(outs) and all(t in shapes.values for t in outs)


def _op_label(domain: str, op_type: str) -> str:
    return op_type if domain in ("", "ai.onnx") else f"{domain}::{op_type}"


def _unique_name(name: str, op_type: str, index: int, used: set[str]) -> str:
    candidate = name or f"{op_type}_{index}"
    if candidate in used:
        candidate = f"{candidate}_{index}"
    while candidate in used:
        candidate += "_"
    used.add(candidate)
    return candidate


def _const_inputs(
    names, shapes: ShapeResult, initializers: dict[str, TensorProto]
) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for t in names:
        if not t:
            continue
        value = shapes.values.get(t)
        if value is None:
            init = initializers.get(t)
            if init is None or not tensor_has_inline_data(init):
                continue
            numel = 1
            for d in init.dims:
                numel *= d
            if numel > CONST_INPUT_MAX_ELEMENTS:
                continue
            value = numpy_helper.to_array(init)
        if value.size <= CONST_INPUT_MAX_ELEMENTS:
            out[t] = value
    return out


def _unresolved_reason(
    inputs,
    outputs,
    tensors: dict[str, TensorShape],
    unbound: set[str],
    explain: Callable[[], str | None] = lambda: None,
) -> str | None:
    """Why a node's shapes are not concrete (first offending tensor), or None when they are."""
    for kind, names in (("input", inputs), ("output", outputs)):
        for t in names:
            if not t:
                continue
            ts = tensors.get(t)
            problem = _tensor_problem(ts)
            if problem is None:
                continue
            open_dim = _first_open_dim(ts)
            if open_dim is not None and open_dim[1] in unbound:
                axis, d = open_dim
                return (
                    f"{kind} {t!r} dim {axis} is the unbound symbolic dim {d!r}: "
                    f"bind it, e.g. --dim {d}=1"
                )
            return _problem_reason(kind, t, problem, unbound, explain)
    return None


def _first_open_dim(ts: TensorShape | None) -> tuple[int, str] | None:
    """(axis, dim) of the first non-integer dim of a typed tensor of known rank, else None."""
    if ts is None or ts.dims is None or ts.dtype == "undefined":
        return None
    return next(((axis, d) for axis, d in enumerate(ts.dims) if not isinstance(d, int)), None)


def _tensor_problem(ts: TensorShape | None) -> str | None:
    """What keeps a tensor's shape from being concrete, or None when it is concrete."""
    if ts is None:
        return "has no type (shape inference could not reach it)"
    if ts.dims is None:
        return "has unknown rank"
    if ts.dtype == "undefined":
        return "has no element type"
    open_dim = _first_open_dim(ts)
    return None if open_dim is None else f"dim {open_dim[0]} is not concrete ({open_dim[1]!r})"


def _problem_reason(
    kind: str, t: str, problem: str, unbound: set[str], explain: Callable[[], str | None]
) -> str:
    """The unresolved reason of a tensor with ``problem``, with the likely cause and a fix."""
    if unbound:
        hint = ", ".join(f"--dim {u}=1" for u in sorted(unbound))
        return (
            f"{kind} {t!r} {problem}, likely because the model's dims "
            f"{', '.join(sorted(unbound))} are unbound: bind them ({hint})"
        )
    why = explain() if kind == "output" else None
    if why:
        return (
            f"{kind} {t!r} {problem}: ONNX shape inference rejects this node with the "
            f"bound dims ({why}); check that the --dim values are within what the model "
            "supports (e.g. a sequence no longer than its position table)"
        )
    return (
        f"{kind} {t!r} {problem}: it depends on data values (e.g. NonZero) or on an op "
        "shape inference cannot follow"
    )


def _attrs(node, op_type: str, outputs: list[str], shapes: ShapeResult) -> dict:
    """Plain attribute values; a folded Constant reuses its value rather than decoding again."""
    if op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
        value = shapes.values.get(outputs[0]) if outputs else None
        if value is not None:
            return {"value": value}
    return attribute_values(node)


def _gather_index_problem(inputs: list[str], attrs, shapes: ShapeResult) -> str | None:
    """Known Gather indices outside the gathered axis (positions 0..599 into a 512-row position
    table): the graph cannot run at these dims although every shape is consistent."""
    if len(inputs) < 2:
        return None
    idx = shapes.values.get(inputs[1])
    data = shapes.tensors.get(inputs[0])
    if idx is None or idx.size == 0 or data is None or not data.is_concrete:
        return None
    axis = int(attrs.get("axis", 0))
    size = data.dims[axis]
    low, high = int(idx.min()), int(idx.max())
    if low >= -size and high < size:
        return None
    return (
        f"input {inputs[1]!r} indexes rows {low}..{high} of {inputs[0]!r}, which has {size} "
        "along that axis: the model cannot run with the bound dims; check that the --dim values "
        "are within what the model supports (e.g. a sequence no longer than its position table)"
    )


def _default_cost_fn() -> CostFn:
    from roofcast.graph_import.costs import cost_of

    return cost_of


def _registry_has_rule(domain: str, op_type: str) -> bool:
    from roofcast.graph_import.costs import FREE_OPS
    from roofcast.graph_import.costs.registry import lookup

    return (domain in ("", "ai.onnx") and op_type in FREE_OPS) or lookup(
        op_type, domain
    ) is not None
