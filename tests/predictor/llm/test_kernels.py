"""Kernels of prefill and decode steps against closed forms."""

from __future__ import annotations

import math

import pytest

from roofcast.predictor.llm.kernels import (
    Segment,
    attended_keys,
    expected_experts,
    phase_workload,
    step_workload,
)
from roofcast.predictor.llm.precision import TensorDtypes, dtype_bytes
from roofcast.predictor.runtimes import get_runtime

FP16 = TensorDtypes("fp16")


def total(df, col):
    return float((df[col] * df["count"]).sum())


def rows(df, *nodes):
    return df[df["node"].isin(nodes)]


def test_decode_reads_all_weights_once(archs, engine):
    a = archs["llama-2-7b"]
    w = phase_workload(a, batch=1, new_tokens=1, context=1024, dtypes=FP16, profile=engine)
    # every weight once at 2 bytes, except the embedding table: only the token's row is read
    expected = 2 * (a.params - a.vocab * a.d_model + a.d_model)
    assert total(w, "weight_bytes") == pytest.approx(expected, rel=1e-12)
    # the figure: a Llama-2-7B fp16 decode step reads ~13.5 GB (weights + KV)
    assert 13.0e9 < total(w, "bytes_read") < 14.0e9


def test_prefill_flops_are_two_params_per_token_plus_attention(archs, engine):
    a = archs["llama-2-7b"]
    b, n = 2, 1024
    w = phase_workload(a, batch=b, new_tokens=n, context=n, dtypes=FP16, profile=engine)
    gemm = rows(w, "qkv", "o_proj", "up", "down")
    layer_weights = a.attention_params + a.expert_params
    assert total(gemm, "flops") == pytest.approx(2 * layer_weights * b * n * a.n_layers)
    # fused causal attention: QK^T + PV over the mean (n + 1) / 2 keys, + 6 FLOPs per score
    attn = total(rows(w, "attn0"), "flops")
    mean_keys = (n + 1) / 2
    closed = a.n_layers * b * a.n_heads * n * mean_keys * (4 * a.head_dim + 6)
    assert attn == pytest.approx(closed, rel=1e-9)
    head = total(rows(w, "lm_head"), "flops")
    assert head == pytest.approx(2 * b * a.d_model * a.vocab)  # the last token of each sequence
    assert total(w, "flops") == pytest.approx(
        2 * (a.params - a.vocab * a.d_model) * b * n + attn, rel=0.02)


def test_gqa_decode_reads_kv_once_per_kv_head(archs, engine):
    a = archs["llama-3.1-70b"]
    b, ctx = 8, 3000
    for kv, nbytes in (("fp16", 2), ("fp8", 1), ("int8", 1)):
        w = phase_workload(a, batch=b, new_tokens=1, context=ctx,
                           dtypes=TensorDtypes("fp16", kv), profile=engine)
        attn = rows(w, "attn0")
        q_and_o = 2 * b * a.q_dim * 2 * a.n_layers
        kv_read = total(attn, "bytes_read") + total(attn, "bytes_written") - q_and_o
        assert kv_read == pytest.approx(b * ctx * 2 * a.kv_dim * a.n_layers * nbytes)


def test_eager_attention_materialises_scores(archs):
    a = archs["llama-2-7b"]
    prof = get_runtime("pytorch-eager")
    w = phase_workload(a, batch=1, new_tokens=512, context=512, dtypes=FP16, profile=prof)
    assert {"qk0", "softmax0", "pv0"} <= set(w["node"])
    passes = [n for n in w["node"] if n.startswith("score0.")]
    assert len(passes) == prof.attention_score_passes
    # the full 512 x 512 score rectangle is written at 2 bytes per score
    assert rows(w, "qk0")["bytes_written"].iloc[0] == a.n_heads * 512 * 512 * 2


def test_sliding_window_caps_attention(archs, engine):
    a = archs["mistral-7b"]
    at = {ctx: rows(phase_workload(a, batch=1, new_tokens=1, context=ctx, dtypes=FP16,
                                   profile=engine), "attn0") for ctx in (4096, 9000)}
    assert at[9000]["bytes_read"].iloc[0] == at[4096]["bytes_read"].iloc[0]
    assert attended_keys(9000, 1, 4096) == (4096, 4096.0)
    span, mean = attended_keys(100, 100, 0)
    assert (span, mean) == (100, 50.5)


