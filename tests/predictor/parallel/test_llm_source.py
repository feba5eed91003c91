"""LLMParallelSource: Megatron-LM split, rows per slot, FLOPs, parameters, comms, memory."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.load import load_llm
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.parallel.llm_source import LLMParallelSource
from roofcast.predictor.parallel.types import ParallelPlanError

SEQ = 512


@pytest.fixture(scope="module")
def llama70() -> LLMArch:
    return load_llm("llama-3.1-70b")


@pytest.fixture(scope="module")
def small() -> LLMArch:
    """A small Llama-style model (GQA, SwiGLU, RMSNorm, rope) that builds fast."""
    return LLMArch(name="tiny-llama", family="llama", n_layers=4, d_model=512, n_heads=8,
                   n_kv_heads=2, head_dim=64, d_ff=1408, vocab=1000, max_context=2048)


@pytest.fixture(scope="module")
def gpt3ish() -> LLMArch:
    """Korthikanti et al.'s block: multi-head attention, GeLU MLP of 4h, LayerNorm."""
    return LLMArch(name="gpt3ish", family="gpt2", n_layers=4, d_model=1024, n_heads=16,
                   n_kv_heads=16, head_dim=64, d_ff=4096, vocab=1024, max_context=2048,
                   gated_mlp=False, activation="gelu", norm="layernorm", positions="learned")


def build(src, tp=1, ep=1, mb=1, sp=False, mode="train"):
    return src.build(tp=tp, ep=ep, micro_batch=mb, sequence_parallel=sp, mode=mode)


def matmul_flops(work, phase=None) -> float:
    r = work.rows[work.rows["family"].isin(["matmul", "attention"])]
    if phase is not None:
        r = r[r["phase"] == phase]
    return float((r["flops"] * r["count"]).sum())


def total_flops(work) -> float:
    r = work.rows[work.rows["phase"] != "update"]
    return float((r["flops"] * r["count"]).sum())


def reference_flops(arch: LLMArch, seq: int, causal: bool) -> float:
    """6 N T + attention (QK^T and PV: 4 s q_dim FLOPs per token and layer forward, x 3 for
    forward + backward; half with a causal kernel), N = the parameters of the matmuls."""
    n = arch.params - arch.vocab * arch.d_model - (2 * arch.n_layers + 1) * arch.d_model
    attn = 12 * arch.n_layers * seq * arch.q_dim * seq
    return 6 * n * seq + attn * ((seq + 1) / (2 * seq) if causal else 1.0)


def test_facts(llama70):
    f = LLMParallelSource(llama70, seq_tokens=4096).facts
    assert (f.name, f.layers, f.heads, f.kv_heads, f.experts, f.hidden, f.seq_tokens) == (
        "llama-3.1-70b", 80, 64, 8, None, 8192, 4096)
    assert LLMParallelSource("mixtral-8x7b", seq_tokens=64).facts.experts == 8


@pytest.mark.parametrize(("runtime", "causal"), [("pytorch-eager", False),
                                                 ("torch-compile", True)])
def test_flops_per_sample_match_6nt_plus_attention(llama70, runtime, causal):
    src = LLMParallelSource(llama70, seq_tokens=4096, runtime=runtime)
    got = total_flops(build(src))
    ref = reference_flops(llama70, 4096, causal)
    assert abs(got / ref - 1) < 0.03
    # the rest (norms, softmax, rotary, ...) is small but present: not exactly the GEMMs
    assert got > ref


def test_tensor_parallel_splits_the_matmul_work(llama70):
    src = LLMParallelSource(llama70, seq_tokens=4096, runtime="torch-compile")
    one = matmul_flops(build(src))
    for tp in (2, 8):
        assert matmul_flops(build(src, tp=tp)) * tp == pytest.approx(one, rel=2e-3)  # vocab pad


def test_sequence_parallel_splits_norm_work(small):
    src = LLMParallelSource(small, seq_tokens=SEQ)
    rows = build(src, tp=4).rows
    sp_rows = build(src, tp=4, sp=True).rows
    norm = (rows["node"] == "norm1") & (rows["layer"] == 1) & (rows["phase"] == "forward")
    assert sp_rows.loc[norm, "flops"].item() * 4 == pytest.approx(rows.loc[norm, "flops"].item())
    qkv = (rows["node"] == "qkv") & (rows["layer"] == 1) & (rows["phase"] == "forward")
    assert sp_rows.loc[qkv, "flops"].item() == rows.loc[qkv, "flops"].item()


