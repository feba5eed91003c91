"""Saving a learned model never loses a user's file; bad ``--output`` / ``--store`` paths are
refused before any work, as one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from roofcast.app.cli import main
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned import persistence
from roofcast.predictor.learned.persistence import DEFAULT_DIR, METADATA, listed_files, load, save


@pytest.fixture(scope="module")
def model():
    return load(DEFAULT_DIR)


def entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_save_keeps_the_users_files_and_deletes_only_the_old_models(model, tmp_path):
    out = tmp_path / "out"
    save(model, out)
    own = {p.name for p in listed_files(out)}
    stale = out / "old__family.ubj"          # listed by the old model's metadata only
    meta = json.loads((out / METADATA).read_text())
    meta["models"]["old/family"] = {"key": "old/family", "file": stale.name}
    (out / METADATA).write_text(json.dumps(meta))
    stale.write_bytes(b"old model file")
    (out / "mine.ubj").write_bytes(b"user file")
    (out / "notes.txt").write_text("user notes")
    save(model, out)
    assert entries(out) == own | {"mine.ubj", "notes.txt"}
    assert (out / "mine.ubj").read_bytes() == b"user file"
    assert (out / "notes.txt").read_text() == "user notes"
    assert load(out).models.keys() == model.models.keys()
    assert entries(tmp_path) == {"out"}      # no temp or aside folder left behind


def test_a_user_file_named_like_a_new_model_file_is_kept_beside(model, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / METADATA).write_text('{"mine": true}')  # not a roofcast model's metadata
    save(model, out)
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("out.kept-")]
    assert len(kept) == 1
    assert (kept[0] / METADATA).read_text() == '{"mine": true}'
    load(out)


def test_a_failed_save_leaves_the_old_model_and_deletes_nothing(model, tmp_path, monkeypatch):
    out = tmp_path / "out"
    save(model, out)
    (out / "notes.txt").write_text("user notes")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(m, folder):
        (folder / "partial.ubj").write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(persistence, "_write", broken)
    with pytest.raises(OSError, match="disk full"):
        save(model, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert entries(tmp_path) == {"out"}
    load(out)


@pytest.mark.parametrize("bad", ["/etc/passwd", "/"])
def test_check_output_refuses_files_and_the_root(bad):
    with pytest.raises(PredictionError, match="cannot save a learned model"):
        persistence.check_output(bad)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_check_output_refuses_a_folder_without_write_permission(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(PredictionError, match="not writable"):
            persistence.check_output(locked / "model")
    finally:
        locked.chmod(0o700)


def test_train_refuses_a_bad_output_before_training(tmp_path, monkeypatch, capsys):
    from roofcast.predictor.learned import data

    def no_training(*args, **kwargs):
        raise AssertionError("training data was loaded before --output was checked")

    monkeypatch.setattr(data, "load_sources", no_training)
    a_file = tmp_path / "a_file"
    a_file.write_text("precious")
    for bad in ("/etc/passwd", str(a_file), str(a_file / "sub")):
        assert main(["train", "--quick", "--output", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert "cannot save a learned model" in err, err
    assert a_file.read_text() == "precious"


@pytest.mark.parametrize("store", ["DIR", "/dev/null"])
def test_store_that_is_not_a_file_is_refused(store, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ROOFCAST_DATA_DIR", str(tmp_path / "data"))
    path = str(tmp_path) if store == "DIR" else store
    journal_existed = Path("/dev/null-journal").exists()
    for argv in (["data", "stats", "--store", path], ["data", "list", "--store", path]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert "is not a file" in err, err
    if store == "DIR":
        assert entries(tmp_path) == set()  # no store file, journal or data folder created
    assert Path("/dev/null-journal").exists() == journal_existed
