"""GPU collector pieces that run without a GPU: the isolated one-node models it times."""

from __future__ import annotations

import onnxruntime as ort

from roofcast.training_data.collectors.gpu import node_model
from roofcast.training_data.collectors.ort_cpu import prepare
from tests.training_data.collect_helpers import conv_matmul_model


def test_every_costed_node_becomes_a_runnable_one_node_model():
    prep = prepare(conv_matmul_model(), {"batch": 3}, name="tiny")
    inits = {t.name: t for t in prep.runnable.graph.initializer}
    opset = list(prep.runnable.opset_import)
    shapes = {}
    for op in prep.graph.ops():
        model_bytes, feeds = node_model(op, inits, opset)
        sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
        (out,) = sess.run(None, feeds)
        shapes[op.name] = out.shape
        assert out.shape == op.outputs[0].shape
    assert shapes == {"conv": (1, 16, 8, 8), "relu": (1, 16, 8, 8), "residual": (1, 16, 8, 8),
                      "matmul": (3, 16), "bias": (3, 16)}
