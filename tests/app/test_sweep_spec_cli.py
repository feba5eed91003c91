"""``roofcast sweep SPEC.toml``: the dataset, the summary and Pareto tables, the progress bar,
and one-line user errors (exit 2); the old ``roofcast sweep MODEL --hw`` form is untouched."""

from __future__ import annotations

import json

import pytest

from roofcast.app.cli import main
from roofcast.predictor.sweeps.output import read_dataset
from tests.predictor.sweeps.helpers import SMALL, write_spec


@pytest.fixture
def spec_path(tmp_path):
    return write_spec(tmp_path / "spec", SMALL)


def test_spec_sweep_writes_dataset_and_prints_tables(spec_path, tmp_path, capsys):
    out = tmp_path / "cells"
    assert main(["sweep", str(spec_path), "--output", str(out), "--format", "json",
                 "--cells-per-task", "4"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["cells"] == 16
    assert doc["errors"] == 4
    assert doc["scheduler"] == "local"
    assert {r["device"] for r in doc["summary"]} == {"h100-sxm", "a100-80gb-sxm", "epyc-9654",
                                                     "no-such-device"}
    bad = next(r for r in doc["summary"] if r["device"] == "no-such-device")
    assert bad["errors"] == 4
    assert doc["pareto"]
    assert all(r["model"] == "mlp.onnx" for r in doc["pareto"])
    cells = read_dataset(out)
    assert len(cells) == 16
    meta = json.loads((out / "_roofcast_sweep.json").read_text())
    assert meta["spec"]["devices"][-1] == "no-such-device"
    assert meta["cells"] == 16
    assert "16/16 cells 100%" in captured.err
    assert "0/16 cells" in captured.err


def test_table_format_default_output_folder(spec_path, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", str(spec_path)]) == 0
    text = capsys.readouterr().out
    assert "== summary ==" in text
    assert "== pareto ==" in text
    assert len(read_dataset(tmp_path / "small.parquet")) == 16


@pytest.mark.parametrize(("argv", "message"), [
    (["--hw", "t4"], "--hw is for `roofcast sweep MODEL`"),
    (["--scheduler", "nope:1"], "unknown scheduler 'nope'"),
    (["--batches", "8"], "--batches: only for `roofcast sweep MODEL`"),
    (["--estimator", "roofline", "--inter-op"], "--inter-op, --estimator: only for"),
])
def test_spec_user_errors_one_line(spec_path, capsys, argv, message):
    assert main(["sweep", str(spec_path), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_spec_and_bad_output_exit_2(tmp_path, capsys):
    bad = write_spec(tmp_path, "[sweep]\nmodels=['resnet50']\ndevices=[]")
    assert main(["sweep", str(bad)]) == 2
    assert "the grid is empty" in capsys.readouterr().err
    good = write_spec(tmp_path, SMALL, name="good.toml")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x.txt").write_text("x")
    assert main(["sweep", str(good), "--output", str(taken)]) == 2
    err = capsys.readouterr().err
    assert "non-empty folder" in err
    assert "cells" not in err  # refused before the sweep ran (no progress bar)


def test_model_form_still_needs_hw_and_refuses_spec_flags(capsys):
    assert main(["sweep", "resnet50"]) == 2
    assert "needs --hw" in capsys.readouterr().err
    assert main(["sweep", "resnet50", "--hw", "t4", "--output", "x"]) == 2
    assert "--output: only for a sweep spec file" in capsys.readouterr().err
