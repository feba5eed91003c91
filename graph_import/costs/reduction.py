"""Reductions, arg-reductions, prefix sums and top-k. Engine: VECTOR.

A reduction of ``in`` input elements into ``out`` outputs combines ``in - out`` times; ops that
map each input first (abs, square, exp) add 1 per input element, ops that finish each output
(mean divide, sqrt, log) add 1 per output element:
``FLOPs = map·in + (in - out) + finish·out`` (table ``REDUCE_MAP_FINISH``). Axes come from the
output shape, so axes given as attribute or input, keepdims and noop_with_empty_axes all work.
"""

from __future__ import annotations

import math

from roofcast.graph_import.costs._common import (
    CostRuleError,
    attr_int,
    io_cost,
    need_input,
    need_output,
)
from roofcast.graph_import.costs.inner_dims import inner_reduce
from roofcast.graph_import.costs.registry import register
from roofcast.graph_import.types import Engine, OpCost, OpNode

#: op -> (FLOPs per input element before combining, FLOPs per output element after combining).
REDUCE_MAP_FINISH: dict[str, tuple[int, int]] = {
    "ReduceSum": (0, 0),
    "ReduceMean": (0, 1),  # divide
    "ReduceMax": (0, 0),
    "ReduceMin": (0, 0),
    "ReduceProd": (0, 0),
    "ReduceL1": (1, 0),  # |x|
    "ReduceL2": (1, 1),  # x², sqrt
    "ReduceSumSquare": (1, 0),  # x²
    "ReduceLogSum": (0, 1),  # log
    "ReduceLogSumExp": (1, 1),  # exp, log
}

#: reductions whose gradient needs the input and output (where the max/min was, |x|, x²,
#: exp/log): their backward reads them besides the output gradient.
GRAD_READS_INPUT: frozenset[str] = frozenset({
    "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceProd", "ReduceSumSquare",
})


def _backward(op_type: str) -> str:
    return "reduction_saved" if op_type in GRAD_READS_INPUT else "reduction"


def _in_out(node: OpNode) -> tuple[int, int]:
    x = need_input(node, 0, "data")
    y = need_output(node, 0)
    return x.numel, y.numel


@register(*REDUCE_MAP_FINISH, family="reduction", backward=_backward, inner_elems=inner_reduce)
def cost_reduce(node: OpNode) -> OpCost:
    """Reduce*: ``map·in + (in - out) + finish·out`` with (map, finish) from REDUCE_MAP_FINISH."""
    n_in, n_out = _in_out(node)
    per_in, per_out = REDUCE_MAP_FINISH[node.op_type]
    flops = per_in * n_in + max(n_in - n_out, 0) + per_out * n_out
    return io_cost(node, flops, Engine.VECTOR)


@register("ArgMax", "ArgMin", family="reduction", backward="reduction_saved",
          inner_elems=inner_reduce)
def cost_arg_reduce(node: OpNode) -> OpCost:
    """ArgMax/ArgMin: ``in - out`` compares; int64 indices written."""
    n_in, n_out = _in_out(node)
    return io_cost(node, max(n_in - n_out, 0), Engine.VECTOR)


@register("CumSum", "CumProd", family="reduction", backward="reduction")
def cost_prefix_scan(node: OpNode) -> OpCost:
    """CumSum/CumProd(x, axis): 1 add/multiply per element (prefix scan)."""
    x = need_input(node, 0, "x")
    need_output(node, 0)
    return io_cost(node, x.numel, Engine.VECTOR)


@register("TopK", family="reduction", backward="reduction")
def cost_TopK(node: OpNode) -> OpCost:
    """TopK(X, K): heap selection, ``numel(X) × max(1, ceil(log2 k))`` compares, k read from the
    Values output along ``axis``; Values and Indices written."""
    x = need_input(node, 0, "X")
    values = need_output(node, 0)
    if not values.shape:
        raise CostRuleError(f"TopK node {node.name!r}: Values output has no axis")
    axis = attr_int(node, "axis", -1)
    k = values.shape[axis]
    compares = max(1, math.ceil(math.log2(k))) if k > 1 else 1
    return io_cost(node, x.numel * compares, Engine.VECTOR)
