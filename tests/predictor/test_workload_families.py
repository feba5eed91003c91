"""Workload table: op families and backward kinds from the op registry."""

from __future__ import annotations

from roofcast.graph_import.costs.registry import BACKWARD_KINDS, op_family
from roofcast.graph_import.types import OpNode
from roofcast.predictor.training import BACKWARD_RULES


def test_every_backward_kind_has_a_derivative_rule():
    assert set(BACKWARD_RULES) == set(BACKWARD_KINDS)


def test_unknown_op_is_family_other():
    assert op_family(OpNode(name="n", op_type="MyOp", domain="my.domain", inputs=(),
                            outputs=())) == "other"
