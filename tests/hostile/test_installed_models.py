"""``roofcast models``/``--estimator learned`` with a hostile models folder: a model folder
that is a link to a foreign folder is neither used nor removed (its files stay), and an
``active`` file that is a link, a FIFO, big or not a name is refused without echoing it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofcast.app.cli import main
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned.installed import (
    active_name,
    check_name,
    installed_names,
    models_dir,
)
from roofcast.predictor.learned.persistence import FORMAT, METADATA


@pytest.fixture
def models(tmp_path) -> Path:
    root = models_dir()
    root.mkdir(parents=True)
    return root


def foreign_model(tmp_path: Path) -> Path:
    """A folder outside the models folder that looks like a model (metadata lists x.bin)."""
    folder = tmp_path / "foreign"
    folder.mkdir()
    meta = {"format": FORMAT, "models": {"a/b": {"key": "a/b", "file": "x.bin"}}}
    (folder / METADATA).write_text(json.dumps(meta))
    (folder / "x.bin").write_bytes(b"someone else's data")
    return folder


@pytest.mark.parametrize("command", [["models", "remove", "evil"], ["models", "use", "evil"]])
def test_a_linked_model_folder_is_neither_removed_nor_used(models, tmp_path, capsys, command):
    foreign = foreign_model(tmp_path)
    (models / "evil").symlink_to(foreign)
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "symbolic link" in err
    assert sorted(p.name for p in foreign.iterdir()) == [METADATA, "x.bin"]
    assert "evil" not in installed_names()
    assert not (models / "active").exists()


def _fifo(path: Path) -> None:
    os.mkfifo(path)


ACTIVE = {
    "link to /etc/passwd": lambda p: p.symlink_to("/etc/passwd"),
    "fifo": _fifo,
    "folder": lambda p: p.mkdir(),
    "big": lambda p: p.write_bytes(b"a" * 100_000),
    "not a name": lambda p: p.write_text("root:x:0:0:root:/root:/bin/bash\nline two\n"),
    "control characters": lambda p: p.write_text("\x1b[31mred\n"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(ACTIVE))
def test_a_hostile_active_file_is_refused_without_echo(models, capsys, case):
    ACTIVE[case](models / "active")
    for command in (["models", "list"], ["predict", "resnet50", "--hw", "h100-sxm",
                                         "--estimator", "learned"]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert not any(s in err for s in ("root:x:0", "\x1b", "aaaa"))


def test_use_writes_active_beside_a_planted_link_without_following_it(models, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (models / ".active.tmp").symlink_to(victim)
    (models / "active.tmp").symlink_to(victim)
    (models / "mine").mkdir()
    (models / "mine" / METADATA).write_text("{}")
    (models / "active").symlink_to(victim)
    assert main(["models", "use", "mine"]) == 0
    assert victim.read_text() == "keep"
    assert active_name() == "mine"


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_any_active_file_gives_a_name_or_a_one_line_refusal(models, data):
    """Property: whatever bytes ``active`` holds, ``active_name`` returns a model name (or
    ``default``) or raises a one-line PredictionError that does not repeat the bytes."""
    (models / "active").write_bytes(data)
    try:
        name = active_name()
    except PredictionError as exc:
        message = str(exc)
        assert "\n" not in message
        text = data.decode("utf-8", "replace").strip()
        assert len(text) < 8 or text not in message
        return
    assert name == data.decode().strip()
    assert name == "default" or check_name(name) == name
