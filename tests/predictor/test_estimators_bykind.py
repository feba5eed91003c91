"""The analytical estimators' registry and ``best-measured``, which times each device kind's rows
with the road the registry holds under that kind's name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators import ESTIMATORS
from roofcast.predictor.estimators.bykind import ByKind
from roofcast.predictor.estimators.registry import register
from roofcast.predictor.estimators.roofline import NoOverlap, Roofline
from tests.predictor.estimator_helpers import features, gemm_row


def test_each_estimator_is_registered_once_under_its_name():
    assert [cls.name for cls in ESTIMATORS.values()] == list(ESTIMATORS)
    assert list(ESTIMATORS) == ["roofline", "no-overlap", "time-roofline", "roofline+eff",
                                "traffic", "best-measured"]
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


@pytest.mark.parametrize("road", ["best-measured", "learned", "nonsense"])
def test_a_road_that_is_no_other_analytical_estimator_is_refused(road):
    with pytest.raises(PredictionError, match=r"'gpu' devices is .*\(roofline, no-overlap, "
                       r"time-roofline, roofline\+eff, traffic\)$"):
        ByKind({"gpu": road}).explain(_mixed())
