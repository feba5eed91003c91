"""Fusion: which chains merge, the fused group's bytes, and fusion never predicting slower."""

from __future__ import annotations

import pytest

from roofcast.graph_import.types import Engine
from roofcast.predictor.config import RunConfig
from roofcast.predictor.memory.graph import memory_footprint
from roofcast.predictor.runtimes.rules_epilogue import fusion_groups
from roofcast.predictor.simulate import predict_graph
from roofcast.predictor.workload import kernel_plan, workload_table
from tests.predictor.graph_helpers import AS_WRITTEN, branched_graph, graph, op, t, toy_device


def linear_relu():
    """x[8,64] @ w[64,32] -> + b[32] -> Relu -> y[8,32] (float32)."""
    x, w, b = t("x", 8, 64), t("w", 64, 32), t("b", 32)
    y0, y1, y = t("y0", 8, 32), t("y1", 8, 32), t("y", 8, 32)
    nodes = [
        op("mm", "MatMul", [x, w], [y0], flops=2 * 8 * 64 * 32, engine=Engine.MATRIX,
           weights=["w"]),
        op("bias", "Add", [y0, b], [y1], flops=8 * 32, weights=["b"]),
        op("relu", "Relu", [y1], [y], flops=8 * 32),
    ]
    return graph(nodes, [x], [y])


def test_bias_and_activation_fuse_into_the_matmul_without_round_trips():
    g = linear_relu()
    assert fusion_groups(g) == {"mm": ["mm", "bias", "relu"]}
    w = workload_table(g, RunConfig(fusion=True), AS_WRITTEN)
    assert len(w) == 1
    row = w.iloc[0]
    assert row["fused_nodes"] == "mm+bias+relu"
    assert row["op_type"] == "MatMul+Add+Relu"
    assert row["engine"] == "matrix"
    assert row["flops"] == 2 * 8 * 64 * 32 + 8 * 32 + 8 * 32
    # external inputs x, w, b; external output y: intermediates y0, y1 never touch memory
    assert row["bytes_read"] == 4 * (8 * 64 + 64 * 32 + 32)
    assert row["bytes_written"] == 4 * (8 * 32)
    assert row["weight_bytes"] == 4 * (64 * 32 + 32)


def test_fused_bytes_scale_with_precision():
    w = workload_table(linear_relu(), RunConfig(fusion=True, precision="fp16"), AS_WRITTEN)
    assert w.iloc[0]["bytes_read"] == 2 * (8 * 64 + 64 * 32 + 32)
    assert w.iloc[0]["bytes_written"] == 2 * (8 * 32)


def test_two_producers_or_two_consumers_block_fusion():
    g = branched_graph(10)
    # a has two consumers (b, c); d (Add) has two producers; b and c are fusible into a only
    # if a's output had a single consumer -> nothing fuses
    assert fusion_groups(g) == {}
    assert len(workload_table(g, RunConfig(fusion=True), AS_WRITTEN)) == 4


def test_model_output_is_not_fused_away():
    x, y0, y1 = t("x", 10), t("y0", 10), t("y1", 10)
    g = graph([op("a", "Relu", [x], [y0], flops=10), op("b", "Neg", [y0], [y1], flops=10)],
              [x], [y0, y1])
    assert fusion_groups(g) == {}


def test_fusion_saves_launches_and_traffic_and_is_never_slower():
    g = linear_relu()
    hw = toy_device(matrix_flops=1e10, overhead_s=5e-6)
    # the graph as written, epilogue fusion on or off (a GPU's default runtime, pytorch-eager,
    # puts the bias in addmm either way)
    plain_cfg = RunConfig(runtime=AS_WRITTEN)
    fused_cfg = RunConfig(fusion=True, runtime=AS_WRITTEN)
    for est in ("roofline", "no-overlap", "time-roofline", "traffic"):
        plain = predict_graph(g, hw, plain_cfg, est)
        fused = predict_graph(g, hw, fused_cfg, est)
        assert fused.total_s <= plain.total_s * (1 + 1e-12), est
    # time-roofline: 3 kernels each floored at 5 µs -> 1 kernel
    plain = predict_graph(g, hw, plain_cfg, "time-roofline")
    fused = predict_graph(g, hw, fused_cfg, "time-roofline")
    assert len(fused.per_op) == 1
    assert fused.per_op["overhead_s"].sum() == pytest.approx(plain.per_op["overhead_s"].sum() / 3)


