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
    with pytest.raises(ParallelPlanError, match=r"tp=5 does not divide the 12 heads of "
                                                r"tiny-attention; use 1, 2, 3, 4, 6 or 12"):
        src.build(tp=5, micro_batch=2, sequence_parallel=False, mode="train")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"ep": 2}, "no mixture-of-experts"),
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
    with pytest.raises(ParallelPlanError, match="tp=5 does not divide the 12 heads of bert_base"):
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
