"""Graph building: node naming, tensor infos, attrs, weights, constants, edges, costs."""

from __future__ import annotations

import io

import numpy as np
import pytest
from onnx import TensorProto, helper

from roofcast.graph_import import ModelImportError, import_model
from roofcast.graph_import.build import build_graph
from roofcast.graph_import.load import load_model
from roofcast.graph_import.shapes import infer_concrete
from roofcast.graph_import.types import FREE_COST, Engine, OpCost
from tests.graph_import.import_helpers import (
    const,
    dynamic_reshape_model,
    external_weight,
    make_model,
    serialize,
)

UNIT = OpCost(1.0, 1.0, 1.0, 0.0, Engine.VECTOR)


def _build(model, dims=None, cost_fn=lambda node: UNIT, **kw):
    loaded = load_model(serialize(model))
    return build_graph(loaded, infer_concrete(loaded, dims), cost_fn=cost_fn, **kw)


def _ops(graph):
    return {op.name: op for op in graph.ops()}


def _xy(shape=(2, 4)):
    return (
        helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
        helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
    )


def test_empty_and_duplicate_node_names_are_made_unique():
    x, y = _xy()
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Neg", ["a"], ["b"], name="n"),
        helper.make_node("Abs", ["b"], ["y"], name="n"),
    ]
    assert sorted(_ops(_build(make_model(nodes, [x], [y])))) == ["Relu_0", "n", "n_2"]


def test_omitted_optional_input_is_none_and_attrs_are_plain():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node(
            "Resize", ["x", "", "scales"], ["y"], name="up", mode="nearest",
            coordinate_transformation_mode="asymmetric",
        ),
    ]
    model = make_model(nodes, [x], [y], [const("scales", [1, 1, 2, 2], np.float32)])
    op = _ops(_build(model))["up"]
    assert op.inputs[1] is None
    assert op.input(1) is None
    assert op.input(7) is None
    assert op.inputs[0].shape == (1, 3, 8, 8)
    assert op.outputs[0].shape == (1, 3, 16, 16)
    assert op.attrs["mode"] == "nearest"  # bytes decoded to str
    assert op.const_inputs["scales"].tolist() == [1, 1, 2, 2]


def test_tensor_attribute_becomes_numpy():
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    value = helper.make_tensor("v", TensorProto.FLOAT, [2], [1.5, 2.5])
    nodes = [helper.make_node("Constant", [], ["y"], name="c", value=value)]
    op = _ops(_build(make_model(nodes, [], [y])))["c"]
    assert isinstance(op.attrs["value"], np.ndarray)
    assert op.attrs["value"].tolist() == [1.5, 2.5]
    assert op.outputs[0].shape == (2,)


def test_weight_inputs_const_inputs_and_params_rule():
    """params = float initializers and int8 ones a quantised op reads (tied weights once);
    int64 shape helpers and a uint8 mask buffer are excluded."""
    x, y = _xy((2, 16))
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a"], name="mm1"),
        helper.make_node("MatMul", ["a", "w2"], ["b"], name="mm2"),
        helper.make_node("MatMul", ["b", "w2"], ["c"], name="mm3"),  # w2 tied: counted once
        helper.make_node("Add", ["c", "bias"], ["d"], name="add"),
        helper.make_node("DequantizeLinear", ["q", "qs"], ["dq"], name="dq"),
        helper.make_node("Add", ["d", "dq"], ["e0"], name="add2"),
        helper.make_node("Cast", ["mask"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["e0", "mf"], ["e"], name="masked"),
        helper.make_node("Reshape", ["e", "shape"], ["y"], name="reshape"),
    ]
    inits = [
        external_weight("w", [16, 64]),
        external_weight("w2", [64, 64]),
        const("bias", np.zeros(64), np.float32),
        const("q", np.zeros(64), np.int8),
        const("qs", 0.5, np.float32),
        const("shape", [2, 8, 8]),
        const("mask", np.ones(64), np.uint8),
    ]
    graph = _build(make_model(nodes, [x], [y], inits))
    assert graph.params == 16 * 64 + 64 * 64 + 64 + 64 + 1
    assert graph.weight_bytes == 4 * (16 * 64 + 64 * 64 + 64) + 1 * 64 + 4 * 1
    ops = _ops(graph)
    assert ops["mm1"].weight_inputs == frozenset({"w"})
    assert ops["mm1"].const_inputs == {}  # external data is never read
    assert ops["add"].const_inputs["bias"].shape == (64,)
    assert ops["reshape"].const_inputs["shape"].tolist() == [2, 8, 8]
    assert ops["reshape"].weight_inputs == frozenset({"shape"})
    assert ops["reshape"].outputs[0].shape == (2, 8, 8)


