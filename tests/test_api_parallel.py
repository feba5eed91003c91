"""The multi-device API (``roofcast.systems/system/predict(system=...)/plan``) through
``roofcast.parallel_api``: real systems from the catalog, the real engine and plan search, and
the engine's tiny test source (``tests/predictor/parallel/engine_helpers.FakeSource``) until a
model source is asked for by name."""

from __future__ import annotations

import math

import pytest

import roofcast
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.parallel.types import ParallelPrediction
from tests.predictor.parallel.engine_helpers import FakeSource


def test_systems_lists_the_catalog_with_devices_as_nodes_times_per_node():
    df = roofcast.systems()
    assert {"hgx-h100", "dgx-a100", "hgx-h100-x4", "rtx4090-2-pcie"} <= set(df["id"])
    assert (df["devices"] == df["nodes"] * df["devices_per_node"]).all()
    row = df.set_index("id").loc["hgx-h100-x4"]
    assert (row["devices"], row["device"], row["fabric"]) == (32, "h100-sxm", "nvswitch")
    assert row["nic_GBps_per_node"] == row["nic_count_per_node"] * row["nic_GBps"]


def test_system_takes_ids_and_what_ifs_and_names_close_ids_when_unknown():
    assert roofcast.system("hgx-h100:nodes=4").n_devices == 32
    with pytest.raises(HardwareSpecError, match="hgx-h100"):
        roofcast.system("hgx-h10")


def test_predict_with_a_system_returns_one_step_whose_parts_sum_to_it():
    pred = roofcast.predict(FakeSource(), system="hgx-h100", tp=2, pp=2, micro_batches=4,
                            global_batch=64, mode="train")
    assert isinstance(pred, ParallelPrediction)
    assert (pred.plan.dp, pred.plan.tp, pred.plan.pp, pred.micro_batch) == (2, 2, 2, 8)
    parts = pred.compute_s + pred.exposed_comm_s + pred.bubble_s + pred.optimizer_s
    assert math.isclose(parts, pred.step_s, rel_tol=1e-9)
    assert pred.comm_s_by_group["tp"] > 0
    assert pred.bubble_s > 0
    assert pred.lower_s <= pred.step_s <= pred.upper_s


def test_hw_with_devices_is_the_same_as_an_equivalent_system():
    """8 x h100-sxm built from the device is an NVSwitch box like hgx-h100: same plan, close
    step (the fabric figures come from the device's catalog links)."""
    a = roofcast.predict(FakeSource(), system="hgx-h100", tp=8, global_batch=8, mode="train")
    b = roofcast.predict(FakeSource(), "h100-sxm", devices=8, tp=8, global_batch=8,
                         mode="train")
    assert b.plan == a.plan
    assert b.device == a.device == "h100-sxm"
    assert math.isclose(a.compute_s, b.compute_s, rel_tol=1e-9)


def test_default_global_batch_is_one_sample_per_micro_batch_and_dp_fills_the_devices():
    pred = roofcast.predict(FakeSource(), system="hgx-h100", tp=2, micro_batches=2)
    assert pred.plan.dp == 4
    assert pred.global_batch == 8
    assert pred.micro_batch == 1
    assert pred.mode == "infer"  # as roofcast.predict on one device


@pytest.mark.parametrize(("kw", "match"), [
    ({"tp": 3}, "tp=3"),                                   # heads 8, devices 8
    ({"tp": 2, "pp": 3}, "pp=3"),
    ({"global_batch": 12, "tp": 1}, "12"),                 # dp 8 does not divide 12
    ({"system": "hgx-h100", "hw": "h100-sxm"}, "not both"),
    ({"system": "no-such-system"}, "no-such-system"),
    ({"batch": 8}, "global_batch"),
])
def test_bad_plans_and_placements_are_refused_naming_the_cause(kw, match):
    kw = {"system": "hgx-h100", **kw}
    if "hw" in kw:
        hw = kw.pop("hw")
        call = lambda: roofcast.predict(FakeSource(), hw, **kw)  # noqa: E731
    else:
        call = lambda: roofcast.predict(FakeSource(), **kw)  # noqa: E731
    with pytest.raises((PredictionError, HardwareSpecError), match=match):
        call()


def test_plan_ranks_fitting_plans_first_by_step_time():
    search = roofcast.plan(FakeSource(), "hgx-h100", global_batch=64)
    table = search.table
    assert list(table["rank"]) == list(range(1, len(table) + 1))
    fits = table[table["fits"]]
    assert len(fits)
    assert fits["step_s"].is_monotonic_increasing
    assert search.best is not None
    assert search.best.step_s == fits["step_s"].iloc[0]
    assert (table["dp"] * table["tp"] * table["pp"] == 8).all()


def test_plan_that_fits_nowhere_has_no_best_and_the_closest_is_over_by_its_excess():
    search = roofcast.plan(FakeSource(d=65536), "hgx-h100", global_batch=64)
    assert search.best is None
    assert not search.table["fits"].any()
    first = search.table.iloc[0]
    assert first["over_bytes"] == search.table["over_bytes"].min() > 0
    assert math.isclose(first["over_bytes"], first["memory_bytes"] - first["capacity_bytes"])


def test_plan_needs_a_global_batch_for_training_and_a_known_mode():
    with pytest.raises(PredictionError, match="global_batch"):
        roofcast.plan(FakeSource(), "hgx-h100")
    with pytest.raises(PredictionError, match="mode"):
        roofcast.plan(FakeSource(), "hgx-h100", global_batch=8, mode="fly")


def test_model_kind_routes_llm_names_configs_and_onnx_models():
    from roofcast.parallel_api import model_kind

    assert model_kind("llama-3.1-70b") == "llm"
    assert model_kind("resnet50") == "graph"
    assert model_kind("gpt2") == "graph"          # the zoo's ONNX wins a shared name
    assert model_kind(FakeSource()) == "source"
    with pytest.raises(PredictionError, match="no zoo model"):
        model_kind("no-such-model-anywhere")
