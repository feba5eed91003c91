"""(De)quantisation. Engine: VECTOR. Formula-count FLOPs per element:

* QuantizeLinear: saturate(round(x / scale) + zero_point) -> div, round, add, min, max = 5;
* DequantizeLinear: (x - zero_point) × scale = 2 (1 without zero point);
* DynamicQuantizeLinear: running min and max (2) + quantize (5) = 7.
"""

from __future__ import annotations

from roofcast.graph_import.costs._common import io_cost, need_input, per_output_element
from roofcast.graph_import.costs.registry import register
from roofcast.graph_import.types import Engine, OpCost, OpNode

QUANTIZE_FLOPS_PER_ELEMENT = 5
MINMAX_FLOPS_PER_ELEMENT = 2


@register("QuantizeLinear", family="quantization", backward="straight_through")
def cost_QuantizeLinear(node: OpNode) -> OpCost:
    """QuantizeLinear(x, y_scale, y_zero_point?): 5 FLOPs per element."""
    need_input(node, 1, "y_scale")
    return per_output_element(node, QUANTIZE_FLOPS_PER_ELEMENT, Engine.VECTOR)


@register("DequantizeLinear", family="quantization", backward="straight_through")
def cost_DequantizeLinear(node: OpNode) -> OpCost:
    """DequantizeLinear(x, x_scale, x_zero_point?): 2 FLOPs/elem (1 without zero point)."""
    need_input(node, 1, "x_scale")
    per_element = 2 if node.input(2) is not None else 1
    return per_output_element(node, per_element, Engine.VECTOR)


@register("DynamicQuantizeLinear", family="quantization", backward="straight_through")
def cost_DynamicQuantizeLinear(node: OpNode) -> OpCost:
    """DynamicQuantizeLinear(x) -> (y, y_scale, y_zero_point): 7 FLOPs per element."""
    x = need_input(node, 0, "x")
    per_element = MINMAX_FLOPS_PER_ELEMENT + QUANTIZE_FLOPS_PER_ELEMENT
    return io_cost(node, per_element * x.numel, Engine.VECTOR)
