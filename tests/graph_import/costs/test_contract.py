"""Contract over the whole op registry: every entry complete and consistent (family, backward
kind, shape rules), documented rules, every rule tested, free ops disjoint from rules, unknown
ops reported (never zero), invalid rule output refused, duplicates refused."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import roofcast.graph_import.costs as costs
from roofcast.graph_import import import_model
from roofcast.graph_import.costs import FREE_OPS, CostRuleError, cost_of, registered_ops
from roofcast.graph_import.costs.registry import BACKWARD_KINDS, register
from roofcast.graph_import.types import FREE_COST, Engine, OpCost
from roofcast.graph_import.workload_schema import FAMILIES
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


#: family -> the backward kinds its ops may name (a Relu with a GEMM backward is a typo).
KINDS_BY_FAMILY: dict[str, set[str]] = {
    "matmul": {"gemm", "gemm_every_input"},
    "conv": {"gemm"},
    "recurrent": {"whole_layer"},
    "attention": {"whole_layer"},
    "elementwise": {"elementwise", "elementwise_gout_only"},
    "normalization": {"normalization"},
    "softmax": {"softmax"},
    "reduction": {"reduction", "reduction_saved"},
    "pooling": {"pooling", "pooling_saved"},
    "data_movement": {"data_movement", "data_movement_accumulates"},
    "quantization": {"straight_through"},
    "moe": set(),  # no ONNX op: the LLM road's routed-expert module rows (predictor.llm.layer)
}
#: families whose ops may have a GEMM view / an inner size.
GEMM_FAMILIES = {"matmul", "conv", "recurrent"}
INNER_FAMILIES = {"softmax", "normalization", "reduction", "conv"}


def test_every_entry_is_complete_and_consistent():
    assert set(KINDS_BY_FAMILY) == set(FAMILIES) - {"other"}
    assert set().union(*KINDS_BY_FAMILY.values()) == set(BACKWARD_KINDS) - {"generic"}
    bad = []
    for (domain, op), spec in registered_ops().items():
        problems = [
            (spec.op_type, spec.domain) != (op, domain) and "key",
            not callable(spec.cost) and "cost",
            spec.backward not in KINDS_BY_FAMILY.get(spec.family, ()) and "family/backward",
            spec.gemm_dims is not None and spec.family not in GEMM_FAMILIES and "gemm_dims",
            spec.inner_elems is not None and spec.family not in INNER_FAMILIES and "inner_elems",
            any(not isinstance(i, int) or i < 0 for i in spec.non_trainable_inputs) and "inputs",
        ]
        bad += [f"{domain or 'ai.onnx'}::{op}: {p}" for p in problems if p]
    assert bad == []


def test_matrix_ops_name_their_gemm_and_row_ops_their_inner_size():
    ops = registered_ops()
    assert all(ops[("", op)].gemm_dims is not None for op in (
        "MatMul", "Gemm", "Einsum", "Conv", "ConvTranspose", "LSTM", "GRU", "RNN"))
    assert all(ops[("", op)].inner_elems is not None for op in (
        "Softmax", "LayerNormalization", "ReduceSum", "ArgMax", "Conv", "GroupNormalization"))
    assert ops[("", "BatchNormalization")].non_trainable_inputs == (3, 4)
    assert ops[("", "Add")].backward == "elementwise_gout_only"
    assert ops[("", "Mul")].backward == "elementwise"
    assert ops[("", "RotaryEmbedding")].family == "elementwise"  # costed in attention.py


def test_duplicates_and_unknown_vocabulary_are_refused():
    rule = registered_ops()[("", "Relu")].cost
    with pytest.raises(RuntimeError, match=r"ai\.onnx::Relu registered twice"):
        register("Relu", family="elementwise", backward="elementwise")(rule)
    with pytest.raises(ValueError, match="unknown op family 'activation'"):
        register("NewOp", family="activation", backward="elementwise")
    with pytest.raises(ValueError, match="unknown backward kind 'relu'"):
        register("NewOp", family="elementwise", backward="relu")(rule)
    assert ("", "NewOp") not in registered_ops()


def test_every_rule_has_a_docstring():
    missing = sorted(f"{d}::{op}" for (d, op), spec in registered_ops().items()
                     if not (spec.cost.__doc__ or "").strip())
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
