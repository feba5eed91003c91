"""A user's learned model layers on the shipped base: the families and devices it covers use it,
the rest the base (never the analytical road where the base has a model), and the output says
which rows fell back."""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.features import featurize
from roofcast.predictor.learned import persistence
from roofcast.predictor.learned.estimator import LearnedEstimator
from roofcast.predictor.learned.features import learned_features
from roofcast.predictor.learned.installed import install
from roofcast.predictor.learned.layered import (
    LayeredModel,
    coverage,
    fallback_notes,
    layer,
)
from roofcast.predictor.learned.ood import DEVICE_DISTANCE
from roofcast.predictor.learned.training import train
from tests.predictor.learned_helpers import synthetic_set, workload

USER_DEVICES = ("t4", "v100-pcie-32gb")


@pytest.fixture(scope="module")
def user():
    ts = synthetic_set(n_gemm=40, n_vec=40, devices=USER_DEVICES)
    return train(ts, quick=True).model


@pytest.fixture(scope="module")
def base():
    return persistence.load()


def rows(device: str):
    w = workload(np.random.default_rng(5), 10, 10)
    return featurize(w, get_device(device), RunConfig())


def test_a_covered_device_takes_the_user_layer_the_rest_the_base(user, base):
    model = layer(base, user, "mine")
    assert isinstance(model, LayeredModel)
    own = model.explain(rows("t4"), mode="learned")
    work = own["bound_s"] > 0
    assert own.loc[work, "predictor"].str.contains("@mine:").all()
    X = rows("b200")  # a device far from the user's two
    dist, _ = user.devices["gpu"].distance(learned_features(X))
    assert (dist > DEVICE_DISTANCE).all()
    far = model.explain(X, mode="learned")
    labels = far.loc[far["bound_s"] > 0, "predictor"]
    assert labels.str.startswith("learned:gpu/").all()
    assert not labels.str.contains("@").any()
    assert far["time_s"].to_numpy() == pytest.approx(
        base.explain(X, mode="learned")["time_s"].to_numpy())


def test_a_kind_the_user_never_measured_keeps_the_base(user, base):
    X = rows("xeon-8480plus")
    layered = layer(base, user, "mine").explain(X, mode="auto")
    assert layered["time_s"].to_numpy() == pytest.approx(
        base.explain(X, mode="auto")["time_s"].to_numpy())
    assert not layered["predictor"].str.startswith("analytical").all()


def test_fallback_notes_name_the_family_and_the_road(user, base):
    model = layer(base, user, "mine")
    X, near = rows("b200"), rows("t4")
    notes = fallback_notes(X.join(model.explain(X, mode="learned")), "mine")
    assert any("gpu matmul" in n and "shipped base model" in n for n in notes)
    assert fallback_notes(near.join(model.explain(near, mode="learned")), "mine") == ()


def test_the_active_installed_model_is_layered_and_explicit_folders_are_not(user):
    folder = install(user, "mine")
    est = LearnedEstimator()
    assert isinstance(est.model(), LayeredModel)
    assert est.model().layer == "mine"
    assert not isinstance(LearnedEstimator(model_dir=folder).model(), LayeredModel)
    summary = est.summarize(rows("b200").join(est.explain(rows("b200"))), "gpu")
    assert summary["fallbacks"]


def test_coverage_lists_kind_runtime_family_and_rows(user, tmp_path):
    folder = persistence.save(user, tmp_path / "m")
    cov = coverage(json.loads((folder / "metadata.json").read_text()))
    assert set(cov["family"]) == {"matmul", "elementwise"}
    assert (cov["kind"] == "gpu").all()
    assert (cov["runtime"] == "pytorch-eager").all()
    assert (cov["rows"] > 0).all()
