"""predictor.learned.extend: a family trained alone joins a saved model on the base's roads,
the base's other families untouched."""

from __future__ import annotations

import numpy as np
import pytest

from roofcast.predictor.learned import persistence
from roofcast.predictor.learned.extend import extended, primary_of
from roofcast.predictor.learned.training import train
from tests.predictor.learned_helpers import synthetic_set


@pytest.fixture(scope="module")
def base_and_moe():
    ts = synthetic_set()
    fam = ts.X["family"].to_numpy()
    base = train(ts.subset(fam == "elementwise"), candidates=("xgboost",), quick=True).model
    moe = ts.subset(fam == "matmul")
    moe.X["family"] = "moe"  # a family the base lacks, trained alone on the base's roads
    added = train(moe, candidates=("xgboost",), quick=True, primary=primary_of(base))
    return base, added


def test_the_added_family_joins_and_the_others_stay_the_bases(base_and_moe, tmp_path):
    base, added = base_and_moe
    model = extended(base, added)
    assert set(model.models) == set(base.models) | {"gpu/moe"}
    assert set(base.models) == {"gpu/elementwise"}
    assert model.models["gpu/elementwise"] is base.models["gpu/elementwise"]
    assert model.runtimes() == base.runtimes()  # the base's roads: the new key is reachable
    (ext,) = model.meta["extensions"]
    assert ext["keys"] == ["gpu/moe"]
    assert ext["rows"] == len(added.ts)
    keys = [r["key"] for r in model.meta["validation"]["per_family"]]
    assert sorted(keys) == ["gpu/elementwise", "gpu/moe"]
    back = persistence.load(persistence.save(model, tmp_path / "m"))
    X = added.ts.X
    np.testing.assert_allclose(back.explain(X)["time_s"], model.explain(X)["time_s"])
    assert set(back.explain(X)["predictor"]) == {"learned:gpu/moe:xgboost"}


def test_a_family_trained_alone_takes_the_primary_road_it_is_given(base_and_moe):
    base, added = base_and_moe
    assert primary_of(base) == {"gpu": base.runtimes()["gpu"]}
    assert set(added.model.models) == {"gpu/moe"}
