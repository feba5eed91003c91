"""Every ``--output FILE`` (plan, llm, measure, hw calibrate, as data export) goes through
``app.output_file``: a link (to a user file, or dangling), a FIFO or a folder is refused in one
line with exit 2 before any work, and the thing named is left as it was; a plain path is
written whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofcast.app.cli import main
from tests.hostile.helpers import deadline
from tests.hostile.test_data_export import TARGETS, _state

COMMANDS = {
    "plan": ["plan", "llama-3.1-8b", "--system", "hgx-h100", "--global-batch", "64"],
    "llm": ["llm", "llama-3.1-8b", "--hw", "h100-sxm"],
    "measure": ["measure", "--micro", "gemm", "--quick", "--repeats", "1", "--warmup", "0"],
    "hw calibrate": ["hw", "calibrate", "--quick"],
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(TARGETS))
def test_output_refuses_links_fifos_and_folders(command, case, tmp_path, capsys):
    target = TARGETS[case](tmp_path)
    before = _state(tmp_path)
    with deadline(60):
        code = main([*COMMANDS[command], "--output", str(target)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert str(target) in err
    assert _state(tmp_path) == before


@pytest.mark.timeout(120)
def test_plain_output_path_is_written(tmp_path, capsys):
    out = tmp_path / "plan.csv"
    with deadline(60):
        code = main([*COMMANDS["plan"], "--format", "csv", "--output", str(out)])
    assert code == 0, capsys.readouterr().err
    assert "dp" in out.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["plan.csv"]  # no temporary file left
    assert Path(out).stat().st_mode & 0o777 != 0o600  # created as open() would, not mkstemp's
