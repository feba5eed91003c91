"""The per-op-type rule table behind gemm_dims and inner_dims."""

import pytest

from roofcast.graph_import.types import OpNode, TensorInfo
from roofcast.predictor.op_rules import OpRules


def node(op_type: str, *shapes: tuple[int, ...]) -> OpNode:
    ins = tuple(TensorInfo(f"x{i}", s, "float") for i, s in enumerate(shapes))
    return OpNode(name="n", op_type=op_type, domain="", inputs=ins, outputs=())


def test_rules_apply_by_op_type_and_refuse_duplicates():
    rules: OpRules[int] = OpRules("demo")

    @rules.register("B", "A")
    def _first_dim(n: OpNode) -> int:
        return n.inputs[0].shape[0]

    assert rules.ops() == ("A", "B")
    assert rules.apply(node("A", (7, 3))) == 7
    assert rules.apply(node("C", (7, 3))) is None  # no rule
    assert rules.apply(node("A")) is None  # no input: the IndexError means no value
    with pytest.raises(RuntimeError, match="demo rule for A registered twice"):
        rules.register("A")(_first_dim)
