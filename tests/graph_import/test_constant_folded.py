"""Shape computations that the import evaluates from bound dims cost nothing (a runtime with
the same static shapes folds them away); ops on real data keep their cost."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from roofcast.graph_import import import_model
from roofcast.graph_import.summary import totals
from roofcast.graph_import.types import FREE_COST


def _model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]),
        helper.make_node("Concat", ["b1", "minus_one"], ["new_shape"], axis=0),
        helper.make_node("Reshape", ["x", "new_shape"], ["y"]),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    out = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_shape_subgraph_is_folded_and_free():
    graph = import_model(_model().SerializeToString(), dims={"batch": 4})
    ops = {op.op_type: op for op in graph.ops()}
    for op_type in ("Gather", "Concat"):
        assert ops[op_type].constant_folded
        assert ops[op_type].cost == FREE_COST
    assert not ops["Relu"].constant_folded
    assert ops["Relu"].cost.bytes_written == 4 * 8 * 4
    assert totals(graph)["constant_folded_nodes"] == 4  # Shape, Gather, Unsqueeze, Concat
