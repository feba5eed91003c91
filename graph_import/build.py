"""ModelProto + ShapeResult -> Graph of OpNodes with costs.

- One OpNode per top-level ONNX node; empty or repeated node names are made unique
  (``<op_type>_<index>``).
- ``inputs`` keep ONNX positions (None for an omitted optional input); shapes are concrete ints
  when resolved. A tensor whose shape is not concrete keeps its symbolic dims as strings
  (``("batch", 128)``, ``"?"`` for unknown) and its nodes get ``cost=None`` and an entry in
  ``Graph.unresolved`` saying which tensor and dim.
- Costs come from ``graph_import.costs.cost_of(node)``: None means no rule (counted in
  ``Graph.unsupported``); an exception from a rule puts the node in ``unresolved`` with the
  exception text.
- Nodes whose every output value was folded at import (shape computations on bound dims) are
  ``constant_folded`` and cost ``FREE_COST``: a runtime with the same static shapes folds them.
- Parameters (``Graph.params``, ``Graph.weight_bytes``): initializers of floating dtypes plus
  8-bit / 4-bit integer initializers that a quantised op reads (``QUANT_WEIGHT_OPS``, QLinear*):
  quantised weights. Other integer, bool and string initializers are shape helpers, indices or
  masks (a uint8 causal-mask buffer is not a weight) and are not counted. Each initializer is
  counted once even when several nodes read it (tied weights). Constant nodes are not counted
  (exporters put weights in initializers; Constants carry scalars and shapes).
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
    if cost_fn is None:
        from roofcast.graph_import.costs import (
            cost_of as cost_fn,  # late: costs import types, not us
        )
    if has_rule is None:
        has_rule = _registry_has_rule if cost_fn is _default_cost_fn() else (lambda d, o: True)
    g = model.graph
    initializers = {t.name: t for t in g.initializer}
    infos: dict[str, TensorInfo] = {}
    unresolved: dict[str, str] = {}
    unsupported: Counter[str] = Counter()
    nxg = nx.DiGraph()
    producer: dict[str, str] = {}
    used_names: set[str] = set()
    unbound = set(shapes.unbound)

    def info(tensor: str) -> TensorInfo:
        ti = infos.get(tensor)
        if ti is None:
            ts = shapes.tensors.get(tensor)
            if ts is None:
                ti = TensorInfo(tensor, ("?",), "undefined")  # type: ignore[arg-type]
            else:
                ti = TensorInfo(tensor, ts.dims if ts.dims is not None else ("?",), ts.dtype)  # type: ignore[arg-type]
            infos[tensor] = ti
        return ti

    for index, node in enumerate(g.node):
        op_type, domain = node.op_type, node.domain
        node_inputs, node_outputs = list(node.input), list(node.output)
        node_name = _unique_name(node.name, op_type, index, used_names)
        in_infos = tuple(info(t) if t else None for t in node_inputs)
        out_infos = tuple(info(t) for t in node_outputs if t)
        weight_inputs = frozenset(t for t in node_inputs if t in initializers)
        const_inputs = _const_inputs(node_inputs, shapes, initializers)
        fields = {
            "name": node_name,
            "op_type": op_type,
            "domain": domain,
            "inputs": in_infos,
            "outputs": out_infos,
            "attrs": _attrs(node, op_type, node_outputs, shapes),
            "weight_inputs": weight_inputs,
            "const_inputs": const_inputs,
        }
        op = OpNode(**fields, cost=None)
        reason = _unresolved_reason(
            node_inputs, node_outputs, shapes.tensors, unbound,
            explain=lambda node=node: explain_failure(node, shapes),
        )
        if reason is None and op_type == "Gather" and domain in ("", "ai.onnx"):
            reason = _gather_index_problem(node_inputs, op.attrs, shapes)
        if reason is not None and not unbound and reason.startswith("input"):
            upstream = next(
                (producer[t] for t in node_inputs if t and producer.get(t) in unresolved), None
            )
            if upstream is not None:
                reason = f"an input comes from the unresolved node {upstream!r} (see its reason)"
        if reason is not None:
            unresolved[node_name] = reason
            if not has_rule(domain, op_type):
                unsupported[_op_label(domain, op_type)] += 1
        else:
            try:
                cost = cost_fn(op)
            except Exception as exc:  # a rule's failure is reported per node, never hidden
                unresolved[node_name] = f"cost rule failed: {type(exc).__name__}: {exc}"
            else:
                if cost is None:
                    unsupported[_op_label(domain, op_type)] += 1
                elif _constant_folded(node_outputs, shapes):
                    op = OpNode(**fields, cost=FREE_COST, constant_folded=True)
                else:
                    op = OpNode(**fields, cost=cost)  # cheaper than dataclasses.replace
        nxg.add_node(node_name, op=op)
        for t in node_inputs:
            src = producer.get(t) if t else None
            if src is not None:
                if nxg.has_edge(src, node_name):
                    nxg.edges[src, node_name]["tensors"] += (infos[t],)
                else:
                    nxg.add_edge(src, node_name, tensor=infos[t], tensors=(infos[t],))
        for t in node_outputs:
            if t:
                producer[t] = node_name

    params, weight_bytes = count_params(model)
    opset = max(
        (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0
    )
    init_names = set(initializers)
    nx.freeze(nxg)  # an imported graph does not change: Graph.order keeps its sort
    return Graph(
        name=name or g.name or "model",
        nx_graph=nxg,
        inputs=tuple(info(vi.name) for vi in g.input if vi.name not in init_names),
        outputs=tuple(info(vi.name) for vi in g.output),
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
            problem = None
            if ts is None:
                problem = "has no type (shape inference could not reach it)"
            elif ts.dims is None:
                problem = "has unknown rank"
            elif ts.dtype == "undefined":
                problem = "has no element type"
            else:
                for axis, d in enumerate(ts.dims):
                    if isinstance(d, int):
                        continue
                    if d in unbound:
                        return (
                            f"{kind} {t!r} dim {axis} is the unbound symbolic dim {d!r}: "
                            f"bind it, e.g. --dim {d}=1"
                        )
                    problem = f"dim {axis} is not concrete ({d!r})"
                    break
            if problem is None:
                continue
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
    return None


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
