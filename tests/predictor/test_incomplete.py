"""An incomplete prediction (``allow_incomplete``) says so loudly, and memory skips the
tensors whose shapes are unknown instead of crashing."""

from onnx import TensorProto, helper

from roofcast.graph_import import import_model
from roofcast.predictor.config import RunConfig
from roofcast.predictor.simulate import predict_graph


def _graph_with_unbound_dim():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    ids = helper.make_tensor_value_info("ids", TensorProto.FLOAT, ["sequence", 8])
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["ids"], ["z"])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x, ids], outs),
                              opset_imports=[helper.make_opsetid("", 17)])
    return import_model(model.SerializeToString())


def test_incomplete_prediction_is_flagged_and_memory_counts_known_tensors_only():
    graph = _graph_with_unbound_dim()
    assert graph.unbound_dims == ("sequence",)
    pred = predict_graph(graph, "t4", RunConfig(), "roofline", allow_incomplete=True)
    assert pred.notes[0].startswith("INCOMPLETE: 1 of 2 nodes are not costed")
    assert len(pred.per_op) == 1
    # only the concrete 4x8 fp32 input and output are counted as activations
    assert pred.memory.activations_bytes == 2 * 4 * 8 * 4
