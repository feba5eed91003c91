"""Tiny conv graphs for the ONNX Runtime CPU tests (``test_ort_rules``, ``test_ort_plan``)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from roofcast.graph_import.types import Graph
from tests.predictor.runtimes.onnx_graphs import build, const, vi


def pad_conv(c: int = 16, hw: int = 16, pads=(0, 0, 1, 1, 0, 0, 1, 1), value: float = 0.0,
             mode: str = "constant", reader: str = "Conv", second_reader: bool = False,
             weightless: bool = False) -> Graph:
    """x[1,c,hw,hw] -Pad-> -Conv 3x3 (pads 0)-> -Relu-> y (the HF MobileNetV2 TF padding).
    ``reader``: what reads the Pad (Conv, Relu); ``second_reader``: the Pad output is also a
    model output; ``weightless``: the conv weight is declared external, its data absent."""
    out = hw + pads[2] + pads[6] - 2
    nodes = [helper.make_node("Pad", ["x", "pads", "pv"], ["p"], mode=mode, name="pad")]
    if reader == "Conv":
        nodes.append(helper.make_node("Conv", ["p", "W"], ["h"], name="conv"))
    else:
        nodes.append(helper.make_node(reader, ["p"], ["h"], name="conv"))
        out = hw + pads[2] + pads[6]
    nodes.append(helper.make_node("Relu", ["h"], ["y"], name="relu"))
    w = const("W", np.full((c, c, 3, 3), 0.1))
    if weightless:
        w = external(w)
    outputs = [vi("y", 1, c, out, out)]
    if second_reader:
        outputs.append(vi("p", 1, c, hw + pads[2] + pads[6], hw + pads[3] + pads[7]))
    return build(nodes, [vi("x", 1, c, hw, hw)], outputs,
                 [w, const("pads", list(pads), np.int64), const("pv", value)])


def conv_block(cin: int = 16, cout: int = 16, hw: int = 8, group: int = 1) -> Graph:
    """x[1,cin,hw,hw] -Conv 1x1-> -Relu-> -Transpose (NCHW -> NHWC)-> y: one NCHWc region
    between a model input and a reader outside it."""
    nodes = [helper.make_node("Conv", ["x", "W"], ["h"], group=group, name="conv"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 3, 1], name="nhwc")]
    return build(nodes, [vi("x", 1, cin, hw, hw)], [vi("y", 1, hw, hw, cout)],
                 [const("W", np.full((cout, cin // group, 1, 1), 0.1))])


def same_type_cast(n: int = 64) -> Graph:
    """x -Relu-> -Cast to float (its own type)-> -Sigmoid-> y: ONNX Runtime drops the Cast."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["c"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Sigmoid", ["c"], ["y"], name="sig")]
    return build(nodes, [vi("x", n, n)], [vi("y", n, n)])


def external(t, location: str = "w.bin"):
    """``t`` with its data declared external in ``location`` (a file never written)."""
    size = len(t.raw_data)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(size))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def folded_transpose(k: int = 512, n: int = 512, m: int = 8) -> Graph:
    """y = x @ Transpose(W), W weightless (its values unknown to roofcast): ONNX Runtime
    transposes the initializer once at load, roofcast prices the copy in the graph as written."""
    nodes = [helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0], name="wt"),
             helper.make_node("MatMul", ["x", "Wt"], ["y"], name="mm")]
    return build(nodes, [vi("x", m, k)], [vi("y", m, n)],
                 [external(const("W", np.zeros((n, k))))])


def custom_op() -> Graph:
    """x -> Relu -> an op of a domain ONNX Runtime does not know -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Frobnicate", ["r"], ["y"], domain="com.example", name="frob")]
    g = helper.make_graph(nodes, "custom", [vi("x", 4, 4)], [vi("y", 4, 4)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.example", 1)])
    m.ir_version = 8
    from roofcast.graph_import import import_model

    return import_model(m.SerializeToString(), name="custom")


def decomposed_layernorm(m: int = 16, n: int = 64, affine: bool = True) -> Graph:
    """x[m,n] -Relu-> the layer norm as exported before opset 17 (ReduceMean, Sub, Pow,
    ReduceMean, Add eps, Sqrt, Div[, Mul gamma, Add beta]) -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("ReduceMean", ["r"], ["mu"], axes=[-1], name="mean"),
             helper.make_node("Sub", ["r", "mu"], ["d"], name="sub"),
             helper.make_node("Pow", ["d", "two"], ["d2"], name="pow"),
             helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1], name="var"),
             helper.make_node("Add", ["var", "eps"], ["ve"], name="eps"),
             helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
             helper.make_node("Div", ["d", "sd"], ["z" if affine else "y"], name="div")]
    inits = [const("two", 2.0), const("eps", 1e-5)]
    if affine:
        nodes += [helper.make_node("Mul", ["z", "g"], ["zg"], name="gamma"),
                  helper.make_node("Add", ["zg", "b"], ["y"], name="beta")]
        inits += [const("g", np.full(n, 1.5)), const("b", np.full(n, 0.25))]
    return build(nodes, [vi("x", m, n)], [vi("y", m, n)], inits, opset=13)


def big_constant(n: int = 1024) -> Graph:
    """y = x + ConstantOfShape([n, n]): ONNX Runtime computes the n x n constant at load."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill",
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    return build(nodes, [vi("x", n, n)], [vi("y", n, n)], [const("shape", [n, n], np.int64)])


def se_block(c: int = 16, hw: int = 8) -> Graph:
    """x -Conv-> -Relu-> h; gate = Sigmoid(Conv(GlobalAveragePool(h))); h * gate (a broadcast
    multiply) -Conv-> y: a squeeze-and-excitation block."""
    nodes = [helper.make_node("Conv", ["x", "W1"], ["h0"], name="conv1"),
             helper.make_node("Relu", ["h0"], ["h"], name="relu"),
             helper.make_node("GlobalAveragePool", ["h"], ["s"], name="gap"),
             helper.make_node("Conv", ["s", "W2"], ["s2"], name="squeeze"),
             helper.make_node("Sigmoid", ["s2"], ["gate"], name="sig"),
             helper.make_node("Mul", ["h", "gate"], ["m"], name="excite"),
             helper.make_node("Conv", ["m", "W3"], ["y"], name="conv2")]
    inits = [const(w, np.full((c, c, 1, 1), 0.1)) for w in ("W1", "W2", "W3")]
    return build(nodes, [vi("x", 1, c, hw, hw)], [vi("y", 1, c, hw, hw)], inits)
