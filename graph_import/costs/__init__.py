"""Per-op cost rules: FLOPs, bytes read/written, weight bytes and engine of one ONNX node.

``cost_of(node)`` returns the node's :class:`OpCost`: ``FREE_COST`` for the pure shape/view ops
in :data:`FREE_OPS`, the registered rule's cost otherwise, and ``None`` when the op has neither
(the caller lists it in ``Graph.unsupported``; it is never costed as zero). Each rule is
registered with the rest of what roofcast knows about its op (family, backward kind, GEMM
dims, inner size: ``registry.OpSpec``).

Conventions (all rules follow them; each rule's docstring gives its formula):

* FLOPs: one multiply-add = 2 FLOPs (vendor peak FLOP/s convention). Matrix-class ops (Gemm,
  MatMul, Conv, Einsum contractions, LSTM/GRU/RNN gate matmuls, attention matmuls) count
  ``2 * MACs`` and run on ``Engine.MATRIX``; a bias added by the op counts 1 FLOP per output.
* Elementwise ops count FLOPs per *output* element by the **formula-count** convention: every
  arithmetic operation, comparison, select and elementary-function call (exp, log, erf, tanh,
  sqrt, sin, pow, ...) in the op's ONNX-spec formula counts 1 FLOP. So Add/Relu = 1, Clip = 2
  (min, max), Sigmoid = 1/(1+exp(-x)) = 4, Gelu = 0.5·x·(1+erf(x/√2)) = 5, tanh-Gelu = 9,
  Softplus = log(1+exp(x)) = 3, Mish = x·tanh(softplus(x)) = 5. The per-op table is
  ``elementwise.UNARY_FLOPS_PER_ELEMENT`` / ``BINARY_FLOPS_PER_ELEMENT``.
* Normalisations use the same convention, per element and per normalised row (see
  ``normalization``): LayerNorm 7/elem with bias, 6 without (+4/row), RMSNorm 4/elem
  (+3/row), inference BatchNorm 4/elem (+2/channel), Softmax 5/elem.
* Reductions: one combine per input element beyond the first of each output (``in - out``),
  plus any per-element map (square, abs, exp) and per-output finish (divide, sqrt, log).
* Bytes: what an *unfused* kernel moves. Every distinct input tensor is read once at its own
  size (broadcast inputs at their own, smaller size); every output is written once; actual
  dtype itemsize. Gather-like ops (Gather, GatherElements, GatherND, Slice) read only the
  elements they select, not the whole source tensor.
* ``weight_bytes``: bytes of initializer inputs (``node.weight_inputs``) the op reads; it is
  included in ``bytes_read``.
* Engines: MATRIX for the matrix-class ops above (depthwise convolution, whose per-group
  reduction is only the kernel window, runs on VECTOR); VECTOR for elementwise, normalisation,
  softmax, reduction, pooling, quantisation, interpolating Resize; DATA (0 FLOPs) for pure data
  movement (Transpose, Gather, Concat, Slice, Pad, Cast, nearest Resize, ...); FREE only via
  ``FREE_OPS``.
"""

from __future__ import annotations

import math

from roofcast.graph_import.costs import (  # noqa: F401  (imported for their @register side effects)
    attention,
    conv,
    data_movement,
    elementwise,
    matmul,
    normalization,
    pooling,
    quantization,
    recurrent,
    reduction,
    softmax,
)
from roofcast.graph_import.costs._common import CostRuleError
from roofcast.graph_import.costs.registry import lookup, registered_ops
from roofcast.graph_import.types import FREE_COST, OpCost, OpNode

__all__ = ["FREE_OPS", "CostRuleError", "cost_of", "is_free", "registered_ops"]

#: ai.onnx op types that no kernel executes at inference: shape queries and views that only
#: rewrite metadata (ORT aliases their buffers), plus inference-time no-ops.
FREE_OPS: frozenset[str] = frozenset(
    {
        "Reshape",
        "Shape",
        "Size",
        "Unsqueeze",
        "Squeeze",
        "Flatten",
        "Identity",
        "Constant",
        "Dropout",  # identity at inference
        "Optional",
        "OptionalGetElement",
        "OptionalHasElement",
    }
)


def is_free(node: OpNode) -> bool:
    """True when the node is a pure shape/view op of the ai.onnx domain (listed in FREE_OPS)."""
    return node.domain in ("", "ai.onnx") and node.op_type in FREE_OPS


def _check(node: OpNode, cost: OpCost) -> OpCost:
    values = (cost.flops, cost.bytes_read, cost.bytes_written, cost.weight_bytes)
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise CostRuleError(
            f"{node.op_type} node {node.name!r}: cost rule produced invalid numbers {values}"
        )
    return cost


def cost_of(node: OpNode) -> OpCost | None:
    """FREE_COST for FREE_OPS, the registered rule's OpCost, or None when the op has no rule.

    Raises CostRuleError when a rule cannot cost the node (missing required input, malformed
    shapes, unsupported attribute combination); the message names the node.
    """
    if is_free(node):
        return FREE_COST
    rule = lookup(node.op_type, node.domain)
    if rule is None:
        return None
    try:
        cost = rule(node)
    except CostRuleError:
        raise
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise CostRuleError(
            f"{node.op_type} node {node.name!r}: cannot cost this node ({exc}); check that its "
            "inputs and attributes follow the ONNX spec"
        ) from exc
    return _check(node, cost)
