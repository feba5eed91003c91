"""``roofcast data export PATH`` writes only a plain file it replaces atomically: a link (to a
user file), a FIFO (would block forever) or a folder is refused in one line, exit 2, and the
thing named is left as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roofcast.app.cli import main
from tests.hostile.helpers import deadline


def _link(tmp: Path) -> Path:
    (tmp / "victim.csv").write_text("the user's file\n")
    (tmp / "out.csv").symlink_to(tmp / "victim.csv")
    return tmp / "out.csv"


def _dangling(tmp: Path) -> Path:
    (tmp / "out.csv").symlink_to(tmp / "made-by-the-link.csv")
    return tmp / "out.csv"


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "out.csv")
    return tmp / "out.csv"


def _folder(tmp: Path) -> Path:
    (tmp / "out.csv").mkdir()
    (tmp / "out.csv" / "mine.txt").write_text("mine")
    return tmp / "out.csv"


TARGETS = {"link to a user file": _link, "dangling link": _dangling, "fifo": _fifo,
           "folder": _folder}


def _state(tmp: Path) -> dict[str, object]:
    return {str(p.relative_to(tmp)): (p.is_symlink(), p.read_bytes() if p.is_file()
                                      and not p.is_symlink() else None)
            for p in sorted(tmp.rglob("*")) if not p.name.startswith("store")}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(TARGETS))
def test_export_refuses_links_fifos_and_folders(case, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    target = TARGETS[case](work)
    before = _state(work)
    with deadline(30):
        code = main(["data", "export", str(target), "--store", str(tmp_path / "store.sqlite")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(target) in err
    assert _state(work) == before
