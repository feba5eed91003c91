"""Hostile and malformed ONNX models, each built in code with ``onnx.helper`` (a few hundred bytes).

``HOSTILE`` maps a case name to a builder returning serialized model bytes; every case must end
as a one-line ``ModelImportError`` (a refusal), never a traceback, an out-of-memory kill, a hang
or a silently wrong result.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def model_bytes(nodes, inputs, outputs, initializers=(), functions=(), opset=OPSET) -> bytes:
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(initializers))
    opsets = [helper.make_opsetid("", opset)]
    if functions:
        opsets.append(helper.make_opsetid("local", 1))
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    model.ir_version = 8
    return model.SerializeToString()


def _vi(name, dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _i64(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def huge_range() -> bytes:
    """Range(0, n) with n from a Shape of a declared input: data propagation would build it."""
    x = _vi("x", shape=[2**17, 2**17])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ReduceProd", ["s"], ["n"], keepdims=0),
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),
        helper.make_node("Cast", ["r"], ["y"], to=TensorProto.INT64),
    ]
    return model_bytes(nodes, [x], [_vi("y", TensorProto.INT64)], [_i64("zero", 0), _i64("one", 1)])


def huge_range_constant() -> bytes:
    """Range(0, 2**34) from constants read by Add: ONNX data propagation would build it."""
    nodes = [
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),
        helper.make_node("Add", ["r", "one"], ["y"]),
    ]
    inits = [_i64("zero", 0), _i64("n", 2**34), _i64("one", 1)]
    return model_bytes(nodes, [], [_vi("y", TensorProto.INT64)], inits)


def _generator_read_by_add(generator: onnx.NodeProto, inits) -> bytes:
    nodes = [generator, helper.make_node("Add", ["g", "one"], ["y"])]
    return model_bytes(nodes, [], [_vi("y", TensorProto.INT64)], [*inits, _i64("one", 1)])


def huge_constant_of_shape() -> bytes:
    """ConstantOfShape([2**33]) of int64 read by Add."""
    node = helper.make_node(
        "ConstantOfShape", ["shape"], ["g"], value=numpy_helper.from_array(np.array([7]))
    )
    return _generator_read_by_add(node, [_i64("shape", [2**33])])


def huge_expand() -> bytes:
    """Expand([1], [2**33]) read by Add."""
    node = helper.make_node("Expand", ["v", "shape"], ["g"])
    return _generator_read_by_add(node, [_i64("v", [1]), _i64("shape", [2**33])])


def huge_tile() -> bytes:
    """Tile([1, 2], [2**32]) read by Add."""
    node = helper.make_node("Tile", ["v", "repeats"], ["g"])
    return _generator_read_by_add(node, [_i64("v", [1, 2]), _i64("repeats", [2**32])])


def long_vector_input() -> bytes:
    """A 1-D int64 input of 2**30 elements read by Add: ONNX data propagation writes one
    symbolic dim per element of it (~150 GB)."""
    nodes = [helper.make_node("Add", ["x", "one"], ["y"])]
    x = _vi("x", TensorProto.INT64, [2**30])
    return model_bytes(nodes, [x], [_vi("y", TensorProto.INT64)], [_i64("one", 1)])


def nested_functions(depth: int = 30) -> bytes:
    """f0 calls f1 twice, f1 calls f2 twice, ...: 2**depth nodes once inlined."""
    functions = []
    for level in range(depth):
        if level == depth - 1:
            body = [helper.make_node("Relu", ["a"], ["b"])]
        else:
            callee = f"f{level + 1}"
            body = [
                helper.make_node(callee, ["a"], ["t"], domain="local"),
                helper.make_node(callee, ["t"], ["b"], domain="local"),
            ]
        functions.append(
            helper.make_function(
                "local", f"f{level}", ["a"], ["b"], body,
                [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)],
            )
        )
    nodes = [helper.make_node("f0", ["x"], ["y"], domain="local")]
    return model_bytes(nodes, [_vi("x", shape=[4])], [_vi("y")], functions=functions)


def nested_subgraphs(depth: int = 24) -> bytes:
    """If nodes nested ``depth`` deep inside each other's branches."""
    def body(level: int) -> onnx.GraphProto:
        if level == 0:
            inner = [helper.make_node("Identity", ["x"], ["o"])]
        else:
            inner = [helper.make_node(
                "If", ["c"], ["o"], then_branch=body(level - 1), else_branch=body(0)
            )]
        return helper.make_graph(inner, f"b{level}", [], [_vi("o")])

    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=body(depth), else_branch=body(0))]
    return model_bytes(
        nodes, [_vi("c", TensorProto.BOOL, []), _vi("x", shape=[4])], [_vi("y")]
    )


