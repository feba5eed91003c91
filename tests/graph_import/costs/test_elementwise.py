"""Elementwise, activation and variadic ops: FLOPs per output element, broadcast-aware bytes."""

from __future__ import annotations

import pytest
from onnx import TensorProto

from roofcast.graph_import.types import Engine
from tests.graph_import.costs.builders import (
    MS_DOMAIN,
    T,
    boolean,
    cost,
    f16,
    f32,
    i32,
    out,
    weights,
)

# Independent statement of the formula-count convention (package docstring), op -> FLOPs/elem.
UNARY = [
    ("Relu", 1), ("Neg", 1), ("Abs", 1), ("Floor", 1), ("Ceil", 1), ("Round", 1), ("Sign", 1),
    ("Exp", 1), ("Log", 1), ("Sqrt", 1), ("Reciprocal", 1), ("Erf", 1), ("Tanh", 1),
    ("Sin", 1), ("Cos", 1), ("Tan", 1), ("Asin", 1), ("Acos", 1), ("Atan", 1), ("Sinh", 1),
    ("Cosh", 1), ("Asinh", 1), ("Acosh", 1), ("Atanh", 1),
    ("LeakyRelu", 2), ("ThresholdedRelu", 2), ("Sigmoid", 4), ("HardSigmoid", 4),
    ("HardSwish", 5), ("Elu", 4), ("Selu", 5), ("Celu", 7), ("Softplus", 3), ("Softsign", 3),
    ("Mish", 5), ("Shrink", 4),
]


@pytest.mark.parametrize(("op", "k"), UNARY)
def test_unary_float(op, k):
    c = cost(op, [f32("x", 2, 3, 4)], [out("y")])
    assert c.flops == k * 2 * 3 * 4
    assert c.bytes_read == 4 * 2 * 3 * 4
    assert c.bytes_written == 4 * 2 * 3 * 4
    assert c.weight_bytes == 0
    assert c.engine == Engine.VECTOR


@pytest.mark.parametrize(
    ("op", "make", "out_type"),
    [
        ("Not", boolean, TensorProto.BOOL),
        ("IsNaN", f32, TensorProto.BOOL),
        ("IsInf", f32, TensorProto.BOOL),
    ],
)
def test_unary_predicates_use_actual_itemsize(op, make, out_type):
    x = make("x", 5, 7)
    c = cost(op, [x], [out("y", out_type)])
    in_itemsize = 1 if make is boolean else 4
    assert c.flops == 5 * 7
    assert c.bytes_read == in_itemsize * 5 * 7
    assert c.bytes_written == 1 * 5 * 7


def test_bitwise_not_int32():
    c = cost("BitwiseNot", [i32("x", 6)], [out("y", TensorProto.INT32)])
    assert (c.flops, c.bytes_read, c.bytes_written) == (6, 4 * 6, 4 * 6)


BINARY_FLOAT = [("Add", 1), ("Sub", 1), ("Mul", 1), ("Div", 1), ("Pow", 1), ("PRelu", 2)]


@pytest.mark.parametrize(("op", "k"), BINARY_FLOAT)
def test_binary_broadcast_reads_each_input_at_own_size(op, k):
    c = cost(op, [f32("a", 8, 16, 32), f32("b", 32)], [out("y")])
    assert c.flops == k * 8 * 16 * 32
    assert c.bytes_read == 4 * (8 * 16 * 32 + 32)
    assert c.bytes_written == 4 * 8 * 16 * 32


def test_binary_two_way_broadcast_costs_the_output_shape():
    c = cost("Add", [f16("a", 4, 1), f16("b", 1, 5)], [out("y", TensorProto.FLOAT16)])
    assert c.flops == 4 * 5
    assert c.bytes_read == 2 * (4 + 5)
    assert c.bytes_written == 2 * 4 * 5


def test_same_tensor_twice_is_read_once():
    c = cost("Mul", [f32("x", 10), f32("x", 10)], [out("y")])
    assert c.flops == 10
    assert c.bytes_read == 4 * 10


def test_weight_operand_counts_as_weight_bytes():
    c = cost("Mul", [f32("x", 3, 64), f32("g", 64)], [out("y")], initializers={"g": weights(64)})
    assert c.weight_bytes == 4 * 64
    assert c.bytes_read == 4 * (3 * 64 + 64)


