"""Tiny ONNX graphs built in code for the kernel-mapping pattern tests (imported with the real
cost rules, so a test's expected values are the rules' own arithmetic on these shapes)."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from roofcast.graph_import import import_model
from roofcast.graph_import.types import Graph

F = TensorProto.FLOAT


def vi(name: str, *shape: int, dtype: int = F):
    return helper.make_tensor_value_info(name, dtype, list(shape))


def const(name: str, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def build(nodes, inputs, outputs, inits=(), name: str = "tiny", opset: int = 17) -> Graph:
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return import_model(m.SerializeToString(), name=name)


def linear_bias(m: int = 64, k: int = 32, n: int = 48) -> Graph:
    """x[m,k] @ W[k,n] + b[n] -> y (the exported nn.Linear)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["y"], name="bias")]
    inits = [const("W", np.ones((k, n))), const("b", np.ones(n))]
    return build(nodes, [vi("x", m, k)], [vi("y", m, n)], inits)


def residual_add(m: int = 64, k: int = 32) -> Graph:
    """x[m,k] @ W[k,k] + x: a residual Add (not a bias) after the matmul."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "x"], ["y"], name="res")]
    return build(nodes, [vi("x", m, k)], [vi("y", m, k)], [const("W", np.ones((k, k)))])


def erf_gelu(n: int = 1024) -> Graph:
    """x -> Relu -> the exported erf GELU (Div, Erf, Add, Mul, Mul) -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Div", ["r", "sqrt2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="add1"),
             helper.make_node("Mul", ["r", "a"], ["m"], name="mulx"),
             helper.make_node("Mul", ["m", "half"], ["y"], name="mulhalf")]
    inits = [const("sqrt2", math.sqrt(2)), const("one", 1.0), const("half", 0.5)]
    return build(nodes, [vi("x", n)], [vi("y", n)], inits)


def tanh_gelu(n: int = 1024) -> Graph:
    """x -> the exported gelu_new: 0.5*x*(1+tanh(c*(x+0.044715*x^3))) (8 nodes)."""
    nodes = [helper.make_node("Mul", ["x", "half"], ["hx"], name="mul_half"),
             helper.make_node("Pow", ["x", "three"], ["p"], name="pow"),
             helper.make_node("Mul", ["p", "k"], ["pk"], name="mul_k"),
             helper.make_node("Add", ["x", "pk"], ["s"], name="add"),
             helper.make_node("Mul", ["s", "c"], ["sc"], name="mul_c"),
             helper.make_node("Tanh", ["sc"], ["th"], name="tanh"),
             helper.make_node("Add", ["th", "one"], ["t1"], name="add1"),
             helper.make_node("Mul", ["hx", "t1"], ["y"], name="mul_out")]
    inits = [const("half", 0.5), const("three", 3.0), const("k", 0.044715),
             const("c", math.sqrt(2 / math.pi)), const("one", 1.0)]
    return build(nodes, [vi("x", n)], [vi("y", n)], inits)


def views(b: int = 2, s: int = 16, h: int = 4, d: int = 8) -> Graph:
    """The data movement of multi-head attention around a score MatMul:
    qkv[b,s,3hd] -Split-> q, k, v; q,k -Reshape-> [b,s,h,d] -Transpose-> heads -MatMul-> scores;
    scores -Cast(float->float)-> -MatMul v-> o[b,h,s,d] -Transpose-> -Reshape-> y[b,s,hd]
    (merge heads: that Transpose must become contiguous)."""
    hd = h * d
    shape4 = const("shape4", [b, s, h, d], np.int64)
    shape3 = const("shape3", [b, s, hd], np.int64)
    split = const("split", [hd, hd, hd], np.int64)
    nodes = [helper.make_node("Split", ["qkv", "split"], ["q", "k", "v"], axis=2, name="split"),
             helper.make_node("Reshape", ["q", "shape4"], ["q4"], name="rq"),
             helper.make_node("Reshape", ["k", "shape4"], ["k4"], name="rk"),
             helper.make_node("Reshape", ["v", "shape4"], ["v4"], name="rv"),
             helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3], name="tq"),
             helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1], name="tk"),
             helper.make_node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3], name="tv"),
             helper.make_node("MatMul", ["qt", "kt"], ["sc"], name="qk"),
             helper.make_node("Softmax", ["sc"], ["p"], axis=-1, name="softmax"),
             helper.make_node("Cast", ["p"], ["pc"], to=F, name="cast_same"),
             helper.make_node("MatMul", ["pc", "vt"], ["o"], name="pv"),
             helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3], name="merge"),
             helper.make_node("Reshape", ["ot", "shape3"], ["y"], name="ry")]
    return build(nodes, [vi("qkv", b, s, 3 * hd)], [vi("y", b, s, hd)],
                 [shape4, shape3, split])


def attention(b: int = 2, h: int = 4, s: int = 16, d: int = 8, scale: bool = False,
              mask: bool = False) -> Graph:
    """q, k^T, v inputs -> MatMul -> [Mul scale] -> [Add mask] -> Softmax -> MatMul -> o."""
    nodes = [helper.make_node("MatMul", ["q", "kT"], ["sc"], name="qk")]
    cur = "sc"
    inits = []
    if scale:
        nodes.append(helper.make_node("Mul", [cur, "scale"], ["scs"], name="scale"))
        inits.append(const("scale", 1 / math.sqrt(d)))
        cur = "scs"
    inputs = [vi("q", b, h, s, d), vi("kT", b, h, d, s), vi("v", b, h, s, d)]
    if mask:
        nodes.append(helper.make_node("Add", [cur, "mask"], ["scm"], name="mask"))
        inputs.append(vi("mask", b, 1, s, s))
        cur = "scm"
    nodes += [helper.make_node("Softmax", [cur], ["p"], axis=-1, name="softmax"),
              helper.make_node("MatMul", ["p", "v"], ["o"], name="pv")]
    return build(nodes, inputs, [vi("o", b, h, s, d)], inits)


def norm_chain(m: int = 64, n: int = 32) -> Graph:
    """h = x @ W; r = h + x (residual); LayerNorm(r); Relu; LayerNorm again; Mul -> y."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "x"], ["r"], name="res"),
             helper.make_node("LayerNormalization", ["r", "g", "bt"], ["ln"], axis=-1,
                              name="ln1"),
             helper.make_node("Relu", ["ln"], ["a"], name="relu"),
             helper.make_node("LayerNormalization", ["a", "g", "bt"], ["ln2"], axis=-1,
                              name="ln2"),
             helper.make_node("Mul", ["ln2", "g"], ["y"], name="mul")]
    inits = [const("W", np.ones((n, n))), const("g", np.ones(n)), const("bt", np.zeros(n))]
    return build(nodes, [vi("x", m, n)], [vi("y", m, n)], inits)


def conv_relu(c: int = 8, hw: int = 16) -> Graph:
    """x[1,c,hw,hw] -Conv 3x3-> -Relu-> y: the TF32 and epilogue case."""
    nodes = [helper.make_node("Conv", ["x", "Wc"], ["h"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    return build(nodes, [vi("x", 1, c, hw, hw)], [vi("y", 1, c, hw, hw)],
                 [const("Wc", np.ones((c, c, 3, 3)))])
