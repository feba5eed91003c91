"""Workload table: op families from the cost registry."""

from __future__ import annotations

from roofcast.graph_import.costs import FREE_OPS
from roofcast.graph_import.costs.registry import registered_ops
from roofcast.graph_import.types import OpNode
from roofcast.predictor.training import BACKWARD_RULES
from roofcast.predictor.workload import FAMILY_BY_OP, op_family
from roofcast.predictor.workload_schema import FAMILIES


def test_every_registered_op_has_a_family_and_a_backward_rule():
    missing = []
    for (domain, op_type) in registered_ops():
        node = OpNode(name="n", op_type=op_type, domain=domain, inputs=(), outputs=())
        family = op_family(node)
        assert family in FAMILIES
        assert family in BACKWARD_RULES
        if family == "other":
            missing.append(op_type)
    assert missing == [], f"map these op types in FAMILY_BY_OP or a family module: {missing}"
    assert set(FAMILY_BY_OP.values()) <= set(FAMILIES)
    assert not (set(FAMILY_BY_OP) & FREE_OPS)


def test_unknown_op_is_family_other():
    assert op_family(OpNode(name="n", op_type="MyOp", domain="my.domain", inputs=(),
                            outputs=())) == "other"
