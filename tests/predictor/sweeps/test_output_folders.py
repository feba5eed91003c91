"""Output folders: roofcast replaces only the files its manifest lists; anything else in the
folder, a marker without a valid manifest, a link as the folder or the working directory is
refused with the reason, and nothing the user owns is deleted or written through."""

from __future__ import annotations

import json
import os

import pytest

from roofcast.predictor.sweeps import output
from roofcast.predictor.sweeps.output import (
    MANIFEST_KEY,
    MARKER,
    DatasetWriter,
    SweepOutputError,
    check_folder,
    read_dataset,
    write_dataset,
)


def _entries(folder):
    return sorted(p.name for p in folder.iterdir())


def test_marker_lists_the_parts_it_wrote(result, tmp_path, monkeypatch):
    monkeypatch.setattr(output, "ROWS_PER_PART", 5)
    folder = write_dataset(result, tmp_path / "out")
    meta = json.loads((folder / MARKER).read_text())
    assert meta[MANIFEST_KEY] == [f"part-{i:05d}.parquet" for i in range(4)]
    assert _entries(folder) == sorted([MARKER, *meta[MANIFEST_KEY]])


def test_a_stray_marker_does_not_make_a_folder_replaceable(result, tmp_path):
    """The issue's case: ``{}`` as the marker beside the user's notes."""
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / MARKER).write_text("{}")
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(SweepOutputError, match="without a valid manifest"):
        write_dataset(result, folder)
    assert (folder / "notes.txt").read_text() == "mine"
    assert _entries(tmp_path) == ["d"]  # no temporary folder left


@pytest.mark.parametrize("marker", [
    b"not json", b"[]", b'{"files": "part-00000.parquet"}', b'{"files": ["../x"]}',
    b'{"files": ["notes.txt"]}', b'{"files": [1]}', b"[" * 5000 + b"]" * 5000, b"\xff\xfe",
])
def test_a_marker_without_a_valid_manifest_is_refused(result, tmp_path, marker):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / MARKER).write_bytes(marker)
    with pytest.raises(SweepOutputError, match=MARKER) as err:
        write_dataset(result, folder)
    assert "\n" not in str(err.value)
    assert (folder / MARKER).read_bytes() == marker


def test_files_added_to_an_earlier_sweep_are_refused_and_kept(result, tmp_path):
    folder = write_dataset(result, tmp_path / "out")
    (folder / "analysis.ipynb").write_text("notebook")
    (folder / "sub").mkdir()
    with pytest.raises(SweepOutputError, match=r"2 other entries .*'analysis.ipynb'"):
        write_dataset(result, folder)
    assert (folder / "analysis.ipynb").read_text() == "notebook"
    # a manifest name that is not a regular file (a link to the user's file) is foreign too
    (folder / "analysis.ipynb").unlink()
    (folder / "sub").rmdir()
    part = folder / "part-00000.parquet"
    part.unlink()
    mine = tmp_path / "mine.txt"
    mine.write_text("keep")
    part.symlink_to(mine)
    with pytest.raises(SweepOutputError, match=r"part-00000\.parquet"):
        write_dataset(result, folder)
    assert mine.read_text() == "keep"


def test_an_earlier_sweep_is_replaced_file_by_file(result, tmp_path):
    folder = write_dataset(result, tmp_path / "out")
    first = (folder / "part-00000.parquet").stat().st_ino
    write_dataset(result, folder)
    assert (folder / "part-00000.parquet").stat().st_ino != first
    assert _entries(tmp_path) == ["out"]
    assert len(read_dataset(folder)) == len(result.cells)


def test_a_file_slipped_in_during_the_write_is_kept(result, tmp_path, monkeypatch):
    """Between the check and the swap a user file appears: it survives in the old folder."""
    folder = write_dataset(result, tmp_path / "out")
    real = output.check_folder
    calls = []

    def late_file(path):
        files = real(path)
        calls.append(path)
        if len(calls) == 2:  # the check just before the swap
            (path / "late.txt").write_text("late")
        return files

    monkeypatch.setattr(output, "check_folder", late_file)
    with pytest.warns(UserWarning, match="kept in"):
        write_dataset(result, folder)
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(".out.old-")]
    assert len(kept) == 1
    assert _entries(kept[0]) == ["late.txt"]


def test_link_as_output_is_refused_and_never_replaced(result, tmp_path):
    target = tmp_path / "real"
    target.mkdir()
    link = tmp_path / "l"
    link.symlink_to(target)
    for given in (link, f"{link}/"):
        with pytest.raises(SweepOutputError, match="symbolic link"):
            DatasetWriter(given)
    assert link.is_symlink()
    assert _entries(tmp_path) == ["l", "real"]


@pytest.mark.parametrize("given", [".", "..", "sub/..", "~"])
def test_working_directory_home_and_parents_are_refused(tmp_path, monkeypatch, given):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep.txt").write_text("keep")
    with pytest.raises(SweepOutputError) as err:
        check_folder(os.path.expanduser(given))
    assert "working directory" in str(err.value) or "not empty" in str(err.value)
    assert (tmp_path / "keep.txt").read_text() == "keep"


def test_an_empty_folder_is_used(result, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    assert check_folder(folder) == []
    write_dataset(result, folder)
    assert len(read_dataset(folder)) == len(result.cells)
