"""Per-op estimators: each time equals its formula written out with the device's numbers."""

from __future__ import annotations

import dataclasses
import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import ESTIMATORS, EXPLAIN_COLUMNS, make_estimator
from tests.predictor.estimator_helpers import approx, features, flat_curves, gemm_row, row

# Tesla V100 PCIe 32GB catalog figures: vector fp32 14 TFLOP/s (no fp32 matrix unit), matrix fp16
# 112 TFLOP/s, 900 GB/s, 6 MiB L2, 80 SMs, 5 us launch overhead.
V100_FP32 = 14e12
V100_FP16_TC = 112e12
V100_BW = 900e9
V100_L = 5e-6

GEMM = gemm_row(1024, 1024, 1024)
GEMM_F = 2 * 1024**3
GEMM_B = 3 * 1024 * 1024 * 4
# Conv X[8,64,56,56] * W[64,64,3,3], pad 1 -> Y[8,64,56,56]; implicit GEMM M=8·56·56, N=64, K=64·9
CONV_F = 2 * 8 * 56 * 56 * 64 * 64 * 9
CONV_B = (8 * 64 * 56 * 56 + 64 * 64 * 9) * 4 + 8 * 64 * 56 * 56 * 4
CONV = row("conv", "conv", "matrix", CONV_F, (8 * 64 * 56 * 56 + 64 * 64 * 9) * 4,
           8 * 64 * 56 * 56 * 4, gemm=(1, 8 * 56 * 56, 64, 64 * 9), op_type="Conv")
# Relu on [4096, 4096] fp32: 1 FLOP per element
RELU_F = 4096 * 4096
RELU_B = 2 * 4096 * 4096 * 4
RELU = row("relu", "elementwise", "vector", RELU_F, RELU_B / 2, RELU_B / 2, op_type="Relu")
CASES = [(GEMM, GEMM_F, GEMM_B), (CONV, CONV_F, CONV_B), (RELU, RELU_F, RELU_B)]

#: the analytical estimators and the per-kind default road that composes them (these tests
#: use GPU rows: its GPU part is analytical).
GRAPH_ROADS = [*ESTIMATORS, "best-measured"]


@pytest.mark.parametrize(("wl", "F", "B"), CASES)
def test_roofline_family_formulas(wl, F, B):
    X = features([wl])
    c, m = F / V100_FP32, B / V100_BW
    assert approx(make_estimator("roofline").predict(X), [max(c, m)])
    assert approx(make_estimator("no-overlap").predict(X), [c + m])
    assert approx(make_estimator("time-roofline").predict(X), [max(c, m, V100_L)])


@pytest.mark.parametrize(("wl", "F", "B"), CASES)
def test_roofline_eff_formula_with_flat_curves(tmp_path, wl, F, B):
    X = features([wl])
    eff_c = 0.5 if wl["engine"] == "matrix" else 0.6
    expected = max(F / (V100_FP32 * eff_c), B / (V100_BW * 0.8), V100_L)
    est = make_estimator("roofline+eff", curves_path=flat_curves(tmp_path))
    assert approx(est.predict(X), [expected])


def test_traffic_elementwise_equals_roofline_eff(tmp_path):
    X = features([RELU])
    curves = flat_curves(tmp_path)
    a = make_estimator("traffic", curves_path=curves).predict(X)
    b = make_estimator("roofline+eff", curves_path=curves).predict(X)
    assert approx(a, b)
    assert approx(a, [max(RELU_F / (V100_FP32 * 0.6), RELU_B / (V100_BW * 0.8), V100_L)])


