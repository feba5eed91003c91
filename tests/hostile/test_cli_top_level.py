"""The command line's top level never shows a traceback: a user error is one line and exit 2,
an unexpected failure one line naming a log that holds the traceback and exit 1, Ctrl-C exit
130, a closed stdout a quiet end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from roofcast.app import cli
from roofcast.app.commands import hw


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFCAST_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def failing(exc: BaseException):
    def run(args):
        raise exc
    return run


def test_an_unexpected_error_is_one_line_and_a_log_with_the_traceback(data_dir, monkeypatch,
                                                                       capsys):
    monkeypatch.setattr(hw, "run_list", failing(RuntimeError("boom in hw")))
    assert cli.main(["hw", "list"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert "roofcast hw: failed unexpectedly (RuntimeError)" in err
    logs = list((data_dir / "logs").glob("crash-*.log"))
    assert len(logs) == 1
    assert str(logs[0]) in err
    text = logs[0].read_text()
    assert "Traceback (most recent call last)" in text
    assert "RuntimeError: boom in hw" in text


def test_the_log_goes_to_the_temp_folder_when_the_data_folder_cannot_be_written(
        tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("ROOFCAST_DATA_DIR", str(blocker))  # logs/ cannot be made inside a file
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(hw, "run_list", failing(KeyError("x")))
    assert cli.main(["hw", "list"]) == 1
    err = capsys.readouterr().err
    logs = list((tmp_path / "tmp").glob("crash-*.log"))
    assert len(logs) == 1
    assert str(logs[0]) in err
    assert "KeyError" in logs[0].read_text()


def test_a_user_error_is_one_line_exit_2(data_dir, capsys):
    assert cli.main(["hw", "show", "no-such-device"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("roofcast hw: error: "), err
    assert not (data_dir / "logs").exists()


def test_ctrl_c_is_exit_130_and_one_line(data_dir, monkeypatch, capsys):
    monkeypatch.setattr(hw, "run_list", failing(KeyboardInterrupt()))
    assert cli.main(["hw", "list"]) == 130
    assert capsys.readouterr().err == "roofcast hw: interrupted\n"


def test_a_closed_pipe_ends_quietly(tmp_path):
    """gpt2's op table (~190 KB) is larger than a pipe holds, so the write meets the closed pipe."""
    roofcast = Path(sys.executable).with_name("roofcast")
    proc = subprocess.run(f"'{roofcast}' inspect gpt2 --format csv | head -c 10",
                          shell=True, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "ROOFCAST_DATA_DIR": str(tmp_path)})
    assert len(proc.stdout) == 10
    assert proc.stderr == "", proc.stderr
