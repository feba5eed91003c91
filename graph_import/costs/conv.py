"""Convolutions: Conv (1-3D, grouped, depthwise, dilated, padded, strided), ConvTranspose,
ConvInteger, QLinearConv, com.microsoft FusedConv. One multiply-add = 2 FLOPs.

Strides, pads and dilations only change the output's spatial size, which shape inference has
already made concrete, so ``FLOPs = 2 × numel(Y) × (C_in/group × prod(kernel))`` is exact for
any of them. Engine: MATRIX, except depthwise convolutions (one input channel per group: the
reduction is only the kernel window, no matrix-unit tile fits) which run on VECTOR.
"""

from __future__ import annotations

from roofcast.graph_import.costs._common import (
    attr_str,
    io_cost,
    need_input,
    need_output,
    need_rank,
    prod,
)
from roofcast.graph_import.costs.elementwise import UNARY_FLOPS_PER_ELEMENT
from roofcast.graph_import.costs.gemm_dims import gemm_conv, gemm_conv_transpose, gemm_qlinear_conv
from roofcast.graph_import.costs.inner_dims import inner_conv, inner_qlinear_conv
from roofcast.graph_import.costs.matmul import REQUANT_FLOPS_PER_ELEMENT
from roofcast.graph_import.costs.registry import MS_DOMAIN, register
from roofcast.graph_import.types import Engine, OpCost, OpNode


def _conv_cost(node: OpNode, w_index: int, bias_index: int | None, extra_per_output: int = 0):
    need_input(node, 0, "X")
    w = need_input(node, w_index, "W")
    need_rank(node, w, 3, "weight")
    y = need_output(node, 0)
    macs_per_output = prod(w.shape[1:])  # C_in/group × kernel volume
    per_output = 2 * macs_per_output + extra_per_output
    if bias_index is not None and node.input(bias_index) is not None:
        per_output += 1
    depthwise = int(node.attrs.get("group", 1)) > 1 and w.shape[1] == 1
    engine = Engine.VECTOR if depthwise else Engine.MATRIX
    return io_cost(node, per_output * y.numel, engine)


@register("Conv", family="conv", backward="gemm", gemm_dims=gemm_conv, inner_elems=inner_conv)
def cost_Conv(node: OpNode) -> OpCost:
    """Conv(X, W[C_out, C_in/g, k...], B?): ``2 × numel(Y) × C_in/g × prod(k)`` + numel(Y)
    bias adds when B is given. Depthwise (group > 1, C_in/g = 1) → VECTOR, else MATRIX."""
    return _conv_cost(node, 1, 2)


@register("ConvInteger", family="conv", backward="gemm", gemm_dims=gemm_conv,
          inner_elems=inner_conv)
def cost_ConvInteger(node: OpNode) -> OpCost:
    """ConvInteger(x, w, x_zp?, w_zp?): ``2 × numel(Y) × C_in/g × prod(k)`` integer FLOPs."""
    return _conv_cost(node, 1, None)


@register("QLinearConv", family="conv", backward="gemm", gemm_dims=gemm_qlinear_conv,
          inner_elems=inner_qlinear_conv)
def cost_QLinearConv(node: OpNode) -> OpCost:
    """QLinearConv(x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, B?): conv MACs ×2, + 1/elem for the
    int32 bias, + 2/elem requantisation (scale mul, zero-point add)."""
    return _conv_cost(node, 3, 8, REQUANT_FLOPS_PER_ELEMENT)


@register("FusedConv", domain=MS_DOMAIN, family="conv", backward="gemm", inner_elems=inner_conv)
def cost_FusedConv(node: OpNode) -> OpCost:
    """com.microsoft FusedConv(X, W, B?, Z?): Conv + optional residual Z add (1/elem) +
    activation (UNARY_FLOPS_PER_ELEMENT of attr ``activation``, Clip = 2)."""
    act = attr_str(node, "activation", "")
    act_flops = 2 if act == "Clip" else UNARY_FLOPS_PER_ELEMENT.get(act, 0)
    residual = 1 if node.input(3) is not None else 0
    return _conv_cost(node, 1, 2, act_flops + residual)


@register("ConvTranspose", family="conv", backward="gemm", gemm_dims=gemm_conv_transpose,
          inner_elems=inner_conv)
def cost_ConvTranspose(node: OpNode) -> OpCost:
    """ConvTranspose(X, W[C_in, C_out/g, k...], B?): every input element is multiplied into
    C_out/g × prod(k) outputs: ``2 × numel(X) × C_out/g × prod(k)`` + numel(Y) bias adds.
    Engine MATRIX (VECTOR when depthwise: group = C_in > 1 and C_out/g = 1)."""
    x = need_input(node, 0, "X")
    w = need_input(node, 1, "W")
    need_rank(node, w, 3, "weight")
    y = need_output(node, 0)
    flops = 2 * x.numel * prod(w.shape[1:])
    if node.input(2) is not None:
        flops += y.numel
    group = int(node.attrs.get("group", 1))
    depthwise = w.shape[1] == 1 and group == w.shape[0] and group > 1
    return io_cost(node, flops, Engine.VECTOR if depthwise else Engine.MATRIX)
