"""``roofcast sweep SPEC.toml``: the dataset, the summary and Pareto tables, the progress bar,
and one-line user errors (exit 2); the old ``roofcast sweep MODEL --hw`` form is untouched."""

from __future__ import annotations

import csv
import io
import json

import pytest

from roofcast.app.cli import main
from roofcast.predictor.sweeps.output import read_dataset
from roofcast.predictor.sweeps.schedulers import hardware_of
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
    assert {r["hardware"] for r in doc["summary"]} == {"h100-sxm", "a100-80gb-sxm",
                                                       "epyc-9654", "no-such-device"}
    assert {r["family"] for r in doc["summary"]} == {"graph"}
    bad = next(r for r in doc["summary"] if r["hardware"] == "no-such-device")
    assert bad["errors"] == 4
    assert doc["pareto"]
    assert all(r["model"] == "mlp.onnx" for r in doc["pareto"])
    row = doc["pareto"][0]
    assert {"family", "hardware", "n_devices", "plan", "cost_usd_per_rate"} <= set(row)
    # no LLM config, no baseline: no token or speedup columns (NaN in every row)
    assert not {"input_tokens", "tokens_per_s", "ttft_s", "speedup"} & set(row)
    assert "baseline" not in doc  # no baseline: no key (not a NaN line in the table)
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


def _csv_tables(text: str) -> dict[str, list[dict]]:
    """``--format csv`` output (``# name`` lines between tables) as rows per table."""
    tables: dict[str, list[dict]] = {}
    for block in text.strip().split("# ")[1:]:
        name, _, body = block.partition("\n")
        tables[name.strip()] = list(csv.DictReader(io.StringIO(body)))
    return tables


def test_new_families_columns_and_speedup_in_the_tables(tmp_path, capsys):
    """A spec with plans, an LLM config and a baseline: the summary has a row per family and
    hardware (a system: entry on its own), the front the family/plan/devices/tokens columns
    and speedups against the baseline (1 on the baseline itself)."""
    spec = write_spec(tmp_path / "spec", SMALL.replace(
        'models = ["mlp.onnx"]', 'models = ["mlp.onnx", "llm:gpt2"]\nbaseline = "a100-80gb-sxm"'
    ).replace('"no-such-device"', '"system:hgx-h100"').replace(
        'precisions = ["fp32", "fp16"]', 'precisions = ["fp16"]\nmodes = ["infer", "serve"]\n'
        'plans = ["single", "tp2"]\ninput_tokens = [64]\noutput_tokens = [16]'))
    assert main(["sweep", str(spec), "--output", str(tmp_path / "o"), "--format", "csv"]) == 0
    tables = _csv_tables(capsys.readouterr().out)
    cells = read_dataset(tmp_path / "o")
    summary = {(r["model"], r["family"], r["hardware"]) for r in tables["summary"]}
    assert ("mlp.onnx", "parallel", "system:hgx-h100") in summary
    assert ("mlp.onnx", "graph", "system:hgx-h100") not in summary  # systems take plans only
    assert {f for _, f, _ in summary} == {"graph", "parallel", "serving"}
    assert {"best_speedup", "best_tokens_per_s_per_dollar"} <= set(tables["summary"][0])
    front = tables["pareto"]
    assert front
    assert {"family", "plan", "n_devices", "input_tokens", "output_tokens", "tokens_per_s",
            "speedup"} <= set(front[0])
    graph = cells[(cells["family"] == "graph") & (cells["error"] == "")]
    on_base = graph[graph["device"] == "a100-80gb-sxm"]
    assert (on_base["speedup"] == 1.0).all()
    for row in front:
        cell = cells[(cells["model"] == row["model"]) & (cells["family"] == row["family"])
                     & (cells["plan"] == row["plan"]) & (cells["batch"] == int(row["batch"]))
                     & (cells["mode"] == row["mode"]) & (hardware_of(cells) == row["hardware"])]
        assert len(cell) == 1
        want = cell["speedup"].iloc[0]  # NaN where the baseline has no cell of the same work
        assert float(row["speedup"] or "nan") == pytest.approx(want, rel=1e-3, nan_ok=True)
    row = next(r for r in tables["summary"] if (r["model"], r["family"], r["hardware"])
               == ("mlp.onnx", "graph", "h100-sxm"))
    want = cells.loc[(cells["family"] == "graph") & (cells["device"] == "h100-sxm"), "speedup"]
    assert float(row["best_speedup"]) == pytest.approx(want.max(), rel=1e-3)


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