def test_fused_group_keeps_its_inputs_and_outputs_live_together():
    g = linear_relu()
    plain = memory_footprint(g, RunConfig())
    fused = memory_footprint(g, RunConfig(fusion=True),
                             kernel_plan(g, RunConfig(fusion=True), AS_WRITTEN))
    # unfused peak: x + y0 at the matmul (2048 + 1024 B), then y0 + y1, y1 + y;
    # fused: y0, y1 never exist, x and y are live together at the group's step
    assert plain.activations_bytes == 4 * (8 * 64 + 8 * 32)
    assert fused.activations_bytes == 4 * (8 * 64 + 8 * 32)
    assert fused.weights_bytes == plain.weights_bytes


def test_training_keeps_backward_unfused():
    w = workload_table(linear_relu(), RunConfig(fusion=True, mode="train"), AS_WRITTEN)
    assert (w["phase"] == "forward").sum() == 1
    assert set(w.loc[w["phase"] == "backward", "node"]) == {"mm", "bias", "relu"}


def _constant(name: str, out) -> object:
    """A Constant node folded at import (free, no runtime kernel)."""
    from dataclasses import replace

    from roofcast.graph_import.types import FREE_COST

    return replace(op(name, "Constant", [], [out], cost=FREE_COST), constant_folded=True)


def test_clip_bounds_from_constant_nodes_do_not_block_conv_clip_fusion():
    x, w, c0, lo, hi, y = (t("x", 1, 8, 4, 4), t("w", 8, 8, 1, 1), t("c0", 1, 8, 4, 4),
                           t("lo"), t("hi"), t("y", 1, 8, 4, 4))
    nodes = [op("conv", "Conv", [x, w], [c0], flops=2 * 8 * 8 * 16, engine=Engine.MATRIX,
                weights=["w"]),
             _constant("k_lo", lo), _constant("k_hi", hi),
             op("clip", "Clip", [c0, lo, hi], [y], flops=2 * 8 * 16)]
    assert fusion_groups(graph(nodes, [x], [y])) == {"conv": ["conv", "clip"]}


def residual_block(head: str):
    """h = relu1(conv1(x)); y = relu(add(head2(h), h)): a residual block whose second
    producer is a ``head`` node (Conv or MatMul)."""
    x, w1, w2 = t("x", 1, 8, 4, 4), t("w1", 8, 8, 1, 1), t("w2", 8, 8, 1, 1)
    c1, h, c2, s, y = (t(n, 1, 8, 4, 4) for n in ("c1", "h", "c2", "s", "y"))
    nodes = [op("conv1", "Conv", [x, w1], [c1], flops=2048, engine=Engine.MATRIX,
                weights=["w1"]),
             op("relu1", "Relu", [c1], [h], flops=128),
             op("head2", head, [h, w2], [c2], flops=2048, engine=Engine.MATRIX, weights=["w2"]),
             op("add", "Add", [c2, h], [s], flops=128),
             op("relu", "Relu", [s], [y], flops=128)]
    return graph(nodes, [x], [y])


def test_residual_add_fuses_into_a_conv_epilogue_and_reads_the_skip_tensor():
    g = residual_block("Conv")
    # relu1's output h has two consumers (head2, add): it stays the end of conv1's group
    assert fusion_groups(g) == {"conv1": ["conv1", "relu1"], "head2": ["head2", "add", "relu"]}
    w = workload_table(g, RunConfig(fusion=True), AS_WRITTEN).set_index("node")
    tensor = 4 * 8 * 16
    # reads h (conv input), w2, h again (the skip input); c2 and s never touch memory
    assert w.loc["head2", "bytes_read"] == tensor + 4 * 64 + tensor
    assert w.loc["head2", "bytes_written"] == tensor
    assert w.loc["head2", "op_type"] == "Conv+Add+Relu"


def test_residual_add_after_a_matmul_is_not_fused():
    # the Add heads its own group with the Relu after it; the MatMul stays alone
    assert fusion_groups(residual_block("MatMul")) == {"conv1": ["conv1", "relu1"],
                                                       "add": ["add", "relu"]}


