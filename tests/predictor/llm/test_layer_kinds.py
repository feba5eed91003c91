"""Kernels of today's layer kinds: MLA (prefill decompresses, decode attends the latent),
sliding windows and chunks capping attended keys, sinks, qk-norm, shared experts."""

from __future__ import annotations

import pytest

from roofcast.graph_import.llm.load import load_llm
from roofcast.predictor.llm.kernels import Segment, step_workload
from roofcast.predictor.llm.layer import attended_keys
from roofcast.predictor.llm.precision import TensorDtypes

FP16 = TensorDtypes("fp16")


def rows(df, name):
    return df[df["node"] == name]


def test_mla_decode_attends_the_latent_with_absorbed_weights(engine):
    """DeepSeek-V3 decode of b sequences at context L, one MoE layer's attention:
    FLOPs 2 b H L (2 r_kv + r) (+ per-score softmax), KV bytes b L (r_kv + r) x 2 B."""
    a = load_llm("deepseek-v3")
    b, ctx, h = 4, 4096, 128
    df = step_workload(a, [Segment(b, 1, ctx)], FP16, engine)
    attn = rows(df, "k1.attn0")  # the MoE kind (group 1); group 0 is the dense kind
    assert len(attn) == 1
    assert attn["flops"].iloc[0] == pytest.approx(2 * b * h * ctx * (2 * 512 + 64), rel=0.01)
    latent, query, value = b * ctx * 576 * 2, b * h * 576 * 2, b * 512 * 2  # value: no reread
    assert attn["bytes_read"].iloc[0] == pytest.approx(latent + query + value, rel=1e-9)
    absorb = rows(df, "k1.q_absorb0")
    assert absorb["flops"].iloc[0] == pytest.approx(2 * b * h * 128 * 512, rel=1e-6)
    assert absorb["weight_bytes"].iloc[0] == pytest.approx(h * 128 * 512 * 2, rel=1e-6)
    assert len(rows(df, "k1.o_absorb0")) == 1
    assert rows(df, "k1.kv_b0").empty


def test_mla_prefill_decompresses_then_attends(engine):
    a = load_llm("deepseek-v3")
    n, h = 1024, 128
    df = step_workload(a, [Segment(1, n, n)], FP16, engine)
    kv_b = rows(df, "kv_b0")
    assert kv_b["flops"].iloc[0] == pytest.approx(2 * n * 512 * h * (128 + 128), rel=1e-6)
    attn = rows(df, "attn0")
    mean = (n + 1) / 2
    assert attn["flops"].iloc[0] == pytest.approx(2 * h * n * mean * (192 + 128), rel=0.05)
    assert rows(df, "q_absorb0").empty
    assert rows(df, "kv_write")["bytes_written"].iloc[0] == pytest.approx(n * 576 * 2)


def test_windowed_layers_attend_their_window_and_full_ones_everything(engine):
    a = load_llm("gpt-oss-120b")
    df = step_workload(a, [Segment(1, 1, 10_000)], FP16, engine)
    windowed, full = rows(df, "attn0"), rows(df, "k1.attn0")  # sliding first, then full
    assert windowed["count"].iloc[0] == full["count"].iloc[0] == 18
    ratio = full["bytes_read"].iloc[0] / windowed["bytes_read"].iloc[0]
    assert ratio == pytest.approx(10_000 / 128, rel=0.05)  # KV dominates; Q is the rest


def test_sinks_add_one_score_per_query_row():
    assert attended_keys(100, 100, 0) == (100, 50.5)
    oss = load_llm("gpt-oss-20b").kinds[1].attention
    assert oss.sinks == 1
    assert oss.params(2880) - oss.matrix_params(2880) == (64 * 64 + 2 * 8 * 64) + 64


def test_chunked_attention_attends_within_the_chunk():
    span, mean = attended_keys(10_000, 1, 0, chunk=8192)
    assert (span, mean) == (10_000 - 8192, 10_000 - 8192)
    assert attended_keys(8192, 8192, 0, chunk=8192) == (8192, 4096.5)
    assert attended_keys(8200, 16, 0, chunk=8192) == (8200, (sum(range(8185, 8193)) + 36) / 16)


def test_shared_experts_and_qk_norm_add_their_kernels(engine):
    df = step_workload(load_llm("glm-4.5-air"), [Segment(1, 1, 512)], FP16, engine)
    up = rows(df, "k1.shared_up")
    assert up["gemm_n"].iloc[0] == 2 * 1408  # one shared expert, gate + up
    assert rows(df, "k1.qk_norm").empty  # GLM-4.5-Air: use_qk_norm false
    q3 = step_workload(load_llm("qwen3-8b"), [Segment(1, 1, 512)], FP16, engine)
    assert rows(q3, "qk_norm")["count"].iloc[0] == 36
