"""predictor.learned.aiconfigurator: rows costed by the project's rules, featurized as graphs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from roofcast.predictor.learned.aiconfigurator import (
    attention_row,
    featurized,
    gemm_row,
    moe_row,
)
from roofcast.predictor.learned.features import learned_features
from roofcast.predictor.llm.kernels import busiest_share, expected_experts


def test_gemm_costs_2mnk_with_operands_at_the_math_dtype_and_bf16_output():
    r = gemm_row(64, 256, 512, "fp8")
    assert r["flops"] == 2 * 64 * 256 * 512
    assert r["bytes_read"] == 64 * 512 + 512 * 256  # fp8: 1 byte
    assert r["bytes_written"] == 2 * 64 * 256
    assert (r["gemm_m"], r["gemm_n"], r["gemm_k"]) == (64, 256, 512)


def test_decode_attention_reads_the_kv_cache_at_its_dtype():
    bf16 = attention_row(8, 1, 4096, 32, 8, 128, 0, "bf16", "bf16")
    fp8 = attention_row(8, 1, 4096, 32, 8, 128, 0, "bf16", "fp8")
    kv = 2 * 8 * 8 * 4096 * 128
    assert bf16["bytes_read"] - fp8["bytes_read"] == pytest.approx(kv * (2 - 1))
    assert bf16["flops"] == fp8["flops"] > 4 * 8 * 32 * 4096 * 128


def test_prefill_attention_counts_the_causal_half():
    full = attention_row(1, 1024, 1024, 8, 8, 128, 0, "bf16", "bf16")
    decode_like = attention_row(1, 1, 1024, 8, 8, 128, 0, "bf16", "bf16")
    # 1024 causal queries attend (1024 + 1) / 2 keys on average; one decode query attends all
    per_query = full["flops"] / 1024 / decode_like["flops"]
    assert per_query == pytest.approx(1025 / 2 / 1024)


def test_graph_captured_rows_take_the_devices_launch_floor_and_learn_with_eager():
    rows = pd.DataFrame({"table": ["gemm", "generation_attention"], "device": "h100-sxm",
                         "runtime": ["vllm", "sglang"], "math_dtype": ["fp8", "bf16"],
                         "kv_dtype": "bf16", "latency_s": [1e-4, 2e-4], "m": [64, np.nan],
                         "n": [256, np.nan], "k": [512, np.nan], "batch_size": [np.nan, 8],
                         "isl": [np.nan, 1], "num_heads": [np.nan, 32],
                         "num_key_value_heads": [np.nan, 8], "head_dim": [np.nan, 128],
                         "step": [np.nan, 1023], "window_size": 0.0})
    X = featurized(rows)
    assert list(X["family"]) == ["matmul", "attention"]
    assert X["dispatch_floor_s"].to_numpy() == pytest.approx([5e-6, 5e-6])
    assert set(X["learned_from"]) == {"pytorch-eager"}
    # the fp8 GEMM is bounded by the device's fp8 peak, the bf16 attention by its bf16 peak
    assert X["peak_flops_per_s"].tolist() == pytest.approx([1978.9e12, 989.4e12])
    F = learned_features(X)
    assert list(F["math_bits"]) == [8.0, 16.0]
    assert list(F["runtime_code"]) == [2.0, 3.0]


def test_moe_module_costs_the_touched_experts_up_and_down_on_one_device():
    # DeepSeek-V3 routed experts on one of 8 tensor-parallel devices, 256 tokens, fp8 weights
    r = moe_row(256, 7168, 2048, 8, 256, 8, 1, True, "fp8")
    touched, pairs, f = expected_experts(256, 8, 256), 256 * 8, 2048 // 8
    assert (r["family"], r["op_type"], r["engine"]) == ("moe", "MoeExperts", "matrix")
    assert r["flops"] == pytest.approx(2 * pairs * 7168 * 3 * f)  # gated up (2 f) + down (f)
    weights = touched * 7168 * 3 * f * (1 + 2 / 7168)  # fp8 + an fp16 scale per channel
    assert r["weight_bytes"] == pytest.approx(weights)
    assert r["bytes_read"] == pytest.approx(weights + pairs * (7168 + f) * 2)  # bf16 activations
    assert r["gemm_batch"] * r["gemm_m"] == pytest.approx(pairs)
    nongated = moe_row(256, 7168, 2048, 8, 256, 8, 1, False, "fp8")
    assert nongated["flops"] == pytest.approx(r["flops"] * 2 / 3)


def test_expert_parallel_moe_rows_cost_the_busiest_group():
    one, ep8 = (moe_row(64, 4096, 1536, 8, 128, 1, ep, True, "bf16") for ep in (1, 8))
    touched, pairs = busiest_share(128, 8, 64, 8)
    assert ep8["gemm_batch"] == pytest.approx(touched)
    assert touched < one["gemm_batch"]
    assert ep8["flops"] == pytest.approx(one["flops"] * pairs / (64 * 8))


def test_moe_rows_featurize_as_their_own_family():
    rows = pd.DataFrame({"table": "moe", "device": "h200", "runtime": ["tensorrt-llm", "vllm"],
                         "math_dtype": "fp8_block", "kv_dtype": "bf16", "latency_s": 5e-4,
                         "num_tokens": 256, "hidden_size": 7168, "inter_size": 2048,
                         "topk": 8, "num_experts": 256, "moe_tp_size": 8, "moe_ep_size": 1,
                         "gated": 1.0})
    X = featurized(rows)
    assert set(X["family"]) == {"moe"}
    assert set(X["dtype"]) == {"fp8_block"}
    F = learned_features(X)
    assert list(F["runtime_code"]) == [1.0, 2.0]
    assert (F["block_scaled"] == 1).all()