def test_traffic_gemm_single_tile_formula(tmp_path):
    """4096³ fp32 GEMM, one 128x128 tile kernel, no split-K, constant efficiencies."""
    n = 4096
    X = features([gemm_row(n, n, n)])
    est = make_estimator("traffic", curves_path=flat_curves(tmp_path, matrix=0.5, memory=0.8),
                         tiles=((128, 128),), split_k=(1,))
    e = est.explain(X).iloc[0]
    units, l2 = 80, 6 * 2**20
    grid = (n // 128) ** 2  # 1024 tiles
    waves = math.ceil(grid / units)  # 13
    compute = waves * 2 * 128 * 128 * n / (V100_FP32 / units) / 0.5
    a = b = c = n * n * 4
    share = l2 / 1 / 2  # one GEMM in flight, half of L2 per operand
    rb = 1 + (min(n // 128, math.ceil(grid / units)) - 1) * (1 - share / b)  # A re-read factor is 1
    dram = (a + b + c) + b * (rb - 1)
    l2_traffic = a * (n // 128) + b * (n // 128) + c
    expected = max(compute, dram / (V100_BW * 0.8), l2_traffic / (2.5 * V100_BW), V100_L)
    assert approx(e.time_s, expected)
    assert approx(e.waves, waves)
    assert approx(e.wave_efficiency, grid / (waves * units))
    assert approx(e.dram_bytes, dram)
    assert e.bound == "compute"


def test_wave_quantisation_small_gemm(tmp_path):
    """81 tiles on 80 SMs take two waves: twice the time of 80 tiles."""
    est = make_estimator("traffic", curves_path=flat_curves(tmp_path), tiles=((128, 128),),
                         split_k=(1,))
    X = features([gemm_row(128 * 80, 128, 4096), gemm_row(128 * 81, 128, 4096)])
    e = est.explain(X)
    assert list(e.waves) == [1, 2]
    assert e.compute_s.iloc[1] == pytest.approx(2 * e.compute_s.iloc[0])


@pytest.mark.parametrize("name", GRAPH_ROADS)
def test_bound_flips_memory_to_compute_as_batch_grows(name):
    """A 4096x4096 fp16 Linear layer: weights dominate at batch 1, FLOPs at batch 8192."""
    rows = [row(f"b{b}", "matmul", "matrix", 2 * b * 4096 * 4096, (b * 4096 + 4096 * 4096) * 2,
                b * 4096 * 2, "fp16", (1, b, 4096, 4096)) for b in (1, 8, 64, 512, 8192)]
    e = make_estimator(name).explain(features(rows))
    assert e.bound.iloc[0] == "memory"
    assert e.bound.iloc[-1] == "compute"
    first_compute = list(e.bound).index("compute")
    assert all(b == "compute" for b in e.bound.iloc[first_compute:])


@pytest.mark.parametrize("name", ["time-roofline", "roofline+eff", "traffic"])
def test_tiny_ops_are_overhead_bound(name):
    X = features([gemm_row(8, 8, 8), row("add", "elementwise", "vector", 64, 512, 256)])
    e = make_estimator(name).explain(X)
    assert list(e.bound) == ["overhead", "overhead"]
    assert approx(e.time_s, [V100_L, V100_L])


def test_precision_changes_peak_and_bytes():
    fp32 = features([gemm_row(4096, 4096, 4096)])
    fp16 = features([gemm_row(4096, 4096, 4096, dtype="fp16", elem=2)])
    assert fp32.peak_flops_per_s.iloc[0] == V100_FP32
    assert fp16.peak_flops_per_s.iloc[0] == V100_FP16_TC
    r32, r16 = (make_estimator("roofline").explain(x).iloc[0] for x in (fp32, fp16))
    assert r16.compute_s == pytest.approx(r32.compute_s / 8)
    assert r16.memory_s == pytest.approx(r32.memory_s / 2)


def test_fp16_on_p4_falls_back_and_says_so():
    X = features([gemm_row(1024, 1024, 1024, dtype="fp16", elem=2)], device="p4")
    assert X.peak_flops_per_s.iloc[0] == 5.5e12  # P4 vector fp32: no fp16 unit
    assert X.peak_engine.iloc[0] == "vector"
    assert X.peak_dtype.iloc[0] == "fp32"
    assert "fp16" in X.peak_note.iloc[0]
    assert "P4" in X.peak_note.iloc[0]


def _scaled(hw, bw=1.0, peak=1.0):
    return dataclasses.replace(hw, mem_bw_Bps=hw.mem_bw_Bps * bw,
                               peak_flops={k: v * peak for k, v in hw.peak_flops.items()})


@pytest.mark.parametrize("name", GRAPH_ROADS)
@pytest.mark.parametrize("device", ["v100-pcie-32gb", "t4", "p4"])
def test_more_bandwidth_or_flops_never_slower(name, device):
    rows = [gemm_row(m, n, k, batch=b) for m, n, k, b in
            ((64, 64, 64, 1), (1, 4096, 4096, 1), (512, 512, 64, 96), (4096, 4096, 4096, 1),
             (8192, 128, 128, 1), (100, 3000, 7000, 1))] + [CONV, RELU]
    hw = get_device(device)
    est = make_estimator(name)
    for axis in ("bw", "peak"):
        times = [est.predict(features(rows, hw=_scaled(hw, **{axis: s}))) for s in (0.5, 1, 2, 4)]
        for slower, faster in itertools.pairwise(times):
            assert np.all(faster <= slower * (1 + 1e-12)), (axis, faster, slower)


@pytest.mark.parametrize("name", GRAPH_ROADS)
def test_explain_columns_and_interval(name):
    X = features([GEMM, CONV, RELU, gemm_row(8, 8, 8)])
    e = make_estimator(name).fit(X).explain(X)
    assert set(EXPLAIN_COLUMNS) <= set(e.columns)
    assert (e.estimator == name).all()
    assert (e.lower_s <= e.time_s).all()
    assert (e.time_s <= e.upper_s).all()
    assert np.isfinite(e.time_s).all()
    assert (e.time_s > 0).all()
    assert set(e.bound) <= {"compute", "memory", "overhead"}


def test_free_ops_cost_nothing():
    X = features([row("reshape", "data_movement", "free", 0, 0, 0)])
    for name in GRAPH_ROADS:
        assert make_estimator(name).predict(X)[0] == 0.0


def test_unknown_estimator_lists_names():
    with pytest.raises(PredictionError, match=r"roofline.*traffic"):
        make_estimator("magic")


def test_estimator_rejects_raw_workload():
    with pytest.raises(PredictionError, match="featurize"):
        make_estimator("roofline").predict(__import__("pandas").DataFrame([GEMM]))


def test_additive_overhead_mode(tmp_path):
    X = features([RELU, gemm_row(8, 8, 8)])
    c, m = RELU_F / V100_FP32, RELU_B / V100_BW
    t = make_estimator("time-roofline", overhead="additive").predict(X)
    assert approx(t[0], max(c, m) + V100_L)
    with pytest.raises(PredictionError, match="overhead"):
        make_estimator("time-roofline", overhead="sometimes").predict(X)


def test_warm_l2_serves_resident_activations_from_l2(tmp_path):
    """A 4 MiB elementwise op fits V100's 6 MiB L2: its bytes move at L2 bandwidth."""
    small = row("add", "elementwise", "vector", 2**19, 2**21, 2**21)
    X = features([small])
    curves = flat_curves(tmp_path, memory=0.8)
    warm = make_estimator("traffic", curves_path=curves).explain(X).iloc[0]
    cold = make_estimator("traffic", curves_path=curves, warm_l2="none").explain(X).iloc[0]
    assert approx(warm.memory_s, 2**22 / (2.5 * V100_BW))
    assert approx(cold.memory_s, 2**22 / (V100_BW * 0.8))
    assert warm.dram_bytes == 0


def test_parameters_follow_the_scikit_learn_protocol_without_importing_it():
    """get_params/set_params/repr from the constructor signature (nested: ``fallback__x``);
    scikit-learn's clone still rebuilds an estimator from them."""
    from sklearn.base import clone

    est = make_estimator("auto", model_dir="m")
    assert est.get_params()["fallback__overhead"] == "floor"
    est.set_params(fallback__overhead="additive")
    assert est.fallback.overhead == "additive"
    assert repr(est) == "AutoEstimator(fallback=TimeRoofline(overhead='additive'), model_dir='m')"
    copy = clone(est)
    assert copy is not est
    assert copy.get_params()["fallback__overhead"] == "additive"
    with pytest.raises(PredictionError, match="no parameter 'speed'"):
        make_estimator("roofline").set_params(speed=2)


def test_the_prediction_path_does_not_import_scikit_learn():
    code = ("import sys; from roofcast.predictor.simulate import predict_graph; "
            "print('sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
