"""``GraphParallelSource``: one device's sharded work for any ONNX graph."""

from __future__ import annotations

import time

import numpy as np
import pytest

import roofcast
from roofcast.predictor.config import RunConfig
from roofcast.predictor.parallel.graph_source import GraphParallelSource
from roofcast.predictor.parallel.types import ModelFacts, ParallelPlanError
from tests.predictor.parallel.graph_builders import attention_blocks, mlp_pair


def _source(graph_at, precision="fp32", name="toy"):
    return GraphParallelSource(graph_at, RunConfig(precision=precision), name=name)


def test_mlp_pair_tp2_one_forward_all_reduce_and_half_the_gemms():
    src = _source(mlp_pair)
    assert callable(src.build)
    assert isinstance(src.facts, ModelFacts)
    one = src.build(tp=1, micro_batch=8, sequence_parallel=False, mode="train")
    two = src.build(tp=2, micro_batch=8, sequence_parallel=False, mode="train")
    assert one.comms == ()
    fwd = [c for c in two.comms if c.phase == "forward"]
    assert len(fwd) == 1
    assert fwd[0].collective == "all_reduce"
    assert fwd[0].group == "tp"
    assert fwd[0].size_bytes == 8 * 16 * 4
    assert fwd[0].count == 1
    assert not [c for c in two.comms if c.phase == "backward"]  # x needs no gradient
    r1 = one.rows.set_index("key")
    r2 = two.rows.set_index("key")
    for key in ("forward:forward:up", "forward:forward:down", "backward:grad_weight1:up",
                "backward:grad_input0:down", "backward:grad_weight1:down"):
        assert r2.loc[key, "flops"] == pytest.approx(r1.loc[key, "flops"] / 2)
    assert r2.loc["forward:forward:up", "gemm_n"] == 32  # column-parallel: N = 64 / 2
    assert r2.loc["forward:forward:down", "gemm_k"] == 32  # row-parallel: K = 64 / 2
    assert r2.loc["backward:grad_input0:down", "gemm_n"] == 32  # dX = dY·Wᵀ contracts N
    assert r2.loc["forward:forward:up", "weight_bytes"] == 16 * 64 * 4 / 2
    assert two.param_elems.sum() == pytest.approx(one.param_elems.sum() / 2)
    assert r2.loc["update:adam:w1", "flops"] == pytest.approx(r1.loc["update:adam:w1", "flops"] / 2)
    assert {"count", "layer"} <= set(two.rows.columns)


def test_attention_blocks_slots_heads_and_comms():
    src = _source(attention_blocks)
    assert src.facts.heads == 12
    assert src.facts.layers == 2
    assert src.facts.hidden == 96
    w = src.build(tp=4, micro_batch=2, sequence_parallel=False, mode="train")
    assert w.layers == 2
    assert len(w.param_elems) == 4
    rows = w.rows.set_index("key")
    assert rows.loc["forward:forward:b0_q", "layer"] == 1
    assert rows.loc["forward:forward:b1_down", "layer"] == 2
    fwd = sorted((c.layer, c.count) for c in w.comms if c.phase == "forward")
    assert fwd == [(1, 2.0), (2, 2.0)]  # two all-reduces per block
    bwd = sum(c.count for c in w.comms if c.phase == "backward")
    assert bwd == 4
    one = src.build(tp=1, micro_batch=2, sequence_parallel=False, mode="train")
    # block weights are all split (6 GEMMs; LayerNorm parameters and the float scale
    # constant, trainable as predictor.training counts them, stay replicated)
    d = 96
    block = 4 * d * d + 2 * d * 4 * d
    assert w.param_elems[1] == pytest.approx(block / 4 + 4 * d + 1)
    assert one.param_elems[1] == pytest.approx(block + 4 * d + 1)
    assert (w.activation_bytes < one.activation_bytes)[1:3].all()
    assert w.boundary_bytes == one.boundary_bytes == 2 * 4 * d * 4  # replicated between blocks


