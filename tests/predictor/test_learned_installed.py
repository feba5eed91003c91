"""Installed learned models (``predictor.learned.installed``) and how ``model_folder`` picks one:
explicit folder > ``$ROOFCAST_LEARNED_MODEL`` > the active installed model > the shipped one."""

from __future__ import annotations

import json

import pytest

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned import installed
from roofcast.predictor.learned.estimator import MODEL_ENV, model_folder
from roofcast.predictor.learned.persistence import DEFAULT_DIR, METADATA, load


@pytest.fixture(scope="module")
def shipped():
    return load(DEFAULT_DIR)


def test_install_makes_the_model_active_and_model_folder_follows(shipped, tmp_path,
                                                                monkeypatch):
    assert installed.active_name() == "default"
    assert model_folder() == DEFAULT_DIR
    folder = installed.install(shipped, "mine")
    assert folder == installed.models_dir() / "mine"
    assert installed.active_name() == "mine"
    assert model_folder() == folder
    assert load(folder).models.keys() == shipped.models.keys()
    # the environment variable still overrides, an explicit folder overrides both
    other = tmp_path / "other"
    monkeypatch.setenv(MODEL_ENV, str(other))
    assert model_folder() == other
    assert model_folder(tmp_path) == tmp_path
    monkeypatch.delenv(MODEL_ENV)
    installed.use("default")
    assert model_folder() == DEFAULT_DIR
    assert installed.installed_names() == ["mine"]


def test_reinstalling_a_name_replaces_it_and_leaves_no_temporary_folder(shipped):
    installed.install(shipped, "m1")
    first = (installed.models_dir() / "m1" / METADATA).read_text()
    installed.install(shipped, "m1", activate=False)
    assert (installed.models_dir() / "m1" / METADATA).read_text() == first
    assert sorted(p.name for p in installed.models_dir().iterdir()) == ["active", "m1"]
    assert installed.active_name() == "m1"


def test_remove_deletes_only_listed_files_and_returns_to_the_default(shipped):
    folder = installed.install(shipped, "gone")
    (folder / "my_notes.txt").write_text("keep me")
    listed = installed.model_files(folder)
    meta = json.loads((folder / METADATA).read_text())
    n_files = sum(1 for d in meta["models"].values() if "file" in d)
    assert len(listed) == n_files + 1
    deleted = installed.remove("gone")
    assert sorted(deleted) == sorted(listed)
    assert sorted(p.name for p in folder.iterdir()) == ["my_notes.txt"]
    assert installed.active_name() == "default"
    assert installed.installed_names() == []
    (folder / "my_notes.txt").unlink()
    installed.install(shipped, "empty")
    installed.remove("empty")
    assert not (installed.models_dir() / "empty").exists()


def test_user_errors_say_what_to_do(shipped):
    with pytest.raises(
        PredictionError, match="no installed learned model 'nope'; installed: default"
    ):
        installed.use("nope")
    with pytest.raises(PredictionError, match="cannot be removed"):
        installed.remove("default")
    for bad in ("default", "../x", ".hidden", "a b", ""):
        with pytest.raises(PredictionError, match="not allowed"):
            installed.check_name(bad)
    installed.install(shipped, "vanishing")
    installed.remove("vanishing")
    installed.models_dir().joinpath("active").write_text("vanishing\n")
    with pytest.raises(PredictionError, match="active learned model 'vanishing' is not installed"):
        model_folder()


def test_list_table_describes_the_shipped_and_installed_models(shipped):
    installed.install(shipped, "copy")
    t = installed.list_table().set_index("name")
    assert list(t.index) == ["default", "copy"]
    assert t.loc["copy", "active"]
    assert not t.loc["default", "active"]
    pooled = {r["kind"]: r["learned_median_ape_pct"]
              for r in shipped.meta["validation"]["per_op_pooled"]}
    assert t.loc["default", "gpu_op_median_ape_pct"] == pooled["gpu"]
    assert t.loc["default", "rows"] == shipped.meta["rows"]