@pytest.mark.parametrize("op", ["Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_integer_binary(op):
    a = T("a", TensorProto.UINT32, (3, 4))
    b = T("b", TensorProto.UINT32, (4,))
    attrs = {"direction": "LEFT"} if op == "BitShift" else {}
    c = cost(op, [a, b], [out("y", TensorProto.UINT32)], attrs=attrs)
    assert c.flops == 3 * 4
    assert c.bytes_read == 4 * (3 * 4 + 4)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    c = cost(op, [boolean("a", 2, 9), boolean("b", 2, 9)], [out("y", TensorProto.BOOL)])
    assert (c.flops, c.bytes_read, c.bytes_written) == (2 * 9, 2 * 2 * 9, 2 * 9)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_write_bool(op):
    c = cost(op, [f32("a", 6, 5), f32("b", 1)], [out("y", TensorProto.BOOL)])
    assert c.flops == 6 * 5
    assert c.bytes_read == 4 * (6 * 5 + 1)
    assert c.bytes_written == 1 * 6 * 5


def test_where_three_way_broadcast():
    c = cost("Where", [boolean("c", 1, 7), f32("x", 3, 7), f32("y0", 1)], [out("y")])
    assert c.flops == 3 * 7
    assert c.bytes_read == 1 * 7 + 4 * 3 * 7 + 4 * 1
    assert c.bytes_written == 4 * 3 * 7


@pytest.mark.parametrize(("op", "per_extra_input"), [("Sum", 1), ("Max", 1), ("Min", 1)])
def test_variadic(op, per_extra_input):
    c = cost(op, [f32("a", 4, 5), f32("b", 5), f32("c", 4, 5)], [out("y")])
    assert c.flops == (3 - 1) * per_extra_input * 4 * 5
    assert c.bytes_read == 4 * (20 + 5 + 20)


def test_mean_adds_a_divide():
    c = cost("Mean", [f32("a", 4, 5), f32("b", 4, 5)], [out("y")])
    assert c.flops == 2 * 4 * 5  # one add + one divide per element


def test_clip_counts_given_bounds():
    both = cost("Clip", [f32("x", 100), f32("lo"), f32("hi")], [out("y")])
    only_max = cost("Clip", [f32("x", 100), None, f32("hi")], [out("y")])
    assert both.flops == 2 * 100
    assert only_max.flops == 1 * 100
    assert both.bytes_read == 4 * (100 + 1 + 1)


@pytest.mark.parametrize(("approximate", "k"), [("none", 5), ("tanh", 9)])
def test_gelu_opset20(approximate, k):
    c = cost("Gelu", [f32("x", 2, 128)], [out("y")], attrs={"approximate": approximate})
    assert c.flops == k * 2 * 128


def test_ms_fast_gelu_with_and_without_bias():
    with_bias = cost(
        "FastGelu", [f32("x", 2, 64), f32("b", 64)], [f32("y", 2, 64)], domain=MS_DOMAIN,
        initializers={"b": weights(64)},
    )
    plain = cost("FastGelu", [f32("x", 2, 64)], [f32("y", 2, 64)], domain=MS_DOMAIN)
    assert with_bias.flops == (9 + 1) * 2 * 64
    assert with_bias.weight_bytes == 4 * 64
    assert plain.flops == 9 * 2 * 64


@pytest.mark.parametrize(
    ("op", "k", "n_inputs"),
    [("Gelu", 5, 1), ("BiasGelu", 6, 2), ("QuickGelu", 6, 1), ("BiasAdd", 2, 3)],
)
def test_ms_elementwise(op, k, n_inputs):
    shapes = [(2, 3, 16), (16,), (2, 3, 16)][:n_inputs]
    inputs = [f32(f"in{i}", *s) for i, s in enumerate(shapes)]
    c = cost(op, inputs, [f32("y", 2, 3, 16)], domain=MS_DOMAIN)
    assert c.flops == k * 2 * 3 * 16
    expected_read_elems = [2 * 3 * 16, 2 * 3 * 16 + 16, 2 * 3 * 16 + 16 + 2 * 3 * 16][n_inputs - 1]
    assert c.bytes_read == 4 * expected_read_elems
    assert c.bytes_written == 4 * 2 * 3 * 16


def test_swish_opset24_and_swiglu_opset28():
    swish = cost("Swish", [f32("x", 4, 32)], [out("y")], attrs={"alpha": 1.0}, opset=24)
    assert swish.flops == 6 * 4 * 32
    swiglu = cost("SwiGLU", [f32("a", 4, 32), f32("b", 4, 32)], [out("y")], opset=28)
    assert swiglu.flops == 7 * 4 * 32
    assert swiglu.bytes_read == 4 * 2 * 4 * 32
