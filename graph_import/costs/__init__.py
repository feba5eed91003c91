"""Per-op cost rules: FLOPs, bytes read/written, weight bytes and engine of one ONNX node.

``cost_of(node)``: ``FREE_COST`` for the view ops in :data:`FREE_OPS`, the registered rule's
:class:`OpCost` otherwise, ``None`` when neither (listed in ``Graph.unsupported``, never zero).
Conventions: 1 multiply-add = 2 FLOPs; matrix-class ops (GEMM, conv, attention, recurrent gate
matmuls) run on ``Engine.MATRIX``; elementwise ops count every operation of the op's ONNX
formula once per output element (Add 1, Sigmoid 4, Gelu 5: ``elementwise.UNARY_FLOPS_PER_ELEMENT``);
reductions ``in − out`` combines plus per-element maps. Bytes are what an *unfused* kernel
moves: each distinct input read once at its own size (gathers and slices: what they select),
each output written once, at the dtype's itemsize; ``weight_bytes`` (initializer inputs) is part
of ``bytes_read``. Engines: MATRIX, VECTOR (elementwise, norms, reductions, pooling), DATA (pure
movement, 0 FLOPs), FREE only via ``FREE_OPS``.

Rationale: ``docs/design/module-notes.md`` (roofcast.graph_import.costs).
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
