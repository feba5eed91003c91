"""Reductions (map·in + (in - out) + finish·out), arg-reductions, CumSum, TopK and pooling."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from roofcast.graph_import.costs import CostRuleError, cost_of
from roofcast.graph_import.types import Engine
from tests.graph_import.costs.builders import cost, direct_node, f32, i64, out, tensor

IN = 4 * 6 * 8
OUT = 4 * 1 * 8  # reduce axis 1, keepdims
AXES = {"axes": np.array([1], dtype=np.int64)}


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("ReduceSum", IN - OUT),
        ("ReduceMean", IN - OUT + OUT),
        ("ReduceMax", IN - OUT),
        ("ReduceMin", IN - OUT),
        ("ReduceProd", IN - OUT),
        ("ReduceL1", IN + (IN - OUT)),
        ("ReduceL2", IN + (IN - OUT) + OUT),
        ("ReduceSumSquare", IN + (IN - OUT)),
        ("ReduceLogSum", (IN - OUT) + OUT),
        ("ReduceLogSumExp", IN + (IN - OUT) + OUT),
    ],
)
def test_reduce(op, expected):
    c = cost(op, [f32("x", 4, 6, 8), i64("axes", 1)], [out("y")], initializers=AXES)
    assert c.flops == expected
    assert c.bytes_read == 4 * IN + 8 * 1  # data + the axes tensor
    assert c.bytes_written == 4 * OUT
    assert c.engine == Engine.VECTOR


def test_reduce_all_axes_without_keepdims():
    c = cost("ReduceSum", [f32("x", 4, 6, 8)], [out("y")], attrs={"keepdims": 0})
    assert c.flops == IN - 1
    assert c.bytes_written == 4


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reduce(op):
    c = cost(op, [f32("x", 4, 6, 8)], [out("y", TensorProto.INT64)],
             attrs={"axis": 2, "keepdims": 0})
    assert c.flops == IN - 4 * 6
    assert c.bytes_written == 8 * 4 * 6


def test_cumsum():
    c = cost("CumSum", [f32("x", 3, 5), i64("axis")], [out("y")],
             initializers={"axis": np.array(1, dtype=np.int64)})
    assert c.flops == 3 * 5
    assert c.bytes_read == 4 * 15 + 8


def test_topk():
    c = cost("TopK", [f32("x", 2, 100), i64("k", 1)], [out("v"), out("i", TensorProto.INT64)],
             initializers={"k": np.array([5], dtype=np.int64)})
    assert c.flops == 2 * 100 * 3  # ceil(log2 5) = 3 compares per element
    assert c.bytes_written == 4 * 2 * 5 + 8 * 2 * 5


def test_max_pool_with_indices():
    c = cost("MaxPool", [f32("x", 1, 4, 8, 8)], [out("y"), out("idx", TensorProto.INT64)],
             attrs={"kernel_shape": [2, 2], "strides": [2, 2]})
    assert c.flops == (2 * 2 - 1) * (4 * 4 * 4)
    assert c.bytes_read == 4 * 4 * 8 * 8
    assert c.bytes_written == 4 * 64 + 8 * 64


def test_average_pool_padded():
    c = cost("AveragePool", [f32("x", 1, 4, 8, 8)], [out("y")],
             attrs={"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    assert c.flops == 3 * 3 * (4 * 8 * 8)


def test_lp_pool():
    c = cost("LpPool", [f32("x", 1, 4, 8, 8)], [out("y")],
             attrs={"kernel_shape": [2, 2], "strides": [2, 2]})
    assert c.flops == 2 * (2 * 2) * (4 * 4 * 4)


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("GlobalAveragePool", 2 * 4 * 7 * 7),
        ("GlobalMaxPool", 2 * 4 * 7 * 7 - 2 * 4),
        ("GlobalLpPool", 2 * (2 * 4 * 7 * 7)),
    ],
)
def test_global_pools(op, expected):
    c = cost(op, [f32("x", 2, 4, 7, 7)], [out("y")])
    assert c.flops == expected
    assert c.bytes_written == 4 * 2 * 4


def test_pool_without_kernel_shape_raises_cost_rule_error():
    node = direct_node("MaxPool", [tensor("x", "float", 1, 4, 8, 8)],
                       [tensor("y", "float", 1, 4, 8, 8)])
    with pytest.raises(CostRuleError, match="kernel_shape"):
        cost_of(node)


def test_cumprod_opset26():
    c = cost("CumProd", [f32("x", 3, 5), i64("axis")], [out("y")],
             initializers={"axis": np.array(0, dtype=np.int64)}, opset=26)
    assert c.flops == 3 * 5
