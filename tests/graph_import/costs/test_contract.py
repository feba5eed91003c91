"""Contract over the whole cost registry: documented rules, every rule tested, free ops disjoint
from rules, unknown ops reported (never zero), invalid rule output refused."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import roofcast.graph_import.costs as costs
from roofcast.graph_import import import_model
from roofcast.graph_import.costs import FREE_OPS, CostRuleError, cost_of, registered_ops
from roofcast.graph_import.types import FREE_COST, Engine, OpCost
from tests.graph_import.costs.builders import (
    direct_node,
    f32,
    i64,
    import_one,
    one_node_model,
    tensor,
)

TEST_DIR = Path(__file__).parent


def _string_literals_in_tests() -> set[str]:
    literals: set[str] = set()
    for path in TEST_DIR.glob("test_*.py"):
        if path.name != Path(__file__).name:
            literals.update(re.findall(r'"([A-Za-z0-9_]+)"', path.read_text()))
    return literals


def test_every_rule_has_a_docstring():
    missing = sorted(f"{d}::{op}" for (d, op), rule in registered_ops().items()
                     if not (rule.__doc__ or "").strip())
    assert missing == []


def test_every_registered_op_is_exercised_by_a_test():
    """Each registered op type appears (as a string literal) in some cost test module."""
    used = _string_literals_in_tests()
    untested = sorted(f"{d or 'ai.onnx'}::{op}" for d, op in registered_ops() if op not in used)
    assert untested == []


def test_free_ops_and_rules_are_disjoint():
    registered_default = {op for d, op in registered_ops() if d == ""}
    assert FREE_OPS.isdisjoint(registered_default)


def test_registry_covers_the_required_op_list():
    required = {
        "Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "MatMulInteger", "QLinearMatMul",
        "QLinearConv", "QuantizeLinear", "DequantizeLinear", "BatchNormalization",
        "LayerNormalization", "GroupNormalization", "InstanceNormalization",
        "SimplifiedLayerNormalization", "Softmax", "LogSoftmax", "Relu", "LeakyRelu", "Gelu",
        "Sigmoid", "Tanh", "Erf", "HardSwish", "HardSigmoid", "Softplus", "Clip", "ReduceMean",
        "ReduceSum", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Resize",
        "Upsample", "Pad", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND",
        "ScatterND", "Transpose", "Expand", "Where", "Cast", "Tile", "TopK", "CumSum", "NonZero",
        "LSTM", "GRU", "RNN",
    }
    ms_required = {"Attention", "MultiHeadAttention", "SkipLayerNormalization", "FastGelu"}
    ops = registered_ops()
    assert {op for op in required if ("", op) not in ops} == set()
    assert {op for op in ms_required if ("com.microsoft", op) not in ops} == set()


@pytest.mark.parametrize("op", sorted(FREE_OPS))
def test_free_ops_cost_nothing(op):
    node = direct_node(op, [tensor("x", "float", 2, 3)], [tensor("y", "float", 2, 3)])
    assert cost_of(node) is FREE_COST


def test_reshape_imported_is_free():
    _, node = import_one("Reshape", [f32("x", 2, 3, 4), i64("s", 2)], [f32("y", 6, 4)],
                         initializers={"s": np.array([6, 4], dtype=np.int64)})
    assert node.cost == FREE_COST
    assert node.cost.engine == Engine.FREE


def test_unknown_op_is_unsupported_not_free():
    node = direct_node("FancyOp", [tensor("x", "float", 2)], [tensor("y", "float", 2)],
                       domain="my.custom")
    assert cost_of(node) is None
    graph = import_model(one_node_model("FancyOp", [f32("x", 2)], [f32("y", 2)],
                                        domain="my.custom"))
    assert graph.unsupported == {"my.custom::FancyOp": 1}
    (only,) = graph.ops()
    assert only.cost is None


def test_free_list_is_ai_onnx_only():
    node = direct_node("Reshape", [tensor("x", "float", 2)], [tensor("y", "float", 2)],
                       domain="my.custom")
    assert cost_of(node) is None


def test_missing_required_input_raises_named_error():
    node = direct_node("Conv", [tensor("x", "float", 1, 3, 8, 8), None],
                       [tensor("y", "float", 1, 4, 6, 6)])
    with pytest.raises(CostRuleError, match=r"Conv node 'node'.*input 1 \(W\)"):
        cost_of(node)


def test_rule_returning_invalid_numbers_is_refused(monkeypatch):
    monkeypatch.setattr(costs, "lookup", lambda *_: lambda _node: OpCost(
        -1.0, 0.0, 0.0, 0.0, Engine.VECTOR))
    node = direct_node("Relu", [tensor("x", "float", 2)], [tensor("y", "float", 2)])
    with pytest.raises(CostRuleError, match="invalid numbers"):
        cost_of(node)
    monkeypatch.setattr(costs, "lookup", lambda *_: lambda _node: OpCost(
        math.nan, 0.0, 0.0, 0.0, Engine.VECTOR))
    with pytest.raises(CostRuleError, match="invalid numbers"):
        cost_of(node)


def test_malformed_node_errors_become_cost_rule_errors():
    node = direct_node("MatMul", [tensor("a", "float"), tensor("b", "float", 3)],
                       [tensor("y", "float", 3)])
    with pytest.raises(CostRuleError, match="MatMul node 'node'"):
        cost_of(node)
