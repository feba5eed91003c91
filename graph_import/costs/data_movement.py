"""Pure data movement: copies, permutations, gathers/scatters, padding, resizing, casts,
generated tensors. Engine DATA and 0 FLOPs unless stated (interpolating Resize/GridSample and
reducing scatters are VECTOR).

Bytes: all inputs read once, all outputs written once — except selective reads: Gather,
GatherElements, GatherND and Slice read only the elements they select,
``min(numel(Y), numel(data)) × itemsize(data)``, plus their index/parameter inputs.
"""

from __future__ import annotations

from roofcast.graph_import.costs._common import (
    attr_str,
    io_cost,
    need_input,
    need_output,
    partial_read_cost,
)
from roofcast.graph_import.costs.registry import register
from roofcast.graph_import.types import Engine, OpCost, OpNode

#: Ops whose kernel copies/permutes/generates data: read inputs, write outputs, no arithmetic.
COPY_OPS: tuple[str, ...] = (
    "Transpose",
    "Concat",
    "Split",
    "Expand",
    "Tile",
    "Pad",
    "DepthToSpace",
    "SpaceToDepth",
    "Trilu",
    "NonZero",
    "Cast",
    "CastLike",
    "ConstantOfShape",
    "Range",
    "OneHot",
    "EyeLike",
    "ReverseSequence",
    "Compress",
    "CenterCropPad",
    "MaxUnpool",
    "TensorScatter",  # KV-cache update: past_cache copied to present_cache with the update
)

#: Interpolation taps per interpolated axis, by Resize/Upsample/GridSample mode.
TAPS_PER_AXIS: dict[str, int] = {
    "nearest": 1,
    "linear": 2,
    "bilinear": 2,
    "cubic": 4,
    "bicubic": 4,
}

#: ops whose inverse movement adds (repeated indices, broadcast copies): the backward is a
#: scatter-add / reduction on the vector engine (an embedding's gradient is dense).
GRAD_ACCUMULATES: frozenset[str] = frozenset({"Gather", "GatherElements", "GatherND", "Expand",
                                              "Tile"})


def _backward(op_type: str) -> str:
    return "data_movement_accumulates" if op_type in GRAD_ACCUMULATES else "data_movement"


@register(*COPY_OPS, family="data_movement", backward=_backward)
def cost_copy(node: OpNode) -> OpCost:
    """Copy-like op (COPY_OPS): 0 FLOPs, DATA; inputs read once, outputs written once."""
    need_output(node, 0)
    return io_cost(node, 0, Engine.DATA)


@register("Gather", "GatherElements", "GatherND", "Slice",
          family="data_movement", backward=_backward)
def cost_selective_read(node: OpNode) -> OpCost:
    """Gather/GatherElements/GatherND/Slice: 0 FLOPs, DATA; reads the selected elements
    ``min(numel(Y), numel(data)) × itemsize`` (weight bytes likewise when data is a weight,
    e.g. an embedding table) plus indices/starts/ends; writes Y."""
    need_input(node, 0, "data")
    y = need_output(node, 0)
    return partial_read_cost(node, {0: y.numel}, 0, Engine.DATA)


@register("ScatterND", "ScatterElements", "Scatter",
          family="data_movement", backward="data_movement")
def cost_scatter(node: OpNode) -> OpCost:
    """ScatterND/ScatterElements(data, indices, updates): copy data to output and write the
    updates: reads all inputs, writes Y. ``reduction`` other than 'none' adds 1 FLOP per
    update element (VECTOR); otherwise 0 FLOPs (DATA)."""
    updates = need_input(node, 2, "updates")
    need_output(node, 0)
    if attr_str(node, "reduction", "none") != "none":
        return io_cost(node, updates.numel, Engine.VECTOR)
    return io_cost(node, 0, Engine.DATA)


def _interpolate(node: OpNode, mode: str, interpolated_axes: int) -> OpCost:
    y = need_output(node, 0)
    taps = TAPS_PER_AXIS.get(mode, 1) ** interpolated_axes
    if taps <= 1:
        return io_cost(node, 0, Engine.DATA)
    return io_cost(node, 2 * taps * y.numel, Engine.VECTOR)


@register("Resize", "Upsample", family="data_movement", backward="data_movement_accumulates")
def cost_Resize(node: OpNode) -> OpCost:
    """Resize/Upsample: 'nearest' is a gather (0 FLOPs, DATA); 'linear'/'cubic' weigh
    2^d / 4^d taps per output (d = axes whose size changes): ``2 × taps × numel(Y)`` (mul + add
    per tap), VECTOR. Reads X (+ roi/scales/sizes), writes Y."""
    x = need_input(node, 0, "X")
    y = need_output(node, 0)
    changed = sum(a != b for a, b in zip(x.shape, y.shape, strict=False))
    return _interpolate(node, attr_str(node, "mode", "nearest"), changed)


@register("GridSample", family="data_movement", backward="data_movement")
def cost_GridSample(node: OpNode) -> OpCost:
    """GridSample(X, grid): per output, taps = (2 | 4 | 1)^(rank - 2) for (bi)linear / (bi)cubic
    / nearest; ``2 × taps × numel(Y)`` FLOPs, VECTOR (nearest: DATA, 0 FLOPs)."""
    x = need_input(node, 0, "X")
    need_input(node, 1, "grid")
    return _interpolate(node, attr_str(node, "mode", "linear"), max(len(x.shape) - 2, 0))