def test_large_inline_initializer_not_in_const_inputs():
    x, y = _xy((2, 5000))
    nodes = [helper.make_node("Add", ["x", "big"], ["y"], name="add")]
    model = make_model(nodes, [x], [y], [const("big", np.ones(5000), np.float32)])
    op = _ops(_build(model))["add"]
    assert op.const_inputs == {}
    assert op.weight_inputs == frozenset({"big"})


def test_folded_values_reach_const_inputs():
    graph = _build(dynamic_reshape_model(), {"batch": 2, "seq": 3})
    op = _ops(graph)["reshape"]
    assert op.const_inputs["shp"].tolist() == [2 * 3, 4, 8]


def test_edges_follow_tensors():
    x, y = _xy()
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="p"),
        helper.make_node("Neg", ["x"], ["b"], name="q"),
        helper.make_node("Split", ["a"], ["a1", "a2"], name="s", axis=1, num_outputs=2),
        helper.make_node("Concat", ["a1", "a2", "b"], ["y"], name="c", axis=1),
    ]
    model = make_model(nodes, [x], [y], opset=18)
    g = _build(model).nx_graph
    assert sorted(g.edges) == [("p", "s"), ("q", "c"), ("s", "c")]
    assert [t.name for t in g.edges["s", "c"]["tensors"]] == ["a1", "a2"]
    assert g.edges["s", "c"]["tensor"].shape == (2, 2)
    assert g.edges["q", "c"]["tensor"].name == "b"


def test_unknown_op_is_unsupported_not_free():
    x, y = _xy()
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Neg", ["a"], ["y"], name="neg"),
    ]
    graph = _build(
        make_model(nodes, [x], [y]), cost_fn=lambda n: None if n.op_type == "Neg" else UNIT
    )
    assert graph.unsupported == {"Neg": 1}
    assert _ops(graph)["neg"].cost is None
    assert graph.unresolved == {}


def test_failing_rule_lands_in_unresolved_with_its_message():
    x, y = _xy()
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]

    def broken(node):
        raise ZeroDivisionError("division by zero in the rule")

    graph = _build(make_model(nodes, [x], [y]), cost_fn=broken)
    assert graph.unresolved == {
        "r": "cost rule failed: ZeroDivisionError: division by zero in the rule"
    }
    assert _ops(graph)["r"].cost is None


def test_unbound_dims_listed_and_nodes_unresolved_with_hint():
    graph = _build(dynamic_reshape_model(), {"batch": 2})
    assert graph.unbound_dims == ("seq",)
    assert graph.dims == {"batch": 2}
    assert graph.unresolved["mm"] == (
        "input 'x' dim 1 is the unbound symbolic dim 'seq': bind it, e.g. --dim seq=1"
    )
    assert graph.unresolved["reshape"].endswith("--dim seq=1")
    assert _ops(graph)["mm"].outputs[0].shape == (2, "seq", 32)


def test_non_concrete_dim_downstream_of_unbound_dim_gets_hint():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Neg", ["nz"], ["y"], name="neg"),
    ]
    graph = _build(make_model(nodes, [x], [y]))
    assert (
        "likely because the model's dims n are unbound: bind them (--dim n=1)"
        in graph.unresolved["neg"]
    )
    bound = _build(make_model(nodes, [x], [y]), {"n": 3})
    assert "it depends on data values (e.g. NonZero)" in bound.unresolved["NonZero_0"]
    assert (
        bound.unresolved["neg"]
        == "an input comes from the unresolved node 'NonZero_0' (see its reason)"
    )


def test_custom_domain_op_without_shapes_is_unresolved_and_unsupported():
    x, y = _xy()
    nodes = [helper.make_node("Mystery", ["x"], ["y"], name="m", domain="com.example")]
    model = make_model(nodes, [x], [y])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    graph = _build(model, has_rule=lambda d, o: False)
    assert graph.unsupported == {"com.example::Mystery": 1}
    assert graph.unresolved["m"].startswith("output 'y' has")


def test_inputs_exclude_initializers_listed_as_inputs():
    """IR 3 models list initializers among graph inputs; Graph.inputs are the real inputs."""
    x, y = _xy((2, 4))
    w_in = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 4])
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [x, w_in], [y],
                       [const("w", np.eye(4), np.float32)], ir_version=3, opset=9)
    graph = _build(model)
    assert [t.name for t in graph.inputs] == ["x"]
    assert graph.outputs[0].shape == (2, 4)
    assert graph.opset == 9