def test_backward_gemms_are_twice_the_forward(small):
    work = build(LLMParallelSource(small, seq_tokens=SEQ))
    gemm = work.rows[work.rows["op_type"].isin(["Gemm", "MatMul"])]
    fwd = gemm[gemm["phase"] == "forward"]["flops"].sum()
    bwd = gemm[gemm["phase"] == "backward"]["flops"].sum()
    # the first GEMM's input gradient exists too: everything requires grad after the embedding
    assert bwd == pytest.approx(2 * fwd)


def test_rows_cover_every_slot_with_identical_blocks(small):
    work = build(LLMParallelSource(small, seq_tokens=SEQ), tp=2, sp=True)
    rows = work.rows
    assert work.layers == small.n_layers
    assert set(rows["layer"]) == set(range(small.n_layers + 2))
    assert rows["key"].is_unique
    assert (rows["count"] == 1.0).all()
    per_slot = rows.groupby("layer")["flops"].sum()
    blocks = per_slot.loc[1:small.n_layers]
    assert blocks.nunique() == 1
    assert blocks.iloc[0] > 0
    assert set(rows.loc[rows["layer"] == 0, "node"]) >= {"embed", "w.embed"}
    assert {"lm_head", "cross_entropy"} <= set(rows.loc[rows["layer"] == small.n_layers + 1,
                                                        "node"])
    assert set(rows["phase"]) == {"forward", "backward", "update"}


def test_update_rows_match_param_elems(small):
    for tp in (1, 4):
        work = build(LLMParallelSource(small, seq_tokens=SEQ), tp=tp)
        upd = work.rows[work.rows["phase"] == "update"]
        adam = upd.groupby("layer")["flops"].sum() / 12.0
        np.testing.assert_allclose(adam.reindex(range(small.n_layers + 2)).to_numpy(),
                                   work.param_elems)


def test_param_elems_sum_to_the_model(llama70):
    src = LLMParallelSource(llama70, seq_tokens=4096)
    assert build(src).param_elems.sum() == llama70.params
    tp = 8
    work = build(src, tp=tp)
    replicated = (2 * llama70.n_layers + 1) * llama70.d_model  # norms
    padded_vocab = 16128 * tp  # 128256 -> multiple of 128 x 8
    pad = 2 * (padded_vocab - llama70.vocab) * llama70.d_model  # embedding + head
    assert work.param_elems.sum() * tp - (tp - 1) * replicated == llama70.params + pad


def test_tied_head_updates_with_the_embedding():
    arch = load_llm("gemma-7b")
    assert arch.tied_embeddings
    work = build(LLMParallelSource(arch, seq_tokens=64))
    head = work.rows[(work.rows["layer"] == arch.n_layers + 1)
                     & (work.rows["phase"] == "update")]
    assert "w.embed" not in set(head["node"])
    assert work.param_elems[-1] == arch.d_model  # the final norm only
    assert build(LLMParallelSource(arch, seq_tokens=64)).param_elems.sum() == pytest.approx(
        arch.params, rel=1e-6)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_activations_match_korthikanti(gpt3ish, tp):
    """s b h (34 + 5 a s / h) per layer; with TP 10 + 24/t + 5as/(ht); with TP+SP all / t."""
    s, b, h, a = SEQ, 2, gpt3ish.d_model, gpt3ish.n_heads
    src = LLMParallelSource(gpt3ish, seq_tokens=s, runtime="pytorch-eager", dropout=True)
    no_sp = build(src, tp=tp, mb=b).activation_bytes[1]
    assert no_sp == pytest.approx(s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp)))
    if tp > 1:
        with_sp = build(src, tp=tp, mb=b, sp=True).activation_bytes[1]
        assert with_sp == pytest.approx(s * b * h * (34 + 5 * a * s / h) / tp)


