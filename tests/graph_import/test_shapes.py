"""Dims binding, shape inference and folding of shape subgraphs."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.load import load_model
from roofcast.graph_import.shapes import infer_concrete
from tests.graph_import.import_helpers import (
    const,
    dynamic_reshape_model,
    external_weight,
    make_model,
    relu_model,
    serialize,
)

INT64_MAX = 2**63 - 1


def _shapes(model, dims=None):
    return infer_concrete(load_model(serialize(model)), dims)


def test_bind_by_name_folds_reshape_target():
    res = _shapes(dynamic_reshape_model(), {"batch": 2, "seq": 5})
    assert res.tensors["r"].dims == (2, 5, 32)
    assert res.tensors["y"].dims == (2 * 5, 4, 8)
    assert res.unbound == ()
    assert res.bound == {"batch": 2, "seq": 5}
    assert res.values["shp"].tolist() == [2 * 5, 4, 8]


def test_bind_by_input_axis():
    res = _shapes(dynamic_reshape_model(), {"x:0": 3, "x:1": 7})
    assert res.tensors["y"].dims == (3 * 7, 4, 8)
    assert res.bound == {"x:0": 3, "x:1": 7, "batch": 3, "seq": 7}


def test_negative_axis_binding():
    res = _shapes(relu_model(("n", "m")), {"x:-1": 6, "n": 2})
    assert res.tensors["y"].dims == (2, 6)


def test_unbound_dims_are_reported_not_raised():
    res = _shapes(dynamic_reshape_model(), {"batch": 2})
    assert res.unbound == ("seq",)
    assert res.tensors["r"].dims == (2, "seq", 32)
    assert not res.tensors["y"].is_concrete


def test_unnamed_dynamic_dim_reported_as_input_axis():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    res = _shapes(make_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]))
    assert res.unbound == ("x:0",)


def test_binding_an_absent_name_is_ignored():
    res = _shapes(relu_model(("batch", 4)), {"batch": 2, "sequence": 128})
    assert res.bound == {"batch": 2}
    assert res.tensors["y"].dims == (2, 4)


def test_input_axis_binding_errors():
    model = relu_model(("batch", 4))
    with pytest.raises(ModelImportError, match="the model has no input 'z'; its inputs are x"):
        _shapes(model, {"z:0": 2})
    with pytest.raises(ModelImportError, match=r"input 'x' has rank 2, so axis 5 does not exist"):
        _shapes(model, {"x:5": 2})
    with pytest.raises(ModelImportError, match="axis 1 of input 'x' is fixed at 4 by the model"):
        _shapes(model, {"x:1": 8})


def test_original_model_is_not_modified():
    model = load_model(serialize(dynamic_reshape_model()))
    before = model.SerializeToString()
    infer_concrete(model, {"batch": 2, "seq": 3})
    assert model.SerializeToString() == before


def test_range_and_constant_of_shape_chain():
    """seq = Shape(x)[1]; mask = ConstantOfShape([seq, seq]); pos = Range(0, seq, 1);
    Expand(pos, [batch, seq]) - the position-ids / causal-mask idiom of decoder exports."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("mask",)]
    outs.append(helper.make_tensor_value_info("pos_b", TensorProto.INT64, None))
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["seq", "ax0"], ["seq1"]),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        helper.make_node("Concat", ["seq1", "seq1"], ["ss"], axis=0),
        helper.make_node(
            "ConstantOfShape", ["ss"], ["mask"],
            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
        ),
        helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
        helper.make_node("Concat", ["b1", "seq1"], ["bs"], axis=0),
        helper.make_node("Expand", ["pos", "bs"], ["pos_b"]),
    ]
    inits = [const("zero", 0), const("one", 1), const("ax0", [0])]
    res = _shapes(make_model(nodes, [x], outs, inits), {"batch": 3, "seq": 6})
    assert res.tensors["mask"].dims == (6, 6)
    assert res.tensors["pos"].dims == (6,)
    assert res.tensors["pos_b"].dims == (3, 6)
    assert res.values["pos_b"].tolist() == [list(range(6))] * 3


def test_slice_with_int64_max_end_and_where():
    """Shape(x)[1:INT64_MAX] then Where(Equal(s, 1), 2, s), then Reshape to [-1, *that]."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "st", "en"], ["tail"]),
        helper.make_node("Equal", ["tail", "one"], ["is1"]),
        helper.make_node("Where", ["is1", "two", "tail"], ["tail2"]),
        helper.make_node("Concat", ["minus1", "tail2"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [
        const("st", [1]), const("en", [INT64_MAX]), const("one", [1]), const("two", [2]),
        const("minus1", [-1]),
    ]
    res = _shapes(make_model(nodes, [x], [y], inits), {"b": 4})
    assert res.values["tail"].tolist() == [1, 8]
    assert res.values["shape"].tolist() == [-1, 2, 8]
    assert res.tensors["y"].dims == (4 * 1 * 8 // (2 * 8), 2, 8)


def test_shape_with_start_end_of_partially_known_shape():
    """Shape(start=1) needs only the concrete dims, so it folds while 'batch' is unbound."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], start=1),
        helper.make_node("ReduceProd", ["s"], ["y"], keepdims=0),
    ]
    res = _shapes(make_model(nodes, [x], [y]))
    assert res.values["y"].tolist() == 3 * 8