def test_tp_that_does_not_divide_the_heads_is_refused_with_the_reason():
    src = _source(attention_blocks, name="tiny-attention")
    with pytest.raises(ParallelPlanError, match=r"tp=5 does not divide the 12 attention heads of "
                                                r"tiny-attention; use 1, 2, 3, 4, 6 or 12"):
        src.build(tp=5, micro_batch=2, sequence_parallel=False, mode="train")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"ep": 2}, "needs a mixture-of-experts model"),
    ({"mode": "serve"}, "mode must be one of"),
    ({"tp": 0}, "tp must be a positive integer"),
    ({"micro_batch": 1.5}, "micro_batch must be a positive integer"),
])
def test_bad_degrees_are_refused(kwargs, match):
    args = {"tp": 2, "micro_batch": 2, "sequence_parallel": False, "mode": "train", **kwargs}
    with pytest.raises(ParallelPlanError, match=match):
        _source(mlp_pair).build(**args)


def test_infer_has_forward_rows_and_forward_comms_only():
    w = _source(attention_blocks).build(tp=2, micro_batch=2, sequence_parallel=False,
                                        mode="infer")
    assert set(w.rows["phase"]) == {"forward"}
    assert {c.phase for c in w.comms} == {"forward"}


def test_sequence_parallel_splits_the_boundary_and_norms():
    src = _source(attention_blocks)
    plain = src.build(tp=2, micro_batch=2, sequence_parallel=False, mode="train")
    sp = src.build(tp=2, micro_batch=2, sequence_parallel=True, mode="train")
    assert sp.checkpoint_bytes[2] == plain.checkpoint_bytes[2] / 2  # block 1 -> block 2
    ln = "forward:forward:b0_ln1"
    assert sp.rows.set_index("key").loc[ln, "flops"] == pytest.approx(
        plain.rows.set_index("key").loc[ln, "flops"] / 2)
    assert {c.collective for c in sp.comms} == {"reduce_scatter", "all_gather", "all_reduce"}


def test_build_is_cached_per_tp_and_micro_batch():
    calls = []

    def graph_at(batch):
        calls.append(batch)
        return mlp_pair(batch)

    src = _source(graph_at)
    a = src.build(tp=2, micro_batch=4, sequence_parallel=False, mode="train")
    assert src.build(tp=2, micro_batch=4, sequence_parallel=False, mode="train") is a
    src.build(tp=1, micro_batch=4, sequence_parallel=False, mode="train")
    assert calls.count(4) == 1


def test_bert_base_zoo():
    model = roofcast.load_model("bert_base", sequence=128)
    src = GraphParallelSource(model.graph_at, RunConfig(precision="bf16"), name="bert_base")
    assert (src.facts.layers, src.facts.heads, src.facts.hidden, src.facts.seq_tokens) == (
        12, 12, 768, 128)
    with pytest.raises(
        ParallelPlanError, match="tp=5 does not divide the 12 attention heads of bert_base"
    ):
        src.build(tp=5, micro_batch=2, sequence_parallel=False, mode="train")
    start = time.perf_counter()
    one = src.build(tp=1, micro_batch=2, sequence_parallel=False, mode="train")
    two = src.build(tp=2, micro_batch=2, sequence_parallel=False, mode="train")
    four = src.build(tp=4, micro_batch=2, sequence_parallel=True, mode="train")
    assert time.perf_counter() - start < 20
    per_block = [c for c in two.comms if c.layer == 5]
    assert sorted((c.collective, c.phase, c.count) for c in per_block) == [
        ("all_reduce", "backward", 2.0), ("all_reduce", "forward", 2.0)]
    assert per_block[0].size_bytes == 2 * 128 * 768 * 2  # [2, 128, 768] bf16
    gemm = one.rows["family"] == "matmul"
    ratio = two.rows.loc[gemm, "flops"].sum() / one.rows.loc[gemm, "flops"].sum()
    assert ratio == pytest.approx(0.5, abs=0.01)  # every GEMM but the tiny pooler split
    assert four.boundary_bytes == one.boundary_bytes / 4
    assert np.all(four.param_elems[1:13] < one.param_elems[1:13] / 3.5)


