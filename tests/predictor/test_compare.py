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
        assert rec["fits"] == p.memory.fits(hw)
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