def test_nodes_out_of_order_are_sorted():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Relu", ["a"], ["y"], name="second"),
        helper.make_node("Neg", ["x"], ["a"], name="first"),
    ]
    model = load_model(serialize(make_model(nodes, [x], [y])))
    assert [n.name for n in model.graph.node] == ["first", "second"]
    assert infer_concrete(model).tensors["y"].dims == (2, 3)


def test_big_folded_values_are_not_kept_but_shapes_are():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 512])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["big"]),
        helper.make_node("Add", ["big", "x"], ["y"]),
    ]
    res = _shapes(make_model(nodes, [x], [y]), {"n": 1024})
    assert "big" not in res.values
    assert res.tensors["big"].dims == (1024, 512)
    assert res.tensors["y"].dims == (1024, 512)


def test_weightless_initializer_shapes_come_from_dims():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [external_weight("w", [16, 64])]
    )
    res = _shapes(model, {"batch": 8})
    assert res.tensors["y"].dims == (8, 64)
    assert res.tensors["w"].dims == (16, 64)


def test_float_values_fold_through_cast():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["sf", "half"], ["h"]),
        helper.make_node("Cast", ["h"], ["hi"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["x", "hi"], ["y"]),
    ]
    res = _shapes(make_model(nodes, [x], [y], [const("half", [2.0, 0.5], np.float32)]), {"n": 3})
    assert res.values["hi"].tolist() == [6, 2]
    assert res.tensors["y"].dims == (6, 2)


def _two_inputs_sharing_sequence():
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    nodes = [helper.make_node("Mul", ["input_ids", "attention_mask"], ["y"])]
    return make_model(nodes, [ids, mask], [y])


def test_input_axis_binding_of_a_named_dim_binds_the_name_everywhere():
    res = _shapes(_two_inputs_sharing_sequence(), {"input_ids:1": 128, "batch": 2})
    assert res.tensors["attention_mask"].dims == (2, 128)
    assert res.tensors["y"].dims == (2, 128)
    assert res.unbound == ()
    assert res.bound == {"input_ids:1": 128, "batch": 2, "sequence": 128}


def test_input_axis_binding_contradicting_a_name_binding():
    with pytest.raises(
        ModelImportError, match=r"--dim input_ids:1=64 contradicts --dim sequence=128"
    ):
        _shapes(_two_inputs_sharing_sequence(), {"sequence": 128, "input_ids:1": 64})


def test_derived_input_axes_are_evaluated_from_bound_names():
    """Optimum-style decoder inputs: attention_mask spans 'past_sequence + sequence'."""
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    past = helper.make_tensor_value_info(
        "past", TensorProto.FLOAT, ["batch", 4, "past_sequence", 8]
    )
    mask = helper.make_tensor_value_info(
        "attention_mask", TensorProto.INT64, ["batch", "past_sequence + sequence"]
    )
    outs = [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in ("m", "i")]
    nodes = [
        helper.make_node("Neg", ["attention_mask"], ["m"]),
        helper.make_node("Neg", ["input_ids"], ["i"]),
    ]
    model = make_model(nodes, [ids, past, mask], outs)
    res = _shapes(model, {"batch": 2, "sequence": 1, "past_sequence": 127})
    assert res.tensors["m"].dims == (2, 127 + 1)
    assert res.unbound == ()
    partly = _shapes(model, {"batch": 2, "sequence": 1})
    assert partly.unbound == ("past_sequence",)


def test_dim_expressions_are_parsed_safely():
    from roofcast.graph_import.dims import dim_expr_names, eval_dim_expr

    assert eval_dim_expr("2*s0 + 1", {"s0": 5}) == 2 * 5 + 1
    assert eval_dim_expr("Min(4096, s1)", {"s1": 9000}) == 4096
    assert eval_dim_expr("s0 // 2", {"s0": 7}) == 7 // 2
    assert eval_dim_expr("s0 - 9", {"s0": 7}) is None  # negative: not a dim
    assert eval_dim_expr("s0", {}) is None
    assert dim_expr_names("__import__('os').system('x')") is None
    assert dim_expr_names("a.b") is None
    assert dim_expr_names("past + seq") == {"past", "seq"}