def test_activations_follow_the_architecture(llama70):
    """Llama (GQA 8/64, SwiGLU 3.5h, no dropout), eager: norms 4 + attention input 2 + Q 2 +
    K, V 0.5 + O input 2 + MLP input 2 + gate/up 14 + product 7 = 33.5 s b h, plus the
    softmax output 2 a s^2 b; fused (flash) keeps the fp32 statistics 4 a s b instead."""
    s, b, h, a = 4096, 1, llama70.d_model, llama70.n_heads
    eager = build(LLMParallelSource(llama70, seq_tokens=s, runtime="pytorch-eager"))
    assert eager.activation_bytes[1] == pytest.approx(s * b * h * 33.5 + 2 * a * s * s * b)
    fused = build(LLMParallelSource(llama70, seq_tokens=s, runtime="torch-compile"))
    assert fused.activation_bytes[1] == pytest.approx(s * b * h * 33.5 + 4 * a * s * b)
    assert fused.checkpoint_bytes[1] == 2 * s * b * h
    head = fused.activation_bytes[-1]
    assert head == pytest.approx(2 * 2 * s * b * h + 4 * s * b * llama70.vocab)
    sp = build(LLMParallelSource(llama70, seq_tokens=s, runtime="torch-compile"), tp=8, sp=True)
    assert sp.checkpoint_bytes[1] == 2 * s * b * h / 8
    assert sp.boundary_bytes == 2 * s * b * h / 8
    assert fused.boundary_bytes == 2 * s * b * h


def test_tensor_comms(llama70):
    src = LLMParallelSource(llama70, seq_tokens=4096)
    assert build(src).comms == ()
    act = 2.0 * 4096 * 2 * llama70.d_model
    ar = [c for c in build(src, tp=8, mb=2).comms if c.layer == 1]
    assert sorted((c.collective, c.phase, c.count, c.size_bytes, c.group) for c in ar) == [
        ("all_reduce", "backward", 2, act, "tp"), ("all_reduce", "forward", 2, act, "tp")]
    sp = [c for c in build(src, tp=8, mb=2, sp=True).comms if c.layer == 1]
    assert sorted((c.collective, c.phase, c.count) for c in sp) == [
        ("all_gather", "backward", 2), ("all_gather", "forward", 2),
        ("reduce_scatter", "backward", 2), ("reduce_scatter", "forward", 2)]
    infer = build(src, tp=8, mode="infer").comms
    assert {c.phase for c in infer} == {"forward"}
    head = [c for c in build(src, tp=8).comms if c.layer == llama70.n_layers + 1]
    assert ("all_reduce", 3) in {(c.collective, c.count) for c in head}  # cross-entropy


def test_moe_expert_parallel():
    arch = load_llm("mixtral-8x7b")
    src = LLMParallelSource(arch, seq_tokens=256)
    base = build(src)
    ep2 = build(src, ep=2)
    experts = lambda w: w.rows[(w.rows["node"] == "experts_up")  # noqa: E731
                               & (w.rows["phase"] == "forward") & (w.rows["layer"] == 1)]
    # balanced routing: a rank's experts run as many pairs as its own tokens make
    assert experts(ep2)["flops"].item() == pytest.approx(experts(base)["flops"].item())
    assert experts(ep2)["weight_bytes"].item() == pytest.approx(
        experts(base)["weight_bytes"].item() / 2)
    a2a = [c for c in ep2.comms if c.collective == "all_to_all" and c.layer == 1]
    pairs = 256 * arch.experts_per_token
    assert sorted((c.phase, c.count, c.group, c.size_bytes) for c in a2a) == [
        ("backward", 2, "ep", 2.0 * pairs * arch.d_model),
        ("forward", 2, "ep", 2.0 * pairs * arch.d_model)]
    expert_params = arch.n_experts * arch.expert_params
    assert base.param_elems[1] - ep2.param_elems[1] == expert_params / 2
    tp2 = build(src, tp=2, ep=2, sp=True)
    assert experts(tp2)["flops"].item() == pytest.approx(experts(base)["flops"].item() / 2)
    # tensor group: the attention's all-gather / reduce-scatter only
    assert {(c.collective, c.count) for c in tp2.comms if c.layer == 1 and c.group == "tp"} \
        == {("all_gather", 1), ("reduce_scatter", 1)}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tp": 3}, "tp=3 does not divide the 64 attention heads of llama-3.1-70b; use 1, 2, 4, 8, "
                "16, 32 or 64"),
    ({"ep": 2}, "ep=2 needs a mixture-of-experts model"),
    ({"tp": 0}, "tp must be a positive integer"),
    ({"tp": "2"}, "tp must be a positive integer"),
    ({"mb": 0}, "micro_batch must be a positive integer"),
    ({"mode": "serve"}, "mode must be one of train, infer"),
])
def test_refusals(llama70, kwargs, message):
    with pytest.raises(ParallelPlanError, match=message.replace("(", r"\(")):
        build(LLMParallelSource(llama70, seq_tokens=128), **kwargs)


