"""training_data.public.aiconfigurator: devices, runtimes and dtypes mapped, the rest counted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from roofcast.training_data.public.aiconfigurator import load_kernels
from roofcast.training_data.public_kernels import PublicDataError

GEMM_COLS = ["framework", "version", "device", "op_name", "kernel_source", "gemm_dtype", "m",
             "n", "k", "latency"]


def _gemm(device: str, framework: str, dtypes: list[str], n: int) -> pd.DataFrame:
    rows = [[framework, "1", device, "gemm", "x", dt, 16 * (i + 1), 256, 512, 0.01 * (i + 1)]
            for dt in dtypes for i in range(n)]
    return pd.DataFrame(rows, columns=GEMM_COLS)


def _gen_attention(device: str) -> pd.DataFrame:
    return pd.DataFrame({"framework": "VLLM", "version": "1", "device": device,
                         "op_name": "generation_attention", "kernel_source": "x",
                         "batch_size": [8, 16], "isl": 1, "num_heads": 32,
                         "num_key_value_heads": 8, "head_dim": 128, "beam_width": 1,
                         "attn_dtype": "bfloat16", "kv_cache_dtype": ["bfloat16", "fp8"],
                         "step": [1023, 4095], "latency": [0.02, 0.05]})


def _moe(device: str, framework: str = "TRTLLM", dtype: str = "fp8_block") -> pd.DataFrame:
    return pd.DataFrame({"framework": framework, "version": "1", "device": device,
                         "op_name": "moe",
                         "kernel_source": ["cutlass", "cutlass", "cutlass", "x_nongated"],
                         "moe_dtype": dtype, "num_tokens": [64, 64, 64, 128],
                         "hidden_size": 7168, "inter_size": 2048, "topk": 8,
                         "num_experts": 256, "moe_tp_size": 8, "moe_ep_size": 1,
                         "distribution": ["balanced", "power_law_1.01", "power_law_1.2",
                                          "balanced"],
                         "latency": [0.2, 0.3, 0.35, 0.4]})


def _write(tmp_path, files: dict[str, pd.DataFrame]):
    """A shared-data folder holding ``files`` (relative path -> table) and their INDEX.csv."""
    root = tmp_path / "aiconfigurator"
    index = []
    for rel, df in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        df.to_parquet(root / rel)
        index.append({"path": rel, "table": rel.rsplit("/", 1)[1].removesuffix(".parquet")})
    pd.DataFrame(index).to_csv(root / "INDEX.csv", index=False)
    return tmp_path


@pytest.fixture
def folder(tmp_path):
    return _write(tmp_path, {
        "data/h100_sxm/gemm/trtllm/1/gemm_perf.parquet":
            _gemm("NVIDIA H100 80GB HBM3", "TRTLLM", ["bfloat16", "fp8", "int4_wo"], 50),
        "data/b60/gemm/vllm/1/gemm_perf.parquet":
            _gemm("Intel(R) Arc(TM) Pro B60 Graphics", "VLLM", ["bfloat16"], 5),
        # a folder named after one GPU holding another's rows: the device column wins
        "data/h200_sxm/attention/vllm/1/generation_attention_perf.parquet":
            _gen_attention("NVIDIA L40S"),
        "data/h200_sxm/moe/trtllm/1/moe_perf.parquet": _moe("NVIDIA H200"),
    })


def test_rows_mapped_to_catalog_devices_runtimes_and_dtypes(folder):
    t = load_kernels(folder, cap=None)
    assert set(t.rows["device"]) == {"h100-sxm", "l40s", "h200"}
    assert set(t.rows["runtime"]) == {"tensorrt-llm", "vllm"}
    gemm = t.rows[t.rows["table"] == "gemm"]
    assert sorted(set(gemm["math_dtype"])) == ["bf16", "fp8"]
    assert gemm["latency_s"].min() == pytest.approx(1e-5)
    gen = t.rows[t.rows["table"] == "generation_attention"]
    assert list(gen["kv_dtype"]) == ["bf16", "fp8"]


def test_left_out_rows_are_counted_not_dropped_silently(folder):
    t = load_kernels(folder, cap=None)
    assert t.skipped["dtype not modelled: int4_wo"] == 50
    assert t.skipped["device not in the catalog: Intel(R) Arc(TM) Pro B60 Graphics"] == 5


def test_cap_per_group_is_seeded(folder):
    a, b = load_kernels(folder, cap=7, seed=3), load_kernels(folder, cap=7, seed=3)
    gemm = a.rows[a.rows["table"] == "gemm"]
    assert gemm.groupby("math_dtype").size().tolist() == [7, 7]
    pd.testing.assert_frame_equal(a.rows, b.rows)
    c = load_kernels(folder, cap=7, seed=4)
    assert not np.array_equal(gemm["m"].to_numpy(), c.rows[c.rows["table"] == "gemm"]["m"])


def test_missing_folder_says_where_to_point(tmp_path):
    with pytest.raises(PublicDataError, match="ROOFCAST_SHARED_DATA"):
        load_kernels(tmp_path)


def test_moe_rows_keep_uniform_routing_and_say_whether_the_kernel_is_gated(folder):
    t = load_kernels(folder, cap=None)
    moe = t.rows[t.rows["table"] == "moe"]
    assert list(moe["num_tokens"]) == [64, 128]  # balanced routing only (the LLM road's)
    assert list(moe["gated"]) == [1.0, 0.0]
    assert set(moe["math_dtype"]) == {"fp8_block"}
    assert set(moe["device"]) == {"h200"}
    assert moe["latency_s"].tolist() == pytest.approx([2e-4, 4e-4])
    assert t.skipped["MoE routing not uniform: power_law_1.01"] == 1
    assert t.skipped["MoE routing not uniform: power_law_1.2"] == 1
    gemm = t.rows[t.rows["table"] == "gemm"]
    assert gemm["gated"].isna().all()
    assert gemm["num_experts"].isna().all()


def test_left_out_rules_drop_their_rows_and_count_them(tmp_path):
    """LEFT_OUT: vLLM's fp8_block GEMMs everywhere, its fp8 MoE modules on Hopper only; the
    same dtypes of another engine, and other dtypes of vLLM, stay."""
    t = load_kernels(_write(tmp_path, {
        "data/h100_sxm/gemm/vllm/1/gemm_perf.parquet":
            _gemm("NVIDIA H100 80GB HBM3", "VLLM", ["fp8_block", "fp8"], 3),
        "data/h100_sxm/gemm/sglang/1/gemm_perf.parquet":
            _gemm("NVIDIA H100 80GB HBM3", "SGLANG", ["fp8_block"], 3),
        "data/h200_sxm/moe/vllm/1/moe_perf.parquet": _moe("NVIDIA H200", "VLLM", "fp8"),
        "data/b200_sxm/moe/vllm/1/moe_perf.parquet": _moe("NVIDIA B200", "VLLM", "fp8"),
    }), cap=None)
    kept = t.rows.groupby(["table", "runtime", "math_dtype", "device"]).size().to_dict()
    assert kept == {("gemm", "sglang", "fp8_block", "h100-sxm"): 3,
                    ("gemm", "vllm", "fp8", "h100-sxm"): 3,
                    ("moe", "vllm", "fp8", "b200"): 2}
    assert t.skipped["timed with a host floor (LEFT_OUT): VLLM"] == 3
    assert t.skipped["slower than its bf16 module (Hopper fp8 MoE path) (LEFT_OUT): VLLM"] == 4
