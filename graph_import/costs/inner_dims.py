"""Inner (per-row) size of an op: ``inner_elems(node) -> float`` or None.

Row-wise kernels (softmax, layer norms, reductions) pick their variant by row length, and a
convolution's algorithm by its window, which FLOPs and bytes do not show. Each rule is named by
the op's registry entry (``register(..., inner_elems=inner_softmax)``), like
``costs.gemm_dims``: elements of the normalised / reduced axes for row-wise ops, ``prod(kernel)``
(R·S) for convolutions; an op without a rule has no inner size (NaN in the workload
table).

Rationale: ``docs/design/module-notes.md`` (roofcast.graph_import.costs.inner_dims).
"""

from __future__ import annotations

import math

from roofcast.graph_import.costs.registry import apply_shape_rule, spec_of
from roofcast.graph_import.types import OpNode


def inner_elems(node: OpNode) -> float | None:
    """Elements per row (or conv window) of ``node``; None when the op has no rule or its shapes
    do not give one."""
    entry = spec_of(node)
    value = None if entry is None else apply_shape_rule(entry.inner_elems, node)
    if value is None or not value > 0:
        return None
    return float(value)


def inner_elems_or_nan(node: OpNode) -> float:
    """``inner_elems(node)``, NaN when it has none: the workload table's ``inner_elems`` value."""
    value = inner_elems(node)
    return math.nan if value is None else value


def _axis(node: OpNode, default: int) -> int:
    return int(node.attrs.get("axis", default))


def inner_softmax(node: OpNode) -> float | None:
    x = node.input(0)
    return None if x is None or not x.shape else float(x.shape[_axis(node, -1)])


def inner_layer_norm(node: OpNode) -> float | None:
    x = node.input(0)
    if x is None or not x.shape:
        return None
    return float(math.prod(x.shape[_axis(node, -1):]))


def inner_instance_norm(node: OpNode) -> float | None:
    x = node.input(0)
    return None if x is None or len(x.shape) < 3 else float(math.prod(x.shape[2:]))


def inner_group_norm(node: OpNode) -> float | None:
    x = node.input(0)
    if x is None or len(x.shape) < 3:
        return None
    return x.shape[1] / int(node.attrs["num_groups"]) * math.prod(x.shape[2:])


def inner_reduce(node: OpNode) -> float | None:
    x, y = node.input(0), node.outputs[0] if node.outputs else None
    if x is None or y is None:
        return None
    return x.numel / max(y.numel, 1)


def _window(node: OpNode, w_idx: int) -> float | None:
    """``prod(W.shape[2:])`` of the weight at input ``w_idx``."""
    w = node.input(w_idx)
    return None if w is None or len(w.shape) < 3 else float(math.prod(w.shape[2:]))


def inner_conv(node: OpNode) -> float | None:
    return _window(node, 1)


def inner_qlinear_conv(node: OpNode) -> float | None:
    return _window(node, 3)
