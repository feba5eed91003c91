"""compare_devices: per device equal to predict_graph; speedup interval, $ and W per throughput."""

from __future__ import annotations

import math

import pytest

from roofcast.predictor.compare import COMPARE_COLUMNS, compare_devices
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.simulate import predict_graph
from tests.predictor.graph_helpers import batched_chain, priced_devices, toy_device

DEVICES = priced_devices()


@pytest.mark.parametrize("config", [RunConfig(dims={"batch": 8}),
                                    RunConfig(dims={"batch": 2}, mode="train", inter_op=True,
                                              precision="fp16")])
def test_each_row_equals_predict_graph(config):
    df = compare_devices(batched_chain, DEVICES, config, baseline="fast")
    assert list(df.columns) == list(COMPARE_COLUMNS)
    assert list(df["device"]) == ["slow", "fast", "noprice"]
    preds = {hw.id: predict_graph(batched_chain(config.batch), hw, config) for hw in DEVICES}
    base_s = preds["fast"].time_s
    for rec in df.to_dict("records"):
        p, hw = preds[rec["device"]], next(d for d in DEVICES if d.id == rec["device"])
        per_op = p.per_op
        assert rec["time_s"] == pytest.approx(p.time_s, rel=1e-12)
        assert rec["lower_s"] == pytest.approx(per_op["lower_s"].sum(), rel=1e-12)
        assert rec["upper_s"] == pytest.approx(per_op["upper_s"].sum(), rel=1e-12)
        assert rec["speedup"] == pytest.approx(base_s / p.time_s, rel=1e-12)
        base = preds["fast"].per_op  # like over like: both devices at the same bound
        assert rec["speedup_at_lower"] == pytest.approx(
            base["lower_s"].sum() / per_op["lower_s"].sum(), rel=1e-12)
        assert rec["speedup_at_upper"] == pytest.approx(
            base["upper_s"].sum() / per_op["upper_s"].sum(), rel=1e-12)
        assert rec["throughput_samples_per_s"] == pytest.approx(config.batch / p.time_s)
        assert rec["fits"] == p.memory.fits
        assert p.memory.capacity_bytes == hw.mem_capacity_bytes
        by_bound = per_op.groupby("bound")["time_s"].sum()
        for bound in ("compute", "memory", "overhead"):
            assert rec[f"{bound}_bound_s"] == pytest.approx(float(by_bound.get(bound, 0.0)),
                                                            rel=1e-12, abs=1e-300)
        assert rec["dominant_bound"] == by_bound.idxmax()
    assert df.loc[df["device"] == "fast", "speedup"].item() == 1.0


def test_cost_per_throughput_never_invented():
    df = compare_devices(batched_chain, DEVICES, RunConfig(dims={"batch": 8})).set_index("device")
    assert df.loc["slow", "baseline"] == "slow"  # default baseline: the first device
    slow = df.loc["slow"]
    assert slow["usd_per_throughput"] == pytest.approx(1000.0 / slow["throughput_samples_per_s"])
    assert slow["W_per_throughput"] == pytest.approx(100.0 / slow["throughput_samples_per_s"])
    assert math.isnan(df.loc["noprice", "usd_per_throughput"])
    assert math.isnan(df.loc["noprice", "W_per_throughput"])
    # 4e6 B of weights + 8000 B per sample at batch 8 = 4.064e6 B > 4.05e6 B
    assert not df.loc["noprice", "fits"]


def test_baseline_not_among_the_devices_is_a_user_error():
    with pytest.raises(PredictionError, match="not among"):
        compare_devices(batched_chain, DEVICES[:2], RunConfig(dims={"batch": 1}),
                        baseline=toy_device("other"))


# ------------------------------------------------------------------ physical speedup bounds
class _Favouring:
    """An estimator that gives one device a 100x better efficiency than the others: the kind
    of prediction the bounds must catch."""

    name = "favouring"

    def __init__(self, device: str) -> None:
        from roofcast.predictor.estimators.roofline import TimeRoofline

        self.device, self.inner = device, TimeRoofline()

    def explain(self, X):
        ex = self.inner.explain(X)
        fav = (X["device"] == self.device).to_numpy()
        for c in ("time_s", "lower_s", "upper_s"):
            ex.loc[fav, c] = ex.loc[fav, c] / 100.0
        return ex


@pytest.mark.parametrize("estimator", ["roofline", "time-roofline", "traffic"])
def test_speedup_lies_within_the_physical_bounds_of_each_estimator(estimator):
    df = compare_devices(batched_chain, DEVICES, RunConfig(dims={"batch": 8}), estimator,
                         baseline="slow").set_index("device")
    assert df["within_bounds"].all()
    assert df["same_road"].all()
    assert (df["speedup_min"] <= df["speedup"] * (1 + 1e-9)).all()
    assert (df["speedup"] <= df["speedup_max"] * (1 + 1e-9)).all()
    fast = df.loc["fast"]
    # 'fast' has 3x the bandwidth and 4-5x the peaks of 'slow' (same dtype/engine per row)
    assert fast["bandwidth_ratio"] == pytest.approx(3.0)
    assert 4.0 <= fast["compute_ratio"] <= 5.0
    # 'fast' launches in 2 us, 'slow' in 1: no row of 'fast' is faster than max(ratios)
    assert fast["speedup_max"] <= 5.0 * (1 + 1e-9)
    assert fast["speedup_min"] == pytest.approx(0.5, rel=0.5)
    assert df.loc["slow", ["speedup_min", "speedup_max"]].tolist() == [1.0, 1.0]
    assert df.loc["slow", "road"] == f"{estimator} 100%"


def test_a_speedup_beyond_the_hardware_is_flagged_never_silent():
    df = compare_devices(batched_chain, DEVICES, RunConfig(dims={"batch": 8}),
                         _Favouring("fast"), baseline="slow").set_index("device")
    fast = df.loc["fast"]
    assert fast["speedup"] > fast["speedup_max"]
    assert not fast["within_bounds"]
    assert "fast: predicted speedup" in fast["peak_notes"]
    assert "outside what its hardware allows over slow" in fast["peak_notes"]
    assert df.loc["noprice", "within_bounds"]
    assert "predicted speedup" not in df.loc["noprice", "peak_notes"]


@pytest.mark.parametrize("batch", [1, 64])
@pytest.mark.parametrize("estimator", ["time-roofline", "auto"])
def test_resnet50_training_comparison_is_one_road_within_bounds(batch, estimator):
    """The issue's acceptance: `roofcast compare resnet50 --hw a100-40gb-pcie,h100-sxm,b200
    --mode train --precision fp16` (batch 64 too): every ratio within the compute/bandwidth
    bounds, all devices by the same road."""
    import roofcast

    model = roofcast.load_model("resnet50")
    df = compare_devices(model.graph_at, ["a100-40gb-pcie", "h100-sxm", "b200"],
                         RunConfig(dims={"batch": batch}, precision="fp16", mode="train"),
                         estimator).set_index("device")
    assert df["within_bounds"].all(), df[["speedup", "speedup_min", "speedup_max"]]
    assert df["same_road"].all()
    families = [{part.rsplit(" ", 1)[0].split(" (")[0] for part in road.split(" + ")}
                for road in df["road"]]
    assert all(f == families[0] for f in families)
    b200 = df.loc["b200"]
    assert b200["speedup"] <= max(b200["compute_ratio"], b200["bandwidth_ratio"])
    assert b200["speedup"] >= 1.0
    if estimator == "auto":  # learned on every device: the B200 by transfer, not a roofline
        assert df["road"].str.startswith("learned").all()
        assert "learned (transferred)" in b200["road"]
