"""The numpy tree walk predicts what xgboost predicts, bit for bit, and refuses what it cannot
read; a saved learned model reads a family's booster only when it is used."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned import persistence, trees
from roofcast.predictor.learned.trees import TreeEnsemble, load_booster, predict_booster

xgb = pytest.importorskip("xgboost")

DEFAULT = persistence.DEFAULT_DIR


def _rows(ens: TreeEnsemble, n: int, seed: int = 0) -> np.ndarray:
    """Random rows, half of the values exactly on a split of their feature, 5 % missing."""
    rng = np.random.default_rng(seed)
    A = rng.normal(0, 3, (n, len(ens.feature_names)))
    inner = ens.left >= 0
    for j in range(A.shape[1]):
        splits = ens.split[inner & (ens.feature == j)]
        if len(splits):
            on = rng.random(n) < 0.5
            A[on, j] = rng.choice(splits, on.sum())
    A[rng.random(A.shape) < 0.05] = np.nan
    return A


def _xgb_predict(path: Path, A: np.ndarray, names) -> np.ndarray:
    b = xgb.Booster()
    b.load_model(str(path))
    return b.predict(xgb.DMatrix(A, feature_names=list(names)))


def _fit(tmp_path: Path, objective: str = "reg:squarederror") -> Path:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 1]) ** 2
    if objective == "count:poisson":
        y = np.abs(y)
    reg = xgb.XGBRegressor(n_estimators=20, max_depth=4, objective=objective)
    reg.fit(X, y)
    booster = reg.get_booster()
    booster.feature_names = ["a", "b", "c", "d"]
    path = tmp_path / "m.ubj"
    booster.save_model(str(path))
    return path


@pytest.mark.parametrize("name", sorted(p.name for p in DEFAULT.glob("*.ubj")))
def test_shipped_boosters_predict_as_xgboost_bit_for_bit(name):
    ens = load_booster(DEFAULT / name)
    assert isinstance(ens, TreeEnsemble)
    A = _rows(ens, 300)
    got = ens.predict_array(A)
    want = _xgb_predict(DEFAULT / name, A, ens.feature_names)
    assert got.dtype == want.dtype == np.float32
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


def test_a_fresh_model_with_missing_values_predicts_as_xgboost(tmp_path):
    path = _fit(tmp_path)
    ens = load_booster(path)
    assert isinstance(ens, TreeEnsemble)
    assert ens.feature_names == ("a", "b", "c", "d")
    A = _rows(ens, 500, seed=3)
    assert np.array_equal(ens.predict_array(A), _xgb_predict(path, A, ens.feature_names))
    # large batches go to xgboost: the same numbers
    big = np.tile(A, (trees.NUMPY_MAX_ROWS // len(A) + 1, 1))
    assert np.array_equal(predict_booster(ens, big, ens.feature_names),
                          np.tile(ens.predict_array(A), trees.NUMPY_MAX_ROWS // len(A) + 1))


def test_a_model_with_a_link_function_is_left_to_xgboost(tmp_path):
    path = _fit(tmp_path, "count:poisson")
    booster = load_booster(path)
    assert isinstance(booster, xgb.Booster)
    A = np.random.default_rng(0).normal(size=(50, 4))
    assert np.array_equal(predict_booster(booster, A, ("a", "b", "c", "d")),
                          _xgb_predict(path, A, ("a", "b", "c", "d")))


def test_save_model_writes_the_file_back_unchanged(tmp_path):
    ens = load_booster(DEFAULT / "gpu__matmul.ubj")
    ens.save_model(str(tmp_path / "copy.ubj"))
    assert (tmp_path / "copy.ubj").read_bytes() == (DEFAULT / "gpu__matmul.ubj").read_bytes()


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_booster_file_is_refused_in_one_line(tmp_path, damage):
    raw = (DEFAULT / "gpu__matmul.ubj").read_bytes()
    bad = {"truncated": raw[: len(raw) // 2], "garbage": bytes(range(256)) * 8, "empty": b""}
    path = tmp_path / "bad.ubj"
    path.write_bytes(bad[damage])
    assert trees.plain_ensemble(bad[damage]) is None
    with pytest.raises(PredictionError, match="cannot read model file"):
        load_booster(path)


def test_read_ubj_refuses_deep_nesting_and_trailing_bytes():
    with pytest.raises(ValueError, match="nested too deeply"):
        trees.read_ubj(b"[" * 100 + b"]" * 100)
    with pytest.raises(ValueError, match="trailing"):
        trees.read_ubj(b"TT")
    assert trees.read_ubj(b"{L\x00\x00\x00\x00\x00\x00\x00\x01a[$l#L\x00\x00\x00\x00\x00\x00"
                          b"\x00\x02\x00\x00\x00\x07\xff\xff\xff\xff}")["a"].tolist() == [7, -1]


def test_a_saved_model_reads_only_the_families_it_uses(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(DEFAULT, folder)
    (folder / "cpu__recurrent.ubj").write_bytes(b"\x00" * 64)  # damaged, and not used below
    model = persistence.load(folder)
    assert model.models["gpu/matmul"].candidate == "xgboost"
    assert model.models.get("gpu/pooling") is None
    with pytest.raises(PredictionError, match="cannot read model file"):
        model.models["cpu/recurrent"]


def test_a_booster_trained_on_other_features_is_refused_at_load(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(DEFAULT, folder)
    shutil.copy(_fit(tmp_path), folder / "gpu__conv.ubj")
    with pytest.raises(PredictionError, match=r"gpu__conv\.ubj was trained on features"):
        persistence.load(folder)