def test_moe_refusals():
    src = LLMParallelSource(load_llm("mixtral-8x7b"), seq_tokens=64)
    with pytest.raises(ParallelPlanError, match="ep=3 does not divide the 8 experts"):
        build(src, ep=3)
    with pytest.raises(ParallelPlanError, match="needs sequence parallelism"):
        build(src, tp=2, ep=2)


def test_kv_heads_split_or_replicated(small):
    src = LLMParallelSource(small, seq_tokens=SEQ)  # 8 heads, 2 KV heads
    qkv = lambda w: w.rows[(w.rows["node"] == "qkv") & (w.rows["phase"] == "forward")  # noqa: E731
                           & (w.rows["layer"] == 1)]["gemm_n"].item()
    assert qkv(build(src, tp=2)) == (4 + 2 * 1) * 64
    assert qkv(build(src, tp=8)) == (1 + 2 * 1) * 64  # KV replicated
    odd = replace(small, n_heads=12, n_kv_heads=3, name="odd")
    with pytest.raises(ParallelPlanError, match="tp=2 does not divide the 3 KV heads of odd"):
        build(LLMParallelSource(odd, seq_tokens=SEQ), tp=2)
    with pytest.raises(ParallelPlanError, match="not a multiple of the 3 KV heads"):
        build(LLMParallelSource(odd, seq_tokens=SEQ), tp=4)


def test_bad_source_inputs(small):
    with pytest.raises(ParallelPlanError, match="exceeds the 2048-token context"):
        LLMParallelSource(small, seq_tokens=4096)
    with pytest.raises(ParallelPlanError, match="seq_tokens must be a positive integer"):
        LLMParallelSource(small, seq_tokens=0)
    with pytest.raises(PredictionError, match="does not run int8"):
        LLMParallelSource(small, seq_tokens=64, precision="int8")


def test_infer_mode_is_forward_only(small):
    work = build(LLMParallelSource(small, seq_tokens=SEQ), mode="infer")
    assert set(work.rows["phase"]) == {"forward"}
    assert not work.checkpoint_bytes.any()
    # a forward's working set per block: 2 B x T x (2 x 512 stream + SwiGLU up 2 x 1408)
    assert list(work.activation_bytes[1:-1]) == [2 * SEQ * (2 * 512 + 2 * 1408)] * 4
    assert work.activation_bytes[-1] == 2 * SEQ * 512 + 4 * SEQ * 1024  # head input, logits
    assert work.config.mode == "infer"


def test_build_is_cached(small):
    src = LLMParallelSource(small, seq_tokens=SEQ)
    assert build(src, tp=2) is build(src, tp=2)
    assert build(src, tp=2) is not build(src, tp=2, sp=True)


def test_flash_attention_backward_costs_2_5_forwards_at_lower_efficiency(small):
    from roofcast.predictor.parallel.llm_block import (
        FLASH_BACKWARD_EFFICIENCY,
        FLASH_BACKWARD_FLOPS,
    )
    work = build(LLMParallelSource(small, seq_tokens=SEQ))
    attn = work.rows[(work.rows["family"] == "attention") & (work.rows["layer"] == 1)]
    fwd = attn.loc[attn["phase"] == "forward", "flops"].to_numpy()
    bwd = attn.loc[attn["phase"] == "backward", "flops"].to_numpy()
    assert len(fwd) == len(bwd) == 1
    assert fwd[0] > 0
    assert bwd[0] == pytest.approx(fwd[0] * FLASH_BACKWARD_FLOPS / FLASH_BACKWARD_EFFICIENCY)


@pytest.mark.parametrize(("precision", "expected"), [("bf16", 4.0), ("fp16", None)])
def test_megatron_reduces_bf16_gradients_in_fp32(small, precision, expected):
    work = build(LLMParallelSource(small, seq_tokens=SEQ, precision=precision))
    assert work.grad_reduce_bytes == expected
