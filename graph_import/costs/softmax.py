"""Softmax family along one axis. Engine: VECTOR. FLOPs by the formula-count convention:

* Softmax: max (1), x - max (1), exp (1), sum (1), divide (1) = 5 per element;
* LogSoftmax: max, x - max, exp, sum, (x - max) - log(sum) = 5 per element + 1 log per row;
* Hardmax: 1 compare per element (argmax) and the one-hot write.

Rows = numel / shape[axis]. Bytes: input read once, output written once.
"""

from __future__ import annotations

from roofcast.graph_import.costs._common import (
    CostRuleError,
    attr_int,
    io_cost,
    need_input,
    need_output,
)
from roofcast.graph_import.costs.inner_dims import inner_softmax
from roofcast.graph_import.costs.registry import register
from roofcast.graph_import.types import Engine, OpCost, OpNode

SOFTMAX_FLOPS_PER_ELEMENT = 5
HARDMAX_FLOPS_PER_ELEMENT = 1


def _rows(node: OpNode) -> tuple[int, int]:
    x = need_input(node, 0, "input")
    need_output(node, 0)
    if not x.shape:
        return x.numel, x.numel
    axis = attr_int(node, "axis", -1)
    axis = axis + len(x.shape) if axis < 0 else axis
    if not 0 <= axis < len(x.shape):
        raise CostRuleError(f"{node.op_type} node {node.name!r}: axis out of range for {x.shape}")
    return x.numel, (x.numel // x.shape[axis] if x.shape[axis] else 0)


@register("Softmax", family="softmax", backward="softmax", inner_elems=inner_softmax)
def cost_Softmax(node: OpNode) -> OpCost:
    """Softmax: 5 FLOPs per element (max, sub, exp, sum, div)."""
    numel, _ = _rows(node)
    return io_cost(node, SOFTMAX_FLOPS_PER_ELEMENT * numel, Engine.VECTOR)


@register("LogSoftmax", family="softmax", backward="softmax", inner_elems=inner_softmax)
def cost_LogSoftmax(node: OpNode) -> OpCost:
    """LogSoftmax: 5 FLOPs per element + 1 log per row."""
    numel, rows = _rows(node)
    return io_cost(node, SOFTMAX_FLOPS_PER_ELEMENT * numel + rows, Engine.VECTOR)


@register("Hardmax", family="softmax", backward="softmax", inner_elems=inner_softmax)
def cost_Hardmax(node: OpNode) -> OpCost:
    """Hardmax: 1 compare per element."""
    numel, _ = _rows(node)
    return io_cost(node, HARDMAX_FLOPS_PER_ELEMENT * numel, Engine.VECTOR)
