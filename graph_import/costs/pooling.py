"""Pooling. Engine: VECTOR. With k = prod(kernel_shape) and out = numel(Y):

* MaxPool: ``(k - 1) × out`` compares (Indices output written when present);
* AveragePool: ``(k - 1)`` adds + 1 divide = ``k × out``;
* LpPool: ``|x|^p`` and add per window element, root per output ≈ ``2k × out``;
* GlobalAveragePool: ``numel(X)`` (adds + divides); GlobalMaxPool: ``numel(X) - out``;
  GlobalLpPool: ``2 × numel(X)``.

Bytes: input read once, outputs written once (overlapping windows are served from cache).
"""

from __future__ import annotations

from roofcast.graph_import.costs._common import (
    CostRuleError,
    attr_ints,
    io_cost,
    need_input,
    need_output,
    prod,
)
from roofcast.graph_import.costs.registry import register
from roofcast.graph_import.types import Engine, OpCost, OpNode


def _window(node: OpNode) -> tuple[int, int]:
    need_input(node, 0, "X")
    y = need_output(node, 0)
    kernel = attr_ints(node, "kernel_shape")
    if not kernel:
        raise CostRuleError(
            f"{node.op_type} node {node.name!r}: attribute kernel_shape is required by the spec"
        )
    return prod(kernel), y.numel


@register("MaxPool", family="pooling", backward="pooling_saved")
def cost_MaxPool(node: OpNode) -> OpCost:
    """MaxPool: ``(prod(kernel_shape) - 1) × numel(Y)`` compares."""
    k, out = _window(node)
    return io_cost(node, (k - 1) * out, Engine.VECTOR)


@register("AveragePool", family="pooling", backward="pooling")
def cost_AveragePool(node: OpNode) -> OpCost:
    """AveragePool: ``prod(kernel_shape) × numel(Y)`` (k - 1 adds + 1 divide per output)."""
    k, out = _window(node)
    return io_cost(node, k * out, Engine.VECTOR)


@register("LpPool", family="pooling", backward="pooling_saved")
def cost_LpPool(node: OpNode) -> OpCost:
    """LpPool: ``2 × prod(kernel_shape) × numel(Y)`` (power + add per window element)."""
    k, out = _window(node)
    return io_cost(node, 2 * k * out, Engine.VECTOR)


@register("GlobalAveragePool", family="pooling", backward="pooling")
def cost_GlobalAveragePool(node: OpNode) -> OpCost:
    """GlobalAveragePool: ``numel(X)`` FLOPs (in - out adds + out divides)."""
    x = need_input(node, 0, "X")
    need_output(node, 0)
    return io_cost(node, x.numel, Engine.VECTOR)


@register("GlobalMaxPool", family="pooling", backward="pooling_saved")
def cost_GlobalMaxPool(node: OpNode) -> OpCost:
    """GlobalMaxPool: ``numel(X) - numel(Y)`` compares."""
    x = need_input(node, 0, "X")
    y = need_output(node, 0)
    return io_cost(node, max(x.numel - y.numel, 0), Engine.VECTOR)


@register("GlobalLpPool", family="pooling", backward="pooling_saved")
def cost_GlobalLpPool(node: OpNode) -> OpCost:
    """GlobalLpPool: ``2 × numel(X)`` (power + add per element; root per output ignored)."""
    x = need_input(node, 0, "X")
    need_output(node, 0)
    return io_cost(node, 2 * x.numel, Engine.VECTOR)
