"""What-if devices keep their base device's efficiency (``predictor.estimators.whatif``)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.derive import derive, what_if_root
from roofcast.predictor.estimator_registry import make_estimator
from roofcast.predictor.estimators.whatif import _root, efficiency_devices, efficiency_view
from roofcast.predictor.learned.features import DEVICE_FEATURES, learned_features

from .estimator_helpers import features, gemm_row, row

ROWS = [gemm_row(64, 64, 64), gemm_row(4096, 4096, 4096, dtype="fp16", elem=2),
        row("add", "elementwise", "vector", 1e6, 8e6, 4e6),
        row("copy", "data_movement", "data", 0.0, 4e8, 4e8)]


def test_a_derived_device_remembers_its_root_through_a_chain():
    h100 = get_device("h100-sxm")
    once = derive(h100, id="h100-test+bw2", mem_bw_scale=2.0)
    twice = derive(once, id="h100-test+bw2+peak2", peak_scale=2.0)
    assert what_if_root(twice.id) == (twice, h100)
    assert what_if_root("h100-sxm") is None


def test_an_inline_what_if_id_is_found_without_deriving_it_first():
    pair = _root("a100-40gb-sxm:launch_overhead_us=7")
    assert pair is not None
    assert pair[1].id == "a100-40gb-sxm"
    assert pair[0].launch_overhead_s == pytest.approx(7e-6)


@pytest.mark.parametrize("changes", [{"mem_bw_scale": 2.0}, {"peak_scale": 2.0},
                                     {"launch_overhead_us": 0.5, "l2_MB": 100, "units": 200}])
def test_efficiency_view_gives_a_what_if_device_its_base_figures(changes):
    h100 = get_device("h100-sxm")
    what_if = derive(h100, **changes)
    X = features(ROWS, hw=what_if)
    view = efficiency_view(X)
    base = learned_features(features(ROWS, hw=h100))
    got = learned_features(view)
    cols = [*DEVICE_FEATURES, "lg_t_bound", "lg_dispatch_floor", "lg_waves"]
    np.testing.assert_allclose(got[cols].to_numpy(float), base[cols].to_numpy(float))
    assert (view["device"] == what_if.id).all()  # the row still names the what-if device
    assert list(efficiency_devices(X)) == ["h100-sxm"] * len(ROWS)


def test_a_catalog_device_is_left_alone():
    X = features(ROWS, device="h100-sxm")
    assert efficiency_view(X) is X
    assert list(efficiency_devices(X)) == ["h100-sxm"] * len(ROWS)


@pytest.mark.parametrize("base", ["h100-sxm", "a100-40gb-sxm"])
def test_a_derived_device_reusing_a_catalog_id_does_not_shadow_the_catalog_device(
        base, monkeypatch):
    """A variant derived earlier under the catalog id (as a test parameter, at collection time)
    once made every later row of the real device read the variant's figures."""
    monkeypatch.setattr(sys.modules[what_if_root.__module__], "_ROOTS", {})  # variant stays here
    derive(get_device(base), id="h100-sxm", peak_scale=1.5)
    X = features(ROWS, device="h100-sxm")
    assert _root("h100-sxm") is None
    assert efficiency_view(X) is X
    assert list(efficiency_devices(X)) == ["h100-sxm"] * len(ROWS)


@pytest.mark.parametrize("road", ["auto", "learned", "roofline+eff"])
@pytest.mark.parametrize("scale", ["mem_bw_scale", "peak_scale"])
def test_more_bandwidth_or_flops_never_slows_a_kernel(road, scale):
    h100 = get_device("h100-sxm")
    est = make_estimator(road)
    base = est.explain(features(ROWS, hw=h100))
    faster = est.explain(features(ROWS, hw=derive(h100, **{scale: 2.0})))
    assert (faster["time_s"].to_numpy() <= base["time_s"].to_numpy() * (1 + 1e-12)).all()
    assert (faster["time_s"].to_numpy() < base["time_s"].to_numpy()).any()
    if "predictor" in base.columns:  # same source of kernel times as the base device
        assert list(faster["predictor"]) == list(base["predictor"])