def test_moe_decode_reads_only_touched_experts(archs, engine):
    a = archs["mixtral-8x7b"]
    e, k = a.n_experts, a.experts_per_token
    assert expected_experts(e, k, 1) == pytest.approx(k)
    assert expected_experts(e, k, 4) == pytest.approx(e * (1 - (1 - k / e) ** 4))
    assert expected_experts(e, k, 4096) == pytest.approx(e)
    for b in (1, 4, 64):
        w = phase_workload(a, batch=b, new_tokens=1, context=512, dtypes=FP16, profile=engine)
        touched = expected_experts(e, k, b)
        ex = rows(w, "experts")  # one module row: gated up (2 f) + down (f) per touched expert
        assert ex["weight_bytes"].iloc[0] == pytest.approx(touched * a.d_model * 3 * a.d_ff * 2)
        assert ex["flops"].iloc[0] == pytest.approx(2 * b * k * a.d_model * 3 * a.d_ff)
        assert (ex["op_type"].item(), ex["family"].item()) == ("MoeExperts", "moe")
        assert ex["gemm_batch"].item() * ex["gemm_m"].item() == pytest.approx(b * k)
    assert {"router", "topk", "route_softmax", "combine"} <= set(w["node"])
    assert not {"up", "act", "down"} & set(w["node"])  # the experts are not dense Gemm rows


def test_int4_weight_bytes_half_of_int8(archs, engine):
    a = archs["llama-2-7b"]
    gemms = ("qkv", "o_proj", "up", "down")
    wb = {}
    for dt in ("int8", "int4", "fp16"):
        w = phase_workload(a, batch=1, new_tokens=1, context=128, dtypes=TensorDtypes(dt),
                           profile=engine)
        wb[dt] = total(rows(w, *gemms), "weight_bytes")
        # weight-only quantisation computes at the activation dtype, plus a dequant row
        g = rows(w, *gemms)
        assert set(g["dtype"]) == {"fp16"}
        if dt != "fp16":
            deq = w[w["overlaps"] != ""]
            assert sorted(deq["overlaps"]) == sorted(f"decode:{n}" for n in gemms)
            assert (deq["bytes_read"] == 0).all()
            assert (deq["flops"] > 0).all()
    # payload: 4 bits vs 8 bits; int4 adds an fp16 scale + 4-bit zero per 128 weights, int8
    # one fp16 scale per output channel (2 / K bytes per weight, < 0.1 %)
    assert dtype_bytes("int4") == dtype_bytes("int8") / 2 == 0.5
    assert wb["int4"] / wb["int8"] == pytest.approx(0.5 + 2.5 / 128, rel=1e-3)
    assert wb["int8"] / wb["fp16"] == pytest.approx(0.5, rel=1e-3)


def test_fp8_weights_compute_at_fp8(archs, engine):
    a = archs["llama-2-7b"]
    w = phase_workload(a, batch=1, new_tokens=64, context=64, dtypes=TensorDtypes("fp8"),
                       profile=engine)
    assert set(rows(w, "qkv", "up")["dtype"]) == {"fp8"}
    deq = w[w["overlaps"] != ""]
    assert deq["fallback_only"].all()  # charged only where the device lacks fp8 units
    assert set(rows(w, "lm_head")["dtype"]) == {"fp16"}  # the LM head stays unquantised


@pytest.mark.parametrize("name", ["opt-like", "gptj-like", "mixtral-8x7b"])
def test_families_cost_every_kernel(archs, engine, name):
    a = archs[name]
    w = phase_workload(a, batch=2, new_tokens=16, context=16, dtypes=FP16, profile=engine)
    assert (w["flops"] >= 0).all()
    assert (w["bytes_read"] > 0).all()
    layer = w[w["scope"] == "layer"]
    assert set(layer["count"]) == {float(a.n_layers)}
    norms = [n for n in w["node"] if n.startswith("norm")]
    assert len(norms) == (1 if a.parallel_block else 2)
    assert ("pos_add" in set(w["node"])) == (a.positions == "learned")
    assert ("rotary" in set(w["node"])) == (a.positions == "rope")


def test_mixed_step_shares_gemms(archs, engine):
    a = archs["llama-2-7b"]
    mixed = step_workload(a, [Segment(8, 1, 600), Segment(1, 100, 300, emits=False)], FP16,
                          engine)
    qkv = rows(mixed, "qkv")
    assert qkv["gemm_m"].iloc[0] == 108  # one GEMM over 8 decode + 100 prompt tokens
    assert qkv["weight_bytes"].iloc[0] == a.d_model * (a.q_dim + 2 * a.kv_dim) * 2
    assert {"attn0", "attn1"} <= set(mixed["node"])
    assert rows(mixed, "lm_head")["gemm_m"].iloc[0] == 8  # only decoding sequences emit
    with pytest.raises(Exception, match="context >= new_tokens"):
        Segment(1, 10, 5)
    assert math.isclose(expected_experts(1, 1, 10), 1.0)
