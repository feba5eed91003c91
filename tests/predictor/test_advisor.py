"""Configuration advisor on tiny ONNX graphs and synthetic CPU devices (expected values as
arithmetic from the device figures)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from roofcast.graph_import import import_model
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.advisor import (
    MIN_GAIN,
    Setting,
    advise,
    batch_candidates,
    packed_time,
    public_table,
    thread_candidates,
)
from roofcast.predictor.errors import PredictionError

N = 1 << 20  # elements per sample of the memory-bound graph


def cpu(units: int = 8, flops: float = 8e9, bw: float = 8e9, overhead_s: float = 1e-6,
        calibration: dict | None = None, id: str = "cpu-test") -> HardwareSpec:
    """A CPU with fp32 matrix and vector peak ``flops`` over all ``units`` cores."""
    return HardwareSpec(
        id=id, name="synthetic CPU", vendor="test", kind="cpu", architecture="test",
        peak_flops={("matrix", "fp32"): flops, ("vector", "fp32"): flops},
        mem_bw_Bps=bw, mem_capacity_bytes=64e9, l2_bytes=2**20, units=units, unit_name="core",
        clock_Hz=2e9, launch_overhead_s=overhead_s, memory_type="test",
        calibration=calibration or {})


def model_bytes(nodes, inputs, outputs, inits=()) -> bytes:
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def loader(data: bytes):
    return lambda b: import_model(data, dims={"batch": b}, name="tiny")


def add_model() -> bytes:
    """z = x + y, float32[batch, N]: 1 FLOP and 12 bytes per element — memory-bound."""
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", N]) for n in "xy")
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    return model_bytes([helper.make_node("Add", ["x", "y"], ["z"], name="add")], [x, y], [z])


def two_branch_model(k: int = 512) -> bytes:
    """x[batch, k] -> MatMul(W1) and MatMul(W2) in parallel -> Add."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = [numpy_helper.from_array(np.zeros((k, k), np.float32), f"w{i}") for i in (1, 2)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="left"),
             helper.make_node("MatMul", ["x", "w2"], ["h2"], name="right"),
             helper.make_node("Add", ["h1", "h2"], ["y"], name="join")]
    return model_bytes(nodes, [x], [y], w)