def test_if_subgraph_does_not_crash():
    x, y = _xy()
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 4])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 4])],
    )
    nodes = [
        helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)
    ]
    model = make_model(nodes, [x], [y], [const("cond", True, np.bool_)])
    graph = _build(model, cost_fn=lambda n: None if n.op_type == "If" else UNIT)
    assert graph.unsupported == {"If": 1}
    assert len(graph) == 1


# --- end to end through import_model (real cost rules) ------------------------------------------


def test_import_model_from_bytes_path_and_file_object(tmp_path):
    data = serialize(dynamic_reshape_model())
    path = tmp_path / "tiny.onnx"
    path.write_bytes(data)
    dims = {"batch": 2, "seq": 3}
    for source in (data, path, str(path), io.BytesIO(data)):
        graph = import_model(source, dims=dims)
        assert graph.unresolved == {}
        assert graph.unsupported == {}
        mm = _ops(graph)["mm"]
        assert mm.cost.flops == 2 * (2 * 3) * 16 * 32
        assert _ops(graph)["reshape"].cost == FREE_COST
    assert import_model(path, dims=dims).name == "tiny"
    assert import_model(data, dims=dims, name="mine").name == "mine"


def test_import_model_bad_input_raises_model_import_error():
    with pytest.raises(ModelImportError, match="empty"):
        import_model(b"")
    with pytest.raises(ModelImportError, match="out of range"):
        import_model(serialize(dynamic_reshape_model()), dims={"batch": 0})


def test_local_functions_are_inlined():
    """A call to a model-local function becomes the function's operators."""
    fn = helper.make_function(
        "custom.fn", "ScaledRelu", ["a", "s"], ["b"],
        [helper.make_node("Mul", ["a", "s"], ["m"]), helper.make_node("Relu", ["m"], ["b"])],
        opset_imports=[helper.make_opsetid("", 17)],
    )
    x, y = _xy((2, 4))
    nodes = [helper.make_node("ScaledRelu", ["x", "s"], ["y"], domain="custom.fn")]
    model = make_model(nodes, [x], [y], [const("s", 2.0, np.float32)])
    model.opset_import.append(helper.make_opsetid("custom.fn", 1))
    model.functions.append(fn)
    graph = import_model(serialize(model))
    assert sorted(op.op_type for op in graph.ops()) == ["Mul", "Relu"]
    assert graph.unsupported == {}
    assert graph.unresolved == {}
    assert graph.outputs[0].shape == (2, 4)


def test_dims_beyond_what_the_model_supports_are_explained():
    """A [1, 8] position table expanded to [batch, sequence]: sequence=16 cannot work."""
    x = helper.make_tensor_value_info("x", TensorProto.INT64, ["batch", "sequence"])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Expand", ["table", "s"], ["pos"], name="expand"),
        helper.make_node("Add", ["pos", "x"], ["y"], name="add"),
    ]
    model = make_model(nodes, [x], [y], [const("table", np.arange(8).reshape(1, 8))])
    assert _build(model, {"batch": 2, "sequence": 8}).unresolved == {}
    graph = _build(model, {"batch": 2, "sequence": 16})
    assert (
        "ONNX shape inference rejects this node with the bound dims" in graph.unresolved["expand"]
    )
    assert "Incompatible dimensions" in graph.unresolved["expand"]
    assert (
        graph.unresolved["add"]
        == "an input comes from the unresolved node 'expand' (see its reason)"
    )


def test_known_gather_indices_beyond_the_table_are_flagged():
    """positions = Range(0, sequence); Gather(table[8, 4], positions): sequence 10 cannot run."""
    x = helper.make_tensor_value_info("x", TensorProto.INT64, ["batch", "sequence"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
        helper.make_node("Gather", ["table", "pos"], ["y"], name="lookup", axis=0),
    ]
    inits = [external_weight("table", [8, 4]), const("zero", 0), const("one", 1)]
    model = make_model(nodes, [x], [y], inits)
    assert _build(model, {"batch": 1, "sequence": 8}).unresolved == {}
    graph = _build(model, {"batch": 1, "sequence": 10})
    assert graph.unresolved["lookup"].startswith(
        "input 'pos' indexes rows 0..9 of 'table', which has 8 along that axis"
    )
