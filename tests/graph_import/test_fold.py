"""Numpy folding of shape-computation ops (graph_import.fold)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from roofcast.graph_import.fold import FOLDERS, FoldError, attribute_values, fold_split

INT = np.int64


def a(*values, dtype=INT):
    return np.array(values, dtype=dtype)


CASES = [
    ("Identity", {}, [a(1, 2)], a(1, 2)),
    ("Constant", {"value_ints": [3, 4]}, [], a(3, 4)),
    ("Constant", {"value_float": 0.5}, [], np.array(0.5, np.float32)),
    ("Cast", {"to": TensorProto.FLOAT}, [a(2, 3)], np.array([2.0, 3.0], np.float32)),
    ("Gather", {"axis": 0}, [a(8, 16, 32), np.array(-1, INT)], np.array(32, INT)),
    ("Gather", {"axis": 0}, [a(8, 16, 32), a(0, 2)], a(8, 32)),
    ("Unsqueeze", {}, [np.array(7, INT), a(0)], a(7)),
    ("Unsqueeze", {"axes": [0]}, [np.array(7, INT)], a(7)),
    ("Squeeze", {}, [a(7), a(0)], np.array(7, INT)),
    ("Concat", {"axis": 0}, [a(1), a(2, 3)], a(1, 2, 3)),
    ("Range", {}, [np.array(0, INT), np.array(10, INT), np.array(3, INT)], a(0, 3, 6, 9)),
    ("ConstantOfShape", {"value": np.array([1], INT)}, [a(2, 3)], np.ones((2, 3), INT)),
    ("ConstantOfShape", {}, [a(2)], np.zeros(2, np.float32)),
    ("Slice", {}, [a(1, 2, 3, 4), a(1), a(2**63 - 1)], a(2, 3, 4)),
    ("Slice", {}, [a(1, 2, 3, 4), a(-1), a(-(2**63)), a(0), a(-1)], a(4, 3, 2, 1)),
    ("Slice", {"starts": [0], "ends": [2]}, [a(5, 6, 7)], a(5, 6)),
    ("Add", {}, [a(2, 3), a(10)], a(12, 13)),
    ("Sub", {}, [a(2, 3), a(1)], a(1, 2)),
    ("Mul", {}, [a(2, 3), a(4)], a(8, 12)),
    ("Div", {}, [a(7, -7), a(2)], a(3, -3)),  # integer Div truncates toward zero
    (
        "Div",
        {},
        [np.array([7.0], np.float32), np.array([2.0], np.float32)],
        np.array([3.5], np.float32),
    ),
    ("Mod", {}, [a(7, -7), a(3)], a(1, 2)),
    ("Mod", {"fmod": 1}, [np.array([-7.0]), np.array([3.0])], np.array([-1.0])),
    ("Equal", {}, [a(1, 2), a(1)], np.array([True, False])),
    ("Less", {}, [a(1, 2), a(2)], np.array([True, False])),
    ("Greater", {}, [a(1, 2), a(1)], np.array([False, True])),
    ("Not", {}, [np.array([True, False])], np.array([False, True])),
    ("And", {}, [np.array([True, True]), np.array([True, False])], np.array([True, False])),
    ("Where", {}, [np.array([True, False]), a(-1), a(5, 6)], a(-1, 6)),
    ("Min", {}, [a(4, 9), a(5, 5), a(6)], a(4, 5)),
    ("Max", {}, [a(4, 9), a(5, 5)], a(5, 9)),
    ("ReduceProd", {"keepdims": 0}, [a(2, 3, 4)], np.array(24, INT)),
    ("ReduceProd", {}, [a(2, 3, 4), a(0)], a(24)),
    ("ReduceSum", {"keepdims": 0}, [a(2, 3, 4), a(0)], np.array(9, INT)),
    ("Reshape", {}, [a(1, 2, 3, 4), a(2, -1)], np.array([[1, 2], [3, 4]], INT)),
    ("Reshape", {}, [np.zeros((2, 3), INT), a(0, 3)], np.zeros((2, 3), INT)),
    ("Expand", {}, [a(5), a(2, 3)], np.full((2, 3), 5, INT)),
    ("Tile", {}, [a(1, 2), a(2)], a(1, 2, 1, 2)),
    ("Transpose", {"perm": [1, 0]}, [np.array([[1, 2]], INT)], np.array([[1], [2]], INT)),
    ("Neg", {}, [a(1, -2)], a(-1, 2)),
    ("Abs", {}, [a(1, -2)], a(1, 2)),
    ("Sqrt", {}, [np.array([16.0], np.float32)], np.array([4.0], np.float32)),
    ("Floor", {}, [np.array([2.5], np.float32)], np.array([2.0], np.float32)),
    ("Ceil", {}, [np.array([2.5], np.float32)], np.array([3.0], np.float32)),
    ("CumSum", {}, [a(1, 2, 3), np.array(0, INT)], a(1, 3, 6)),
    ("Flatten", {"axis": 1}, [np.zeros((2, 3, 4), INT)], np.zeros((2, 12), INT)),
    ("NonZero", {}, [a(0, 3, 0, 5)], np.array([[1, 3]], INT)),
    ("ScatterND", {}, [a(1, 2, 3), np.array([[1]], INT), a(9)], a(1, 9, 3)),
    ("GatherElements", {"axis": 0}, [a(5, 6, 7), a(2, 0)], a(7, 5)),
]


@pytest.mark.parametrize(("op", "attrs", "inputs", "expected"), CASES, ids=[c[0] for c in CASES])
def test_folder(op, attrs, inputs, expected):
    (out,) = FOLDERS[op](attrs, inputs)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)


def test_every_folder_has_a_case():
    assert set(FOLDERS) - {c[0] for c in CASES} <= {
        "CastLike", "Pow", "LessOrEqual", "GreaterOrEqual", "Or", "Xor", "BitwiseAnd",
        "BitwiseOr", "Sign", "Reciprocal", "Relu", "Sum", "Mean", "ReduceMax", "ReduceMin",
        "ReduceMean",
    }


def test_split_even_and_by_sizes():
    parts = fold_split({"axis": 0}, [a(1, 2, 3, 4)], 2)
    assert [p.tolist() for p in parts] == [[1, 2], [3, 4]]
    parts = fold_split({}, [a(1, 2, 3, 4), a(1, 3)], 2)
    assert [p.tolist() for p in parts] == [[1], [2, 3, 4]]


def test_integer_division_by_zero_is_not_folded():
    with pytest.raises(FoldError, match="division by zero"):
        FOLDERS["Div"]({}, [a(1), a(0)])


def test_attribute_values_are_plain_python():
    node = helper.make_node(
        "Foo", [], ["y"], mode=b"linear", ints=[1, 2], f=0.5,
        t=helper.make_tensor("t", TensorProto.INT64, [2], [3, 4]),
    )
    attrs = attribute_values(node)
    assert attrs["mode"] == "linear"
    assert attrs["ints"] == [1, 2]
    assert attrs["f"] == 0.5
    assert attrs["t"].tolist() == [3, 4]


def test_external_tensor_attribute_is_never_read():
    t = TensorProto()
    t.name, t.data_type = "t", TensorProto.FLOAT
    t.dims.append(4)
    t.data_location = TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", "/etc/passwd"
    assert attribute_values(helper.make_node("Constant", [], ["y"], value=t)) == {"value": None}


@pytest.mark.parametrize(
    ("op", "inputs"),
    [
        ("Range", [np.array(0, INT), np.array(2**40, INT), np.array(1, INT)]),
        ("ConstantOfShape", [a(2**20, 2**20)]),
        ("Expand", [a(1), a(2**30, 2**30)]),
        ("Tile", [a(1, 2), a(2**40)]),
        ("Add", [np.zeros((60000, 1), INT), np.zeros((1, 60000), INT)]),
        ("Gather", [np.zeros((2**16,), INT), np.zeros((2**16,), INT)[:, None].repeat(2, 1)]),
    ],
    ids=["Range", "ConstantOfShape", "Expand", "Tile", "broadcast", "Gather"],
)
def test_hostile_sizes_are_refused_before_allocating(op, inputs):
    """A model cannot make folding allocate terabytes: the size is checked first."""
    with pytest.raises(FoldError, match="too large to fold"):
        FOLDERS[op]({}, inputs)


def test_integer_overflow_is_not_folded():
    """numpy int64 wraps silently; a wrapped shape value would be a wrong shape."""
    with pytest.raises(FoldError, match="integer overflow"):
        FOLDERS["Mul"]({}, [a(2**40), a(2**40)])
    with pytest.raises(FoldError, match="integer overflow"):
        FOLDERS["ReduceProd"]({"keepdims": 0}, [a(2**31, 2**31, 2**31)])
    (ok,) = FOLDERS["Mul"]({}, [a(2**31 - 1), a(2**31 - 1)])
    assert ok.tolist() == [(2**31 - 1) ** 2]