def inferred_2_120() -> bytes:
    """ConstantOfShape of [2**40]*3 then Relu: shapes are inferred, 2**120 elements."""
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    return model_bytes(nodes, [], [_vi("y")], [_i64("shape", [2**40] * 3)])


def graph_bytes_over_budget() -> bytes:
    """Many tensors each under the element cap whose sum is far over the graph-bytes cap."""
    x = _vi("x", shape=[2**20, 2**20])  # 2**40 elements (at the element cap), 4 TiB
    nodes = []
    prev = "x"
    for i in range(400):
        nodes.append(helper.make_node("Relu", [prev], [f"t{i}"]))
        prev = f"t{i}"
    return model_bytes(nodes, [x], [_vi(prev)])


def _single(op: str, inputs: list[str], **attrs) -> bytes:
    node = helper.make_node(op, inputs, ["y"], **attrs)
    return model_bytes([node], [_vi("x", shape=[2, 3])], [_vi("y")])


def empty_cast_input() -> bytes:
    return _single("Cast", [""], to=TensorProto.FLOAT)


def empty_identity_input() -> bytes:
    return _single("Identity", [""])


def shape_without_input() -> bytes:
    return _single("Shape", [])


def _with_initializer(tensor: TensorProto) -> bytes:
    node = helper.make_node("Add", ["x", tensor.name], ["y"])
    return model_bytes([node], [_vi("x", shape=[2, 3])], [_vi("y")], [tensor])


def _raw_tensor(name, dtype, dims, **fields) -> TensorProto:
    """A TensorProto whose typed data fields are set as given, whatever its dims say."""
    t = TensorProto(name=name, data_type=dtype, dims=dims)
    for field, data in fields.items():
        getattr(t, field).extend(data)
    return t


def initializer_float_data_mismatch() -> bytes:
    """dims [2, 3] but 2 floats in float_data."""
    return _with_initializer(_raw_tensor("w", TensorProto.FLOAT, [2, 3], float_data=[1.0, 2.0]))


def initializer_int64_data_mismatch() -> bytes:
    """An int64 shape operand declared [2] with 5 values, read by Reshape."""
    t = _raw_tensor("shape", TensorProto.INT64, [2], int64_data=[1, 2, 3, 4, 5])
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    return model_bytes([node], [_vi("x", shape=[2, 3])], [_vi("y")], [t])


def string_initializer() -> bytes:
    t = helper.make_tensor("w", TensorProto.STRING, [2], [b"a", b"b"])
    node = helper.make_node("Identity", ["w"], ["y"])
    return model_bytes([node], [_vi("x", shape=[2, 3])], [_vi("y", TensorProto.STRING)], [t])


def string_shape_operand() -> bytes:
    """A string tensor where Reshape expects its int64 shape."""
    t = helper.make_tensor("shape", TensorProto.STRING, [2], [b"3", b"2"])
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    return model_bytes([node], [_vi("x", shape=[2, 3])], [_vi("y")], [t])


def dim_expression_out_of_range() -> bytes:
    """An input dim 's*s*s*s*s*s' that overflows int64 once ``s`` is bound (bind s=100000)."""
    x = _vi("x", shape=["s"])
    z = _vi("z", shape=["s*s*s*s*s*s"])
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["z"], ["w"])]
    return model_bytes(nodes, [x, z], [_vi("y"), _vi("w")])


def conv_group_zero() -> bytes:
    x = _vi("x", shape=[1, 4, 8, 8])
    w = numpy_helper.from_array(np.zeros((4, 4, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=0, name="conv0")
    return model_bytes([node], [x], [_vi("y")], [w])


#: case -> (builder, --dim bindings for the CLI)
HOSTILE: dict[str, tuple[Callable[[], bytes], tuple[str, ...]]] = {
    "huge_range": (huge_range, ()),
    "huge_range_constant": (huge_range_constant, ()),
    "huge_constant_of_shape": (huge_constant_of_shape, ()),
    "huge_expand": (huge_expand, ()),
    "huge_tile": (huge_tile, ()),
    "long_vector_input": (long_vector_input, ()),
    "nested_functions_30": (nested_functions, ()),
    "nested_subgraphs_24": (nested_subgraphs, ()),
    "inferred_2_120_elements": (inferred_2_120, ()),
    "graph_bytes_over_budget": (graph_bytes_over_budget, ()),
    "empty_cast_input": (empty_cast_input, ()),
    "empty_identity_input": (empty_identity_input, ()),
    "shape_without_input": (shape_without_input, ()),
    "initializer_float_data_mismatch": (initializer_float_data_mismatch, ()),
    "initializer_int64_data_mismatch": (initializer_int64_data_mismatch, ()),
    "string_initializer": (string_initializer, ()),
    "string_shape_operand": (string_shape_operand, ()),
    "dim_expression_out_of_range": (dim_expression_out_of_range, ("s=100000",)),
    "conv_group_zero": (conv_group_zero, ()),
}