def test_resnet50_zoo_has_residual_blocks():
    model = roofcast.load_model("resnet50")
    src = GraphParallelSource(model.graph_at, RunConfig(precision="bf16"), name="resnet50")
    assert src.facts.layers == 16
    assert src.facts.heads is None
    w = src.build(tp=2, micro_batch=4, sequence_parallel=False, mode="train")
    assert w.layers == 16
    assert w.param_elems.sum() < 0.55 * src.build(
        tp=1, micro_batch=4, sequence_parallel=False, mode="train").param_elems.sum()
    assert all(c.group == "tp" for c in w.comms)


def test_bert_base_end_to_end_dp_tp_on_one_hgx_node():
    from roofcast.predictor.parallel.engine import predict_parallel
    from roofcast.predictor.parallel.types import ParallelPlan

    model = roofcast.load_model("bert_base", sequence=128)
    src = GraphParallelSource(model.graph_at, RunConfig(precision="bf16"), name="bert_base")
    dp8 = predict_parallel(src, "hgx-h100:nodes=1", ParallelPlan(dp=8), global_batch=64)
    tp2 = predict_parallel(src, "hgx-h100:nodes=1", ParallelPlan(dp=4, tp=2), global_batch=64)
    # 8 samples on one device vs 16 samples split over two tensor ranks: the same compute
    assert tp2.compute_s == pytest.approx(dp8.compute_s, rel=0.05)
    assert tp2.comm_s_by_group["tp"] > 0
    assert dp8.comm_s_by_group.get("tp", 0.0) == 0
    assert tp2.memory.weights_bytes < 0.6 * dp8.memory.weights_bytes
    assert tp2.step_s > tp2.compute_s


def test_vit_attention_heads_split_through_torchs_merged_batch_heads_axis():
    model = roofcast.load_model("vit_b_16")
    src = GraphParallelSource(model.graph_at, RunConfig(precision="bf16"), name="vit_b_16")
    assert (src.facts.layers, src.facts.heads, src.facts.hidden) == (12, 12, 768)
    w = src.build(tp=4, micro_batch=2, sequence_parallel=False, mode="train")
    fwd = sorted((c.collective, c.layer, c.count) for c in w.comms if c.phase == "forward")
    assert fwd == [("all_reduce", layer, 2.0) for layer in range(1, 13)]
    one = src.build(tp=1, micro_batch=2, sequence_parallel=False, mode="train")
    attn = one.rows["op_type"].eq("Softmax") & one.rows["phase"].eq("forward")
    assert w.rows.loc[attn, "flops"].sum() == pytest.approx(one.rows.loc[attn, "flops"].sum() / 4)


def test_graph_without_repeated_blocks_is_cut_into_flop_balanced_chunks():
    src = _source(mlp_pair)
    assert src.facts.layers is None
    assert src.facts.heads is None
    w = src.build(tp=1, micro_batch=4, sequence_parallel=False, mode="train")
    assert w.layers == 3  # one chunk per costed node here: up, act, down
    fwd = w.rows[w.rows["phase"] == "forward"].set_index("node")
    assert list(fwd.loc[["up", "act", "down"], "layer"]) == [1, 2, 3]
    assert any("chunks" in n for n in w.notes)
    assert w.param_elems[1] == 16 * 64
    assert w.param_elems[3] == 64 * 16
    assert w.boundary_bytes == 4 * 64 * 4  # the [4, 64] activation between up and down
    assert w.checkpoint_bytes[3] == 4 * 64 * 4


def test_tp1_is_the_single_device_workload_and_memory():
    from roofcast.predictor.memory.graph import memory_footprint
    from roofcast.predictor.workload import workload_table

    src = _source(attention_blocks, precision="bf16")
    w = src.build(tp=1, micro_batch=2, sequence_parallel=False, mode="train")
    config = src.run_config(2, "train")
    assert config.mode == "train"
    assert config.dims == src.graph(2).dims
    plain = workload_table(src.graph(2), config, src.runtime)
    assert w.rows.drop(columns=["layer", "count"]).equals(plain)
    assert set(w.rows["count"]) == {1.0}
    fp = memory_footprint(src.graph(2), config)
    assert w.param_elems.sum() * 2 == fp.gradients_bytes  # bf16 gradients of every parameter
    # saved activations: every kernel's float outputs (predictor.memory also counts the inputs)
    inputs = 2 * 4 * 96 * 2
    assert w.activation_bytes.sum() == pytest.approx(fp.saved_activations_bytes - inputs)
