"""Normalisations. Engine: VECTOR. FLOPs by the formula-count convention (package docstring),
split into a per-element part and a per-normalised-group ("row") part:

* mean/variance statistics: sum x (1), x - mean (1), square (1), sum (1) = 4 per element;
  per row: mean divide, variance divide, + eps, rsqrt = 4;
* normalise: × inv_std (1), × scale (1), + bias (1, when a bias is given);
* RMS statistics: square (1), sum (1) per element; per row: divide, + eps, rsqrt = 3;
  normalise: × inv_rms (1), × scale (1).

So LayerNorm = 7/elem with bias (6 without) + 4/row; RMSNorm = 4/elem + 3/row; inference
BatchNorm = (x - mean) / sqrt(var + eps) · scale + B = 4/elem + 2/channel (+ eps, sqrt).
Bytes: all inputs read once, all present outputs (incl. optional Mean/InvStdDev) written once.
"""

from __future__ import annotations

from roofcast.graph_import.costs._common import (
    CostRuleError,
    attr_int,
    attr_ints,
    io_cost,
    need_input,
    need_output,
    partial_read_cost,
    prod,
)
from roofcast.graph_import.costs.inner_dims import (
    inner_group_norm,
    inner_instance_norm,
    inner_layer_norm,
)
from roofcast.graph_import.costs.registry import MS_DOMAIN, register
from roofcast.graph_import.types import Engine, OpCost, OpNode

STATS_FLOPS_PER_ELEMENT = 4
STATS_FLOPS_PER_ROW = 4
RMS_STATS_FLOPS_PER_ELEMENT = 2
RMS_STATS_FLOPS_PER_ROW = 3
NORMALISE_FLOPS_PER_ELEMENT = 2  # × inv_std, × scale
BATCHNORM_INFER_FLOPS_PER_ELEMENT = 4  # sub mean, div std, mul scale, add B
BATCHNORM_INFER_FLOPS_PER_CHANNEL = 2  # var + eps, sqrt
#: running-stat update per channel in training mode: 2 × (momentum·old + (1-momentum)·new).
BATCHNORM_TRAIN_UPDATE_FLOPS_PER_CHANNEL = 6


def _axis(node: OpNode, rank: int, default: int) -> int:
    axis = attr_int(node, "axis", default)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis <= rank:
        raise CostRuleError(f"{node.op_type} node {node.name!r}: axis out of range for rank {rank}")
    return axis


def _mean_var_norm(node: OpNode, numel: int, rows: int, bias_given: bool = True,
                   extra_per_element: int = 0) -> OpCost:
    """Mean/variance statistics per row, then × inv_std, × scale (+ bias):
    (6 + [bias] + extra)/elem + 4/row."""
    per_element = (
        STATS_FLOPS_PER_ELEMENT + NORMALISE_FLOPS_PER_ELEMENT + bias_given + extra_per_element
    )
    return io_cost(node, per_element * numel + STATS_FLOPS_PER_ROW * rows, Engine.VECTOR)


def _layer_norm_like(node: OpNode, bias_given: bool, extra_per_element: int = 0) -> OpCost:
    x = need_input(node, 0, "X")
    need_output(node, 0)
    axis = _axis(node, len(x.shape), -1)
    return _mean_var_norm(node, x.numel, prod(x.shape[:axis]), bias_given, extra_per_element)


def _rms_norm_like(node: OpNode, extra_per_element: int = 0) -> OpCost:
    x = need_input(node, 0, "X")
    need_output(node, 0)
    axis = _axis(node, len(x.shape), -1)
    rows = prod(x.shape[:axis])
    per_element = RMS_STATS_FLOPS_PER_ELEMENT + NORMALISE_FLOPS_PER_ELEMENT + extra_per_element
    return io_cost(node, per_element * x.numel + RMS_STATS_FLOPS_PER_ROW * rows, Engine.VECTOR)


@register("LayerNormalization",
          family="normalization", backward="normalization", inner_elems=inner_layer_norm)
