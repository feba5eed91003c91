"""ONNX-domain ops whose onnx schema infers no output shape still resolve (and so does
everything downstream of them), through ``contrib_shapes``' same-shape rule."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from roofcast.graph_import import import_model


@pytest.mark.parametrize(
    ("op_type", "with_scale_bias", "attrs", "opset"),
    [("GroupNormalization", True, {"num_groups": 2, "epsilon": 1e-5}, 21),
     ("MeanVarianceNormalization", False, {}, 18)],
)
def test_normalisation_without_inferred_shape_resolves(op_type, with_scale_bias, attrs, opset):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8, 8])
    inits = ([numpy_helper.from_array(np.ones(4, np.float32), "s"),
              numpy_helper.from_array(np.zeros(4, np.float32), "b")] if with_scale_bias else [])
    inputs = ["x", "s", "b"] if with_scale_bias else ["x"]
    nodes = [helper.make_node(op_type, inputs, ["y"], **attrs),
             helper.make_node("Relu", ["y"], ["z"])]
    out = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [out], initializer=inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    graph = import_model(model.SerializeToString(), dims={"batch": 2})
    assert graph.unresolved == {}
    ops = {op.op_type: op for op in graph.ops()}
    assert ops[op_type].outputs[0].shape == (2, 4, 8, 8)
    assert ops["Relu"].cost.bytes_written == 2 * 4 * 8 * 8 * 4