def test_measured_fused_rows_count_traffic_like_predicted_ones():
    """The collector's row of an ORT-fused group and the predictor's fused row agree on bytes."""
    from roofcast.training_data.collectors.rows import group_work

    g = linear_relu()
    nodes = [g.nx_graph.nodes[n]["op"] for n in ("mm", "bias", "relu")]
    measured = group_work(nodes, g)
    predicted = workload_table(g, RunConfig(fusion=True), AS_WRITTEN).iloc[0]
    assert measured["bytes_read"] == predicted["bytes_read"] == 4 * (8 * 64 + 64 * 32 + 32)
    assert measured["bytes_written"] == predicted["bytes_written"] == 4 * 8 * 32
    # without the graph: the members' unfused sums (y0 and y1 each written once, read once)
    unfused = group_work(nodes)
    assert unfused["bytes_written"] == 3 * 4 * 8 * 32


def test_a_tensor_also_read_outside_the_group_is_still_written():
    from roofcast.graph_import.fused_traffic import internal_traffic

    g = branched_graph(10)  # a feeds b and c; d = Add(b, c)
    read_saved, write_saved = internal_traffic(g, ["a", "b"])
    assert read_saved == 4 * 10  # b's read of a's output
    assert write_saved == 0.0  # c, outside, still reads it


def test_views_inside_a_group_pass_their_tensor_through():
    """ORT's MatMul+Add+Reshape+Unsqueeze (vit's packed QKV): the Add output leaves the kernel
    through two views, so it is still written once; the views themselves save nothing."""
    from roofcast.graph_import.fused_traffic import internal_traffic
    from roofcast.graph_import.types import OpCost

    free = OpCost(0.0, 0.0, 0.0, 0.0, Engine.FREE)
    x, w, b = t("x", 8, 64), t("w", 64, 32), t("b", 32)
    y0, y1, y2, y3, y = (
        t("y0", 8, 32),
        t("y1", 8, 32),
        t("y2", 256),
        t("y3", 1, 256),
        t("y", 1, 256),
    )
    nodes = [
        op("mm", "MatMul", [x, w], [y0], flops=2 * 8 * 64 * 32, engine=Engine.MATRIX,
           weights=["w"]),
        op("bias", "Add", [y0, b], [y1], flops=8 * 32, weights=["b"]),
        op("flat", "Reshape", [y1], [y2], cost=free),
        op("unsq", "Unsqueeze", [y2], [y3], cost=free),
        op("relu", "Relu", [y3], [y]),
    ]
    g = graph(nodes, [x], [y])
    read_saved, write_saved = internal_traffic(g, ["mm", "bias", "flat", "unsq"])
    assert read_saved == 4 * 8 * 32  # only the Add's read of the MatMul output
    assert write_saved == 4 * 8 * 32  # the MatMul output; the Add output is still written
    # with the reader inside too, the whole chain stays in the kernel
    read_all, write_all = internal_traffic(g, ["mm", "bias", "flat", "unsq", "relu"])
    assert read_all == 2 * 4 * 8 * 32
    assert write_all == 2 * 4 * 8 * 32


def silu_after(head: str):
    """y = c * sigmoid(c), c = head(x): the SiLU/Swish diamond of efficientnet (and, after a
    MatMul, of llama's MLP)."""
    x, w = t("x", 1, 8, 4, 4), t("w", 8, 8, 1, 1)
    c, s, y = (t(n, 1, 8, 4, 4) for n in ("c", "s", "y"))
    nodes = [op("head", head, [x, w], [c], flops=2048, engine=Engine.MATRIX, weights=["w"]),
             op("sig", "Sigmoid", [c], [s], flops=128),
             op("mul", "Mul", [c, s], [y], flops=128)]
    return graph(nodes, [x], [y])


def test_silu_diamond_fuses_into_a_conv_epilogue():
    g = silu_after("Conv")
    assert fusion_groups(g) == {"head": ["head", "sig", "mul"]}
    row = workload_table(g, RunConfig(fusion=True), AS_WRITTEN).iloc[0]
    tensor = 4 * 8 * 16
    # reads x and w; c and s never touch memory; y written once
    assert row["bytes_read"] == tensor + 4 * 64
    assert row["bytes_written"] == tensor


def test_silu_diamond_after_a_matmul_is_not_fused():
    # as the residual Add: a MatMul's epilogue takes no second computed tensor (and the Mul,
    # with two computing producers, heads no group of its own)
    assert fusion_groups(silu_after("MatMul")) == {}
