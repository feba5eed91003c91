"""predictor.learned.aiconfigurator: rows costed by the project's rules, featurized as graphs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from roofcast.predictor.learned.aiconfigurator import attention_row, featurized, gemm_row
from roofcast.predictor.learned.features import learned_features


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
