"""The analytical estimators' registry and ``best-measured``, which times each device kind's rows
with the road (analytical or learned) named for that kind."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from roofcast.predictor.best_measured import ByKind
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import estimator_names
from roofcast.predictor.estimators import ESTIMATORS
from roofcast.predictor.estimators.registry import register
from roofcast.predictor.estimators.roofline import NoOverlap, Roofline
from tests.predictor.estimator_helpers import features, gemm_row


def test_each_estimator_is_registered_once_under_its_name():
    assert [cls.name for cls in ESTIMATORS.values()] == list(ESTIMATORS)
    assert list(ESTIMATORS) == ["roofline", "no-overlap", "time-roofline", "roofline+eff",
                                "traffic"]
    assert estimator_names() == (*ESTIMATORS, "best-measured", "learned", "auto",
                                 "engine-tables")
    register(Roofline)  # the same class again: no change
    assert ESTIMATORS["roofline"] is Roofline


def test_a_taken_name_is_refused():
    impostor = type("Impostor", (NoOverlap,), {"name": "roofline"})
    with pytest.raises(ValueError, match="'roofline' is taken by Roofline"):
        register(impostor)
    assert ESTIMATORS["roofline"] is Roofline


def _mixed() -> pd.DataFrame:
    """GPU, CPU, GPU rows (kinds interleaved, so putting rows back in order is tested)."""
    gpu = features([gemm_row(512, 512, 512), gemm_row(64, 4096, 64)])
    cpu = features([gemm_row(256, 256, 256)], device="epyc-9755")
    return pd.concat([gpu.iloc[:1], cpu, gpu.iloc[1:]], ignore_index=True)


def test_each_kind_is_timed_by_its_road_in_row_order():
    X = _mixed()
    out = ByKind({"gpu": "roofline", "cpu": "no-overlap"}).explain(X)
    assert list(out["road_part"]) == ["roofline", "no-overlap", "roofline"]
    assert set(out["estimator"]) == {"best-measured"}
    gpu_rows, cpu_rows = [0, 2], [1]
    assert np.allclose(out["time_s"].to_numpy()[gpu_rows],
                       Roofline().predict(X.iloc[gpu_rows]))
    assert np.allclose(out["time_s"].to_numpy()[cpu_rows], NoOverlap().predict(X.iloc[cpu_rows]))


def test_unnamed_kinds_take_the_star_road():
    out = ByKind({"*": "no-overlap"}).explain(_mixed())
    assert list(out["road_part"]) == ["no-overlap"] * 3


@pytest.mark.parametrize("road", ["best-measured", "nonsense"])
def test_a_road_that_is_no_other_estimator_is_refused(road):
    with pytest.raises(PredictionError, match=r"road '.*' is not an estimator of another name "
                       r"\(roofline, no-overlap, time-roofline, roofline\+eff, traffic, learned, "
                       r"auto\)$"):
        ByKind({"gpu": road}).explain(_mixed())


def test_a_learned_road_times_its_kind_and_summarizes_it():
    """A learned part (the shipped model): its rows equal the learned estimator's own, its
    summary is the learned one; the analytical part's kind summarizes to nothing."""
    from roofcast.predictor.estimator_registry import make_estimator

    X = _mixed()
    by = ByKind({"cpu": "auto", "gpu": "roofline"})
    out = by.explain(X)
    assert list(out["road_part"]) == ["roofline", "auto", "roofline"]
    auto = make_estimator("auto").explain(X.iloc[[1]])
    assert out["time_s"].iloc[1] == pytest.approx(auto["time_s"].iloc[0])
    assert by.road_estimator("cpu") is by.road_estimator("cpu")  # built once
    assert "e2e_s" in by.summarize(out.iloc[[1]], "cpu")
    assert by.summarize(out.iloc[[0, 2]], "gpu") == {}


def test_a_learned_road_without_its_model_is_its_fallback_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFCAST_LEARNED_MODEL", str(tmp_path / "no-model"))
    X = _mixed()
    by = ByKind({"cpu": "auto", "gpu": "roofline"})
    out = by.explain(X)
    assert list(out["road_part"]) == ["roofline", "time-roofline", "roofline"]
    (note,) = by.summarize(out.iloc[[1]], "cpu")["fallbacks"]
    assert note.startswith("best-measured road 'auto' unavailable (no learned model at ")
    assert note.endswith("; used time-roofline")