def cost_LayerNormalization(node: OpNode) -> OpCost:
    """LayerNormalization(X, Scale, B?) over axes [axis, rank): (6 + [B given])/elem + 4/row,
    rows = prod(X.shape[:axis])."""
    need_input(node, 1, "Scale")
    return _layer_norm_like(node, node.input(2) is not None)


@register("SimplifiedLayerNormalization", "RMSNormalization",
          family="normalization", backward="normalization",
          inner_elems=inner_layer_norm)
def cost_rms_norm(node: OpNode) -> OpCost:
    """RMSNormalization (opset 23) / ORT SimplifiedLayerNormalization(X, scale):
    x / sqrt(mean(x²) + eps) · scale = 4/elem + 3/row, rows = prod(X.shape[:axis])."""
    need_input(node, 1, "scale")
    return _rms_norm_like(node)


@register("SkipLayerNormalization", domain=MS_DOMAIN,
          family="normalization", backward="normalization",
          inner_elems=inner_layer_norm)
def cost_SkipLayerNormalization(node: OpNode) -> OpCost:
    """com.microsoft SkipLayerNormalization(input, skip, gamma, beta?, bias?): s = input + skip
    (+ bias) then LayerNorm over the last axis: (1 + [bias] + 6 + [beta])/elem + 4/row."""
    need_input(node, 1, "skip")
    need_input(node, 2, "gamma")
    bias_add = 1 if node.input(4) is not None else 0
    return _layer_norm_like(node, node.input(3) is not None, 1 + bias_add)


@register("SkipSimplifiedLayerNormalization", domain=MS_DOMAIN,
          family="normalization", backward="normalization",
          inner_elems=inner_layer_norm)
def cost_SkipSimplifiedLayerNormalization(node: OpNode) -> OpCost:
    """com.microsoft SkipSimplifiedLayerNormalization(input, skip, gamma, bias?): s = input +
    skip (+ bias) then RMSNorm over the last axis: (1 + [bias] + 4)/elem + 3/row."""
    need_input(node, 1, "skip")
    need_input(node, 2, "gamma")
    bias_add = 1 if node.input(3) is not None else 0
    return _rms_norm_like(node, 1 + bias_add)


# inputs 3, 4: the running mean and variance, initializers that are not trained
@register("BatchNormalization",
          family="normalization", backward="normalization", non_trainable_inputs=(3, 4))
def cost_BatchNormalization(node: OpNode) -> OpCost:
    """BatchNormalization(X, scale, B, mean, var), C = X.shape[1]. Inference: 4/elem +
    2/channel. training_mode=1 adds batch statistics (4/elem, 4/channel) and the running-stat
    update (6/channel)."""
    x = need_input(node, 0, "X")
    for i, what in enumerate(("scale", "B", "input_mean", "input_var"), start=1):
        need_input(node, i, what)
    need_output(node, 0)
    channels = x.shape[1] if len(x.shape) >= 2 else 1
    flops = BATCHNORM_INFER_FLOPS_PER_ELEMENT * x.numel
    flops += BATCHNORM_INFER_FLOPS_PER_CHANNEL * channels
    if attr_int(node, "training_mode", 0):
        flops += STATS_FLOPS_PER_ELEMENT * x.numel + STATS_FLOPS_PER_ROW * channels
        flops += BATCHNORM_TRAIN_UPDATE_FLOPS_PER_CHANNEL * channels
    return io_cost(node, flops, Engine.VECTOR)


@register("InstanceNormalization",
          family="normalization", backward="normalization", inner_elems=inner_instance_norm)
def cost_InstanceNormalization(node: OpNode) -> OpCost:
    """InstanceNormalization(input, scale[C], B[C]): statistics per (N, C) over spatial dims:
    7/elem + 4 per (n, c)."""
    x = need_input(node, 0, "input")
    need_input(node, 1, "scale")
    need_input(node, 2, "B")
    need_output(node, 0)
    return _mean_var_norm(node, x.numel, prod(x.shape[:2]))


@register("GroupNormalization",
          family="normalization", backward="normalization", inner_elems=inner_group_norm)
