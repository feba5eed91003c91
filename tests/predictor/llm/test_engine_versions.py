"""Today's engines (vllm, tensorrt-llm, sglang) vs their 2024 releases (vllm-2024,
tensorrt-llm-2024): kernel model and host time per step, native fp8 KV on devices with fp8
units, uncalibrated intervals, and the MoE imbalance parameter (predictor/llm/phases.py,
kernels.py, calibration.py)."""

from __future__ import annotations

import numpy as np
import pytest

from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import as_estimator
from roofcast.predictor.llm.calibration import engine_calibration
from roofcast.predictor.llm.kernels import MoeRouting, Segment, busiest_share, steps_workload
from roofcast.predictor.llm.phases import Step, step_estimator, time_steps
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.runtimes import get_runtime

TODAY = ("vllm", "tensorrt-llm", "sglang")


@pytest.mark.parametrize("name", TODAY)
def test_todays_engines_time_their_steps_with_their_kernel_model(name):
    prof = get_runtime(name)
    assert step_estimator(SERVING_ESTIMATOR, prof) == "engine-tables"
    assert step_estimator(None, prof) == "engine-tables"
    assert step_estimator("roofline", prof) == "roofline"  # a name the run chose is kept
    forced = as_estimator(SERVING_ESTIMATOR)
    assert step_estimator(forced, prof) is forced
    assert step_estimator(SERVING_ESTIMATOR, get_runtime(f"{name}-2024" if name != "sglang"
                                                         else "vllm-2024")) == SERVING_ESTIMATOR


def test_a_step_carries_the_engines_own_host_time(archs):
    arch, h100 = archs["llama-2-7b"], get_device("h100-sxm")
    steps = [Step("d", (Segment(8, 1, 512),))]
    dt = TensorDtypes("fp16")
    times = {n: time_steps(arch, [h100], steps, dt, get_runtime(n)).time_s[0, 0]
             for n in ("sglang", "tensorrt-llm")}
    rows = {n: time_steps(arch, [h100], steps, dt, get_runtime(n)).table["kernel_s"].sum()
            for n in ("sglang", "tensorrt-llm")}
    # the same kernel model (learned, per-engine rows) plus 0 us and 580 us of host time
    assert times["sglang"] == pytest.approx(rows["sglang"])
    assert times["tensorrt-llm"] == pytest.approx(rows["tensorrt-llm"] + 580e-6)


def test_the_2024_per_sequence_host_term_is_not_todays_vllm():
    old, new = engine_calibration("vllm-2024"), engine_calibration("vllm")
    assert old.fitted
    assert old.phases["decode"].seq_overhead_s > 50e-6  # Argonne's 2024 runs
    assert not new.fitted
    h100 = get_device("h100-sxm")
    t, lo, hi = new.apply("decode", 0.02, h100, seqs=475, lower_s=0.015, upper_s=0.03)
    assert (float(t), float(lo), float(hi)) == (0.02, 0.015, 0.03)  # the kernel model's own
    note = new.notes(h100)[0]
    assert "160 us" in note
    assert "vLLM PR #11133" in note
    assert "engine-tables kernel model" in note


def _decode(arch, name, kv, device):
    hw = get_device(device)
    st = time_steps(arch, [hw], [Step("d", (Segment(64, 1, 4096),))], TensorDtypes("fp8", kv),
                    get_runtime(name), as_estimator(SERVING_ESTIMATOR))
    return st.time_s[0, 0], st.table


@pytest.mark.parametrize("name", TODAY)
def test_fp8_kv_is_read_natively_where_the_device_has_fp8_units(archs, name):
    arch = archs["llama-3.1-70b"]
    t8, rows = _decode(arch, name, "fp8", "h100-sxm")
    t16, _ = _decode(arch, name, "fp16", "h100-sxm")
    assert "fp8-units" not in set(rows.loc[rows["op_type"] == "KvConvert", "applies"])
    assert t8 < t16  # half the KV bytes, no conversion
    # an A100 has no fp8 units: the engine still converts in software there
    _, a100_rows = _decode(arch, name, "fp8", "a100-80gb-sxm")
    assert "no-fp8-units" in set(a100_rows.loc[a100_rows["op_type"] == "KvConvert", "applies"])


def test_the_2024_engines_keep_their_measured_fp8_kv_conversion(archs):
    arch = archs["llama-3.1-70b"]
    _, rows = _decode(arch, "vllm-2024", "fp8", "h100-sxm")
    assert "fp8-units" in set(rows.loc[rows["op_type"] == "KvConvert", "applies"])


def _moe_pairs(arch, ep, routing):
    rows = steps_workload(arch, [("s", (Segment(32, 1, 1024),))], TensorDtypes("fp16"),
                          get_runtime("vllm"), ep=ep, moe=routing)
    experts = rows.loc[rows["node"] == "experts"]  # the module's pairs: experts x per expert
    return (experts["gemm_batch"] * experts["gemm_m"]).item()


def test_moe_imbalance_loads_the_busiest_expert_group(archs):
    arch = archs["mixtral-8x7b"]  # 8 experts, 2 per token; 32 tokens -> 64 pairs
    _, uniform = busiest_share(8, 2, 32, 4)
    assert MoeRouting().busiest_pairs(uniform, 32, 2, 4) == uniform
    assert MoeRouting(2.0).busiest_pairs(uniform, 32, 2, 4) == pytest.approx(max(uniform, 32))
    assert MoeRouting(100.0).busiest_pairs(uniform, 32, 2, 4) == 64  # at most every pair
    assert _moe_pairs(arch, 4, None) == round(uniform)
    assert _moe_pairs(arch, 4, MoeRouting(3.0)) == 48  # 3 x 64 / 4
    assert _moe_pairs(arch, 1, MoeRouting(3.0)) == _moe_pairs(arch, 1, None)  # one group


@pytest.mark.parametrize("bad", [0.5, float("nan"), float("inf")])
def test_a_bad_moe_imbalance_is_refused(bad):
    with pytest.raises(PredictionError, match="MoE imbalance must be a finite number >= 1"):
        MoeRouting(bad)


def test_time_steps_takes_the_imbalance(archs):
    arch, h100 = archs["mixtral-8x7b"], get_device("h100-sxm")
    steps = [Step("d", (Segment(64, 1, 1024),))]
    args = (arch, [h100], steps, TensorDtypes("fp16"), get_runtime("vllm-2024"))
    even = time_steps(*args, ep=4).time_s[0, 0]
    skew = time_steps(*args, ep=4, moe=MoeRouting(3.0)).time_s[0, 0]
    assert np.isfinite(even)
    assert skew > even