def relu_model() -> bytes:
    """y = Relu(x), float32[batch, 16]: a tiny kernel that sits on the launch-overhead floor."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return model_bytes([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y])


# ----------------------------------------------------------------------------- search space
def test_candidates():
    assert thread_candidates(cpu(units=8)) == list(range(1, 9))
    assert thread_candidates(cpu(units=56)) == [1, 2, 4, 8, 16, 32, 56]
    assert batch_candidates("latency", 3, 64) == [3]
    assert batch_candidates("throughput", 3, 16) == [1, 2, 3, 4, 8, 16]


# ----------------------------------------------------------------------------- memory-bound
def test_memory_bound_threads_beyond_bandwidth_saturation_do_not_pay():
    hw = cpu(units=8, bw=8e9, calibration={"bw_saturation_threads": 2})
    advice = advise(loader(add_model()), hw, "latency", estimator="roofline")
    seq = advice.table[~advice.table["inter_op"] & advice.table["fusion"]]
    by_t = dict(zip(seq["intra_threads"], seq["time_ms"], strict=True))
    moved = 12.0 * N  # bytes: read x and y, write z
    assert by_t[1] == pytest.approx(moved / (8e9 * 1 / 2) * 1e3)  # bandwidth factor 1/2
    for t in range(2, 9):
        assert by_t[t] == pytest.approx(moved / 8e9 * 1e3)  # saturated from 2 threads on
    # nothing beats the default (8 threads) by MIN_GAIN: the default is kept
    assert advice.recommended == advice.default
    assert advice.predicted_gain == pytest.approx(1.0)
    text = "\n".join(advice.reasons)
    assert "stop paying beyond 2" in text
    assert "memory-bound" in text
    assert "bandwidth saturates at 2" in text
    assert "keep the default" in text


# ----------------------------------------------------------------------------- inter-op
def test_parallel_branches_recommend_inter_op_and_name_the_critical_path():
    # GEMMs scale poorly with threads (calibrated curve: 2 threads only 1.1x one thread)
    cal = {"gemm": {"fp32": {"threads": [1, 2], "GFLOPs": [60.0, 66.0]}}}
    hw = cpu(units=2, flops=66e9, bw=100e9, calibration=cal)
    advice = advise(loader(two_branch_model()), hw, "latency", batch=256, estimator="roofline")
    rec = advice.recommended
    assert rec.inter_op
    assert rec.threads == 1
    assert rec.inter_op_threads == 2
    mm_flops = 2.0 * 256 * 512 * 512
    cell = advice.cell(rec)
    # one MatMul per branch at one thread (60 GFLOP/s) on the critical path; ONNX Runtime runs
    # the join Add inside the right branch's Gemm (its C operand), so that kernel holds it
    ops = cell.per_op.set_index("node")
    assert ops.loc["right", "fused_nodes"] == "right+join"
    left_s, right_s = float(ops.loc["left", "time_s"]), float(ops.loc["right", "time_s"])
    assert left_s == pytest.approx(mm_flops / 60e9)
    assert right_s == pytest.approx((mm_flops + 256 * 512) / 60e9)
    assert cell.critical_path_s == pytest.approx(right_s)
    assert cell.sequential_s == pytest.approx(left_s + right_s)
    default_s = advice.row(advice.default)["time_ms"] / 1e3
    assert default_s == pytest.approx((2 * mm_flops + 256 * 512) / 66e9, rel=1e-3)
    assert advice.predicted_gain == pytest.approx(default_s / advice.row(rec)["time_ms"] * 1e3)
    assert advice.predicted_gain > MIN_GAIN
    text = "\n".join(advice.reasons)
    assert "inter-op parallelism helps" in text
    assert "critical path" in text
    assert "parallel branches" in text


def test_inter_op_does_not_pay_for_memory_bound_branches_sharing_bandwidth():
    hw = cpu(units=8, bw=8e9, calibration={"bw_saturation_threads": 2})
    advice = advise(loader(add_model()), hw, "latency", estimator="roofline")
    cell = advice.cells[(1, "fp32", "infer", True, 2)]
    # four workers of two threads share a bandwidth that saturated at two threads
    assert packed_time(cell, 4, hw) == pytest.approx(cell.sequential_s)
    assert not advice.recommended.inter_op


def test_chain_says_inter_op_cannot_help():
    hw = cpu(units=8, bw=8e9, calibration={"bw_saturation_threads": 2})
    advice = advise(loader(add_model()), hw, "latency", estimator="roofline")
    assert any("inter-op parallelism cannot help" in r and "chain" in r for r in advice.reasons)


# ----------------------------------------------------------------------------- batch
def test_throughput_picks_a_larger_batch_when_overhead_bound():
    hw = cpu(units=2, overhead_s=1e-4)
    advice = advise(loader(relu_model()), hw, "throughput", max_batch=64, estimator="time-roofline")
    # every batch up to 64 takes the 100 us floor: throughput grows with the batch
    rows = advice.table[(advice.table["intra_threads"] == 2) & ~advice.table["inter_op"]
                        & advice.table["fusion"]]
    for b, ms in zip(rows["batch"], rows["time_ms"], strict=True):
        assert ms == pytest.approx(0.1), b
    assert advice.recommended.batch == 64
    assert advice.predicted_gain == pytest.approx(64.0)
    text = "\n".join(advice.reasons)
    assert "batch 1 → 64" in text
    assert "overhead dominates" in text


def test_latency_keeps_the_users_batch():
    hw = cpu(units=2, overhead_s=1e-4)
    advice = advise(loader(relu_model()), hw, "latency", batch=4, estimator="roofline")
    assert set(advice.table["batch"]) == {4}


# ----------------------------------------------------------------------------- default row
@pytest.mark.parametrize("objective", ["latency", "throughput"])
@pytest.mark.parametrize("make", [add_model, two_branch_model, relu_model])
def test_default_is_always_in_the_table(objective, make):
    hw = cpu(units=4)
    advice = advise(loader(make()), hw, objective, batch=2, max_batch=8, estimator="roofline")
    default = advice.table[advice.table["is_default"]]
    assert len(default) == 1
    assert default["gain"].iloc[0] == pytest.approx(1.0)
    assert advice.default == Setting(threads=4, inter_op=False, batch=2, precision="fp32",
                                     fusion=True, mode="infer")
    assert default["opt_level"].iloc[0] == "all"
    shown = public_table(advice, top=1)
    assert shown["is_default"].any()
    assert shown["recommended"].any()
    assert advice.table["recommended"].sum() == 1


def test_precisions_on_cpu_and_gpu():
    hw = cpu(units=2)
    advice = advise(loader(relu_model()), hw, "latency", precisions=["fp32", "fp16"],
                    estimator="roofline")
    assert set(advice.table["precision"]) == {"fp32"}
    assert any("fp16" in n and "ONNX Runtime" in n for n in advice.notes)
    gpu = HardwareSpec(
        id="gpu-test", name="g", vendor="t", kind="gpu", architecture="t",
        peak_flops={("vector", "fp32"): 1e12, ("matrix", "fp16"): 8e12},
        mem_bw_Bps=1e12, mem_capacity_bytes=16e9, l2_bytes=2**22, units=10, unit_name="SM",
        clock_Hz=1e9, launch_overhead_s=5e-6, memory_type="t")
    g = advise(loader(two_branch_model()), gpu, "throughput", max_batch=4,
               precisions=["fp32", "fp16", "bf16"], estimator="roofline")
    assert set(g.table["precision"]) == {"fp32", "fp16"}
    assert set(g.table["intra_threads"].map(lambda v: v is None or math.isnan(v))) == {True}
    assert any("bf16" in n for n in g.notes)


def test_training_mode_marks_batches_that_do_not_fit():
    from dataclasses import replace

    big = advise(loader(two_branch_model()), cpu(units=2), "throughput", max_batch=64,
                 modes=("train",), estimator="roofline").table
    mb = dict(zip(big["batch"], big["memory_MB"], strict=False))
    assert mb[64] > mb[1]  # weights, gradients and Adam state plus activations growing with b
    small = replace(cpu(units=2), mem_capacity_bytes=(mb[1] + mb[64]) / 2 * 1e6)
    advice = advise(loader(two_branch_model()), small, "throughput", max_batch=64,
                    modes=("train",), estimator="roofline")
    assert set(advice.table["mode"]) == {"train"}
    assert (~advice.table["fits"]).any()
    assert advice.table["fits"].any()
    rec = advice.row(advice.recommended)
    assert bool(rec["fits"])
    assert any("do not fit" in r for r in advice.reasons)


def test_bad_arguments():
    hw = cpu()
    with pytest.raises(PredictionError, match="objective"):
        advise(loader(relu_model()), hw, "speed")
    with pytest.raises(PredictionError, match="precision"):
        advise(loader(relu_model()), hw, "latency", precisions=["fp12"])
    with pytest.raises(PredictionError, match="batch"):
        advise(loader(relu_model()), hw, "latency", batch=0)



def test_a_learned_road_without_a_model_says_which_analytical_road_it_took(tmp_path, monkeypatch):
    from roofcast.predictor.advisor import resolve_estimator

    monkeypatch.setenv("ROOFCAST_LEARNED_MODEL", str(tmp_path / "no-model"))
    est, notes = resolve_estimator("auto")
    assert est.name == "time-roofline"
    (note,) = notes
    assert "estimator 'auto' unavailable" in note
    assert note.endswith("used time-roofline")
