"""Fused-node mapping: ORT's optimised graph back to the original nodes (no timing involved)."""

from __future__ import annotations

from onnx import TensorProto, helper

from roofcast.training_data.collectors.node_mapping import map_optimized

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, None)
                                           for n in inputs],
                              [helper.make_tensor_value_info(n, F, None) for n in outputs],
                              initializer=list(inits))
    return helper.make_model(graph)


def _w(name):
    return helper.make_tensor(name, F, [1], [1.0])


def test_residual_block_in_nchwc_maps_conv_add_relu_and_reorders_to_one_group():
    # original: X -> conv -> c -> relu -> r -> add(r, S) -> a -> relu2 -> Y ; X -> conv_s -> S
    original = _model([
        helper.make_node("Conv", ["X", "W"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Conv", ["X", "Ws"], ["S"], name="conv_s"),
        helper.make_node("Add", ["r", "S"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["Y"], name="relu2"),
    ], ["X"], ["Y"], [_w("W"), _w("Ws")])
    # ORT level all: NCHWc convs named <original output>_nchwc, the Sum input fused, reorders
    optimized = _model([
        helper.make_node("ReorderInput", ["X"], ["x_n"], name="ReorderInput"),
        helper.make_node("Conv", ["x_n", "Ws"], ["t1"], name="S_nchwc"),
        helper.make_node("Conv", ["x_n", "W", "", "t1"], ["t2"], name="r_nchwc",
                         activation="Relu"),
        helper.make_node("ReorderOutput", ["t2"], ["Y"], name="ReorderOutput"),
    ], ["X"], ["Y"], [_w("W"), _w("Ws")])
    m = map_optimized(original, optimized)
    by_kernel = {k: m.groups[g].nodes for k, g in m.group_of.items()}
    assert by_kernel["S_nchwc"] == ("conv_s",)
    assert by_kernel["r_nchwc"] == ("conv", "relu", "add", "relu2")
    assert by_kernel["ReorderOutput"] == by_kernel["r_nchwc"]
    assert by_kernel["ReorderInput"] in {("conv_s",), ("conv", "relu", "add", "relu2")}
    assert m.uncovered == []
    assert m.unattributed == []
    assert m.groups[m.group_of["r_nchwc"]].name == "conv+relu+add+relu2"


def test_fusion_by_output_name_and_folded_constants():
    # MatMul + Add -> Gemm keeps the Add's output name; the shape branch is constant-folded
    original = _model([
        helper.make_node("MatMul", ["A", "W"], ["m"], name="mm"),
        helper.make_node("Add", ["m", "b"], ["y"], name="bias"),
        helper.make_node("Shape", ["y"], ["s"], name="shape"),
        helper.make_node("Reshape", ["y", "s"], ["Y"], name="reshape"),
    ], ["A"], ["Y"], [_w("W"), _w("b")])
    optimized = _model([
        helper.make_node("Gemm", ["A", "W", "b"], ["y"], name="fused_gemm"),
        helper.make_node("Reshape", ["y", "s_folded"], ["Y"], name="reshape"),
    ], ["A"], ["Y"], [_w("W"), _w("b"), _w("s_folded")])
    m = map_optimized(original, optimized)
    assert m.groups[m.group_of["fused_gemm"]].nodes == ("mm", "bias")
    assert m.groups[m.group_of["reshape"]].nodes == ("reshape",)
    assert m.uncovered == ["shape"]  # folded at load time: no kernel ran for it


def test_kernel_with_no_counterpart_is_unattributed():
    original = _model([helper.make_node("Relu", ["X"], ["Y"], name="relu")], ["X"], ["Y"])
    optimized = _model([
        helper.make_node("Relu", ["X"], ["Y"], name="relu"),
        helper.make_node("Mystery", ["", ""], ["q"], name="mystery"),
    ], ["X"], ["Y", "q"])
    m = map_optimized(original, optimized)
    assert m.unattributed == ["mystery"]
    assert m.groups[m.group_of["relu"]].nodes == ("relu",)


def test_kernels_joined_by_new_tensors_form_one_group():
    # MatMul+Add on 3-D input: ORT runs Reshape -> Gemm -> Reshape; only the last writes an
    # original tensor. All three kernels belong to the MatMul+Add group, not to the producer.
    original = _model([
        helper.make_node("LayerNormalization", ["X", "g"], ["x"], name="ln"),
        helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
        helper.make_node("Add", ["m", "b"], ["y"], name="bias"),
    ], ["X"], ["y"], [_w("g"), _w("W"), _w("b")])
    optimized = _model([
        helper.make_node("LayerNormalization", ["X", "g"], ["x"], name="ln"),
        helper.make_node("Reshape", ["x", "s_in"], ["r1"], name="gemm_input_reshape"),
        helper.make_node("Gemm", ["r1", "W", "b"], ["g1"], name="mm/MatMulAddFusion"),
        helper.make_node("Reshape", ["g1", "s_out"], ["y"], name="gemm_output_reshape"),
    ], ["X"], ["y"], [_w("g"), _w("W"), _w("b"), _w("s_in"), _w("s_out")])
    m = map_optimized(original, optimized)
    gemm_group = m.groups[m.group_of["mm/MatMulAddFusion"]]
    assert gemm_group.nodes == ("mm", "bias")
    assert set(gemm_group.kernels) == {"gemm_input_reshape", "mm/MatMulAddFusion",
                                       "gemm_output_reshape"}
    assert m.groups[m.group_of["ln"]].nodes == ("ln",)