def cost_GroupNormalization(node: OpNode) -> OpCost:
    """GroupNormalization(X, scale, bias), attr num_groups: statistics per (N, group):
    7/elem + 4 per (n, group)."""
    x = need_input(node, 0, "X")
    need_input(node, 1, "scale")
    need_input(node, 2, "bias")
    need_output(node, 0)
    groups = node.attrs.get("num_groups")
    if groups is None:
        raise CostRuleError(f"GroupNormalization node {node.name!r}: attribute num_groups missing")
    return _mean_var_norm(node, x.numel, (x.shape[0] if x.shape else 1) * int(groups))


@register("LpNormalization", family="normalization", backward="normalization")
def cost_LpNormalization(node: OpNode) -> OpCost:
    """LpNormalization(input), p ∈ {1, 2}, along ``axis``: |x| or x² (1), sum (1), divide (1)
    = 3/elem, + 1 sqrt per row when p = 2."""
    x = need_input(node, 0, "input")
    need_output(node, 0)
    axis = _axis(node, len(x.shape), -1)
    rows = x.numel // x.shape[axis] if x.shape and x.shape[axis] else 0
    p = attr_int(node, "p", 2)
    return io_cost(node, 3 * x.numel + (rows if p == 2 else 0), Engine.VECTOR)


@register("EmbedLayerNormalization", domain=MS_DOMAIN,
          family="normalization", backward="normalization")
def cost_EmbedLayerNormalization(node: OpNode) -> OpCost:
    """com.microsoft EmbedLayerNormalization(input_ids[B, S], segment_ids?, word_embedding,
    position_embedding, segment_embedding?, gamma, beta, mask?, position_ids?): gathers B·S rows
    of each embedding table (only those rows are read), sums them (1 add per extra table per
    element) and LayerNorms with bias: (7 + adds)/elem + 4/row over numel(output)."""
    ids = need_input(node, 0, "input_ids")
    need_input(node, 2, "word_embedding")
    need_input(node, 3, "position_embedding")
    need_input(node, 5, "gamma")
    y = need_output(node, 0)
    tables = [i for i in (2, 3, 4) if node.input(i) is not None]
    per_element = STATS_FLOPS_PER_ELEMENT + NORMALISE_FLOPS_PER_ELEMENT + 1 + len(tables) - 1
    flops = per_element * y.numel + STATS_FLOPS_PER_ROW * ids.numel
    return partial_read_cost(node, dict.fromkeys(tables, y.numel), flops, Engine.VECTOR)


#: LRN per element: square (1), window sum (size), × alpha/size (1), + bias (1), pow (1), div (1).
LRN_FLOPS_PER_ELEMENT_BEYOND_SIZE = 5


@register("LRN", family="normalization", backward="normalization")
def cost_LRN(node: OpNode) -> OpCost:
    """LRN(X), attr size: x / (bias + alpha/size · Σ_window x²)^beta = (size + 5)/elem."""
    x = need_input(node, 0, "X")
    need_output(node, 0)
    size = node.attrs.get("size")
    if size is None:
        raise CostRuleError(f"LRN node {node.name!r}: attribute size is required by the spec")
    return io_cost(node, (int(size) + LRN_FLOPS_PER_ELEMENT_BEYOND_SIZE) * x.numel, Engine.VECTOR)


@register("MeanVarianceNormalization", family="normalization", backward="normalization")
def cost_MeanVarianceNormalization(node: OpNode) -> OpCost:
    """MeanVarianceNormalization(X), attr axes (default [0, 2, 3]): (x - mean) / std =
    statistics 4/elem + divide 1/elem + 4 per normalised group."""
    x = need_input(node, 0, "X")
    need_output(node, 0)
    rank = len(x.shape)
    axes = attr_ints(node, "axes") or (0, 2, 3)
    reduced = prod(x.shape[a + rank if a < 0 else a] for a in axes)
    rows = x.numel // reduced if reduced else 0
    per_element = STATS_FLOPS_PER_ELEMENT + 1
    return io_cost(node, per_element * x.numel + STATS_FLOPS_PER_ROW * rows, Engine.VECTOR)
