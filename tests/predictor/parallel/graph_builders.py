"""Tiny ONNX graphs for the tensor-sharding tests: an MLP pair and stacked attention blocks,
imported at a batch size (a ``graph_at`` for ``GraphParallelSource``)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from roofcast.graph_import import import_model

OPSET = 17


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model.SerializeToString()


def _w(name, *shape, seed=0):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def mlp_pair(batch: int, d: int = 16, ff: int = 64):
    """x[batch, d] -> MatMul W1[d, ff] -> Relu -> MatMul W2[ff, d] -> y."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, d])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="up"),
             helper.make_node("Relu", ["h"], ["a"], name="act"),
             helper.make_node("MatMul", ["a", "w2"], ["y"], name="down")]
    return import_model(_model(nodes, [x], [y], [_w("w1", d, ff), _w("w2", ff, d, seed=1)]),
                        name="mlp")


def attention_blocks(batch: int, blocks: int = 2, seq: int = 4, heads: int = 12,
                     head_dim: int = 8):
    """x[batch, seq, d] -> an input projection, then ``blocks`` post-norm transformer blocks
    (Q/K/V, heads split by a Reshape, softmax attention, output projection, residual add,
    LayerNorm, MLP d -> 4d -> d, residual add, LayerNorm) -> y."""
    d = heads * head_dim
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, d])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [_w("w_in", d, d, seed=99),
             numpy_helper.from_array(np.array([batch, seq, heads, head_dim], np.int64), "split"),
             numpy_helper.from_array(np.array([batch, seq, d], np.int64), "merge"),
             numpy_helper.from_array(np.array(1.0 / np.sqrt(head_dim), np.float32), "scale")]
    nodes = [helper.make_node("MatMul", ["x", "w_in"], ["s0"], name="embed")]
    h = "s0"
    for b in range(blocks):
        p = f"b{b}_"
        for i, n in enumerate("qkv"):
            inits.append(_w(p + "w" + n, d, d, seed=10 * b + i))
            nodes += [
                helper.make_node("MatMul", [h, p + "w" + n], [p + n], name=p + n),
                helper.make_node("Reshape", [p + n, "split"], [p + n + "4"], name=p + n + "r"),
            ]
        nodes += [
            helper.make_node("Transpose", [p + "q4"], [p + "qt"], perm=[0, 2, 1, 3], name=p + "qt"),
            helper.make_node("Transpose", [p + "k4"], [p + "kt"], perm=[0, 2, 3, 1], name=p + "kt"),
            helper.make_node("Transpose", [p + "v4"], [p + "vt"], perm=[0, 2, 1, 3], name=p + "vt"),
            helper.make_node("MatMul", [p + "qt", p + "kt"], [p + "sc"], name=p + "qk"),
            helper.make_node("Mul", [p + "sc", "scale"], [p + "ss"], name=p + "scale"),
            helper.make_node("Softmax", [p + "ss"], [p + "pr"], axis=-1, name=p + "softmax"),
            helper.make_node("MatMul", [p + "pr", p + "vt"], [p + "av"], name=p + "av"),
            helper.make_node("Transpose", [p + "av"], [p + "at"], perm=[0, 2, 1, 3], name=p + "at"),
            helper.make_node("Reshape", [p + "at", "merge"], [p + "am"], name=p + "am"),
            helper.make_node("MatMul", [p + "am", p + "wo"], [p + "o"], name=p + "o"),
            helper.make_node("Add", [p + "o", h], [p + "r1"], name=p + "res1"),
            helper.make_node("LayerNormalization", [p + "r1", p + "g1", p + "b1"], [p + "n1"],
                             axis=-1, name=p + "ln1"),
            helper.make_node("MatMul", [p + "n1", p + "wu"], [p + "u"], name=p + "up"),
            helper.make_node("Relu", [p + "u"], [p + "ua"], name=p + "act"),
            helper.make_node("MatMul", [p + "ua", p + "wd"], [p + "dn"], name=p + "down"),
            helper.make_node("Add", [p + "dn", p + "n1"], [p + "r2"], name=p + "res2"),
            helper.make_node("LayerNormalization", [p + "r2", p + "g2", p + "b2"], [p + "n2"],
                             axis=-1, name=p + "ln2"),
        ]
        inits += [_w(p + "wo", d, d, seed=10 * b + 3), _w(p + "wu", d, 4 * d, seed=10 * b + 4),
                  _w(p + "wd", 4 * d, d, seed=10 * b + 5)]
        inits += [_w(p + n, d, seed=10 * b + 6 + i) for i, n in enumerate(("g1", "b1", "g2", "b2"))]
        h = p + "n2"
    nodes.append(helper.make_node("Identity", [h], ["y"], name="out"))
    return import_model(_model(nodes, [x], [y], inits), name="attn")
