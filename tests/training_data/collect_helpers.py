"""Tiny models for the collector tests, built with onnx.helper."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def conv_matmul_model(external: bool = False, location: str = "weights.bin"):
    """Two branches: Conv -> Relu -> Add(residual Z) and MatMul -> Add(bias).

    X[1,8,8,8] -> conv (16x8x3x3, pad 1) -> relu -> add Z[1,16,8,8] -> Y1[1,16,8,8]
    A[batch,32] -> matmul W2[32,16] -> add b2[16] -> Y2[batch,16]
    With ``external`` the weights W, W2 declare external data at ``location`` (never read).
    """
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "W")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 16)).astype(np.float32), "W2")
    b = numpy_helper.from_array(np.ones(16, np.float32), "B")
    b2 = numpy_helper.from_array(np.ones(16, np.float32), "b2")
    if external:
        for t in (w, w2):
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
            e = t.external_data.add()
            e.key, e.value = "location", location
    nodes = [
        helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "Z"], ["Y1"], name="residual"),
        helper.make_node("MatMul", ["A", "W2"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b2"], ["Y2"], name="bias"),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("X", F, [1, 8, 8, 8]),
         helper.make_tensor_value_info("Z", F, [1, 16, 8, 8]),
         helper.make_tensor_value_info("A", F, ["batch", 32])],
        [helper.make_tensor_value_info("Y1", F, [1, 16, 8, 8]),
         helper.make_tensor_value_info("Y2", F, ["batch", 16])],
        initializer=[w, b, w2, b2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def embedding_model(vocab: int = 50, hidden: int = 8):
    """input_ids[batch, seq] (int64) -> Gather(table[vocab, hidden]); attention_mask and
    position_ids inputs -> Cast/Add so they are used."""
    table = numpy_helper.from_array(np.zeros((vocab, hidden), np.float32), "table")
    table.ClearField("raw_data")
    table.data_location = TensorProto.EXTERNAL
    e = table.external_data.add()
    e.key, e.value = "location", "absent.bin"
    nodes = [
        helper.make_node("Unsqueeze", ["input_ids", "ax"], ["ids3"], name="unsq"),
        helper.make_node("Squeeze", ["ids3", "ax"], ["ids"], name="sq"),
        helper.make_node("Gather", ["table", "ids"], ["emb"], name="embed", axis=0),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], name="cast", to=F),
        helper.make_node("Cast", ["position_ids"], ["posf"], name="cast_pos", to=F),
        helper.make_node("Add", ["maskf", "posf"], ["out2"], name="add"),
    ]
    ax = numpy_helper.from_array(np.array([2], np.int64), "ax")
    i64 = TensorProto.INT64
    graph = helper.make_graph(
        nodes, "emb",
        [helper.make_tensor_value_info("input_ids", i64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", i64, ["batch", "sequence"]),
         helper.make_tensor_value_info("position_ids", i64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("emb", F, ["batch", "sequence", hidden]),
         helper.make_tensor_value_info("out2", F, ["batch", "sequence"])],
        initializer=[table, ax])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
