"""Tiny ONNX graphs built with onnx.helper for the import tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def make_model(nodes, inputs, outputs, initializers=(), value_info=(), opset=OPSET, ir_version=8):
    graph = helper.make_graph(
        list(nodes), "g", list(inputs), list(outputs), initializer=list(initializers),
        value_info=list(value_info),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def external_weight(name, dims, location="weights.bin", dtype=TensorProto.FLOAT):
    """A weightless initializer: dims and dtype only, data marked external at ``location``."""
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (
        ("location", location),
        ("offset", "0"),
        ("length", str(4 * int(np.prod(dims)))),
    ):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def relu_model(shape=("batch", 4)):
    """x -> Relu -> y with a declared input shape."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y])


def dynamic_reshape_model():
    """The exporter idiom: x[batch, seq, 16] @ w[16, 32] -> reshape to [batch*seq, 4, 8] through
    Shape -> Gather -> Mul -> Unsqueeze -> Concat -> Reshape."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["r"], name="mm"),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "i1"], ["q"], axis=0),
        helper.make_node("Mul", ["b", "q"], ["bq"]),
        helper.make_node("Unsqueeze", ["bq", "ax0"], ["bq1"]),
        helper.make_node("Concat", ["bq1", "c4", "c8"], ["shp"], axis=0),
        helper.make_node("Reshape", ["r", "shp"], ["y"], name="reshape"),
    ]
    inits = [
        external_weight("w", [16, 32]),
        const("i0", 0), const("i1", 1), const("ax0", [0]), const("c4", [4]), const("c8", [8]),
    ]
    return make_model(nodes, [x], [y], inits)


def serialize(model: onnx.ModelProto) -> bytes:
    return model.SerializeToString()
