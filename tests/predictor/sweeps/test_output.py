"""``write_dataset`` (atomic Parquet folder, overwrite rules), ``summary`` and
``pareto_front`` (checked against a brute-force dominance test)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from roofcast.predictor.sweeps import output
from roofcast.predictor.sweeps.output import (
    MARKER,
    SweepOutputError,
    pareto_front,
    read_dataset,
    summary,
    write_dataset,
)
from roofcast.predictor.sweeps.schedulers import run_sweep
from roofcast.predictor.sweeps.spec import read_spec
from roofcast.predictor.sweeps.types import CELL_COLUMNS, SweepResult

from .helpers import SMALL, write_spec


def test_dataset_round_trip_and_overwrite_rules(result, tmp_path, monkeypatch):
    folder = write_dataset(result, tmp_path / "out", name="small")
    assert (folder / MARKER).is_file()
    back = read_dataset(folder)
    pd.testing.assert_frame_equal(back, result.cells[list(CELL_COLUMNS)])
    assert pd.read_parquet(folder).shape == back.shape  # a plain Parquet reader sees the cells
    monkeypatch.setattr(output, "ROWS_PER_PART", 5)
    write_dataset(result, folder)  # an earlier sweep: replaced
    assert len(list(folder.glob("part-*.parquet"))) == 4
    pd.testing.assert_frame_equal(read_dataset(folder), back)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temp folder left behind

    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(SweepOutputError, match="not empty"):
        write_dataset(result, other)
    assert (other / "notes.txt").read_text() == "keep me"
    with pytest.raises(SweepOutputError, match="is a file"):
        write_dataset(result, other / "notes.txt")
    with pytest.raises(SweepOutputError, match="not a sweep output"):
        read_dataset(other)
    empty = tmp_path / "empty"
    empty.mkdir()
    write_dataset(result, empty)
    assert len(read_dataset(empty)) == len(back)


def test_failed_write_leaves_the_old_sweep(result, tmp_path, monkeypatch):
    folder = write_dataset(result, tmp_path / "out")
    before = read_dataset(folder)

    def broken(self, *a, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", broken)
    with pytest.raises(OSError, match="disk full"):
        write_dataset(result, folder)
    monkeypatch.undo()
    pd.testing.assert_frame_equal(read_dataset(folder), before)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_marker_keeps_the_grid_and_old_columns_are_refused(tmp_path):
    spec = read_spec(write_spec(tmp_path / "spec", SMALL.replace(
        'name = "small"', 'name = "small"\nplans = ["single", "tp2"]\ninput_tokens = [64]')))
    result = run_sweep(spec)
    folder = write_dataset(result, tmp_path / "out", spec=spec)
    meta = json.loads((folder / MARKER).read_text())
    assert meta["spec"]["plans"] == ["single", "tp2"]
    assert meta["spec"]["input_tokens"] == [64]
    assert meta["spec"]["output_tokens"] == [128]
    assert meta["columns"] == list(CELL_COLUMNS)
    # a folder of the first round: the marker and the parts lack the new columns
    old = [c for c in CELL_COLUMNS if c not in ("family", "system", "n_devices", "plan",
                                                 "input_tokens", "output_tokens",
                                                 "tokens_per_s", "ttft_s", "tpot_s")]
    (folder / MARKER).write_text(json.dumps({**meta, "columns": old}))
    for part in folder.glob("part-*.parquet"):
        pd.read_parquet(part)[old].to_parquet(part, index=False)
    with pytest.raises(SweepOutputError, match="re-run the sweep") as err:
        read_dataset(folder)
    assert "family" in str(err.value)
    assert "\n" not in str(err.value)


def _cells(rows, **fixed):
    """Cell rows (model, device, time_s, usd_per_throughput, fits, error) of one graph work;
    ``fixed`` overrides other columns for every row."""
    cols = ["model", "device", "time_s", "usd_per_throughput", "fits", "error"]
    df = pd.DataFrame(rows, columns=cols)
    defaults = {"family": "graph", "system": "", "n_devices": 1, "mode": "infer",
                "plan": "single", "input_tokens": 0, "output_tokens": 0,
                "tokens_per_s": np.nan, "price_usd": np.nan, "speedup": np.nan}
    for col, value in {**defaults, **fixed}.items():
        df[col] = value
    return _ids(df)


def _ids(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a distinct ``cell_id`` per row whose hardware part is the device, or
    ``system:`` + the system where the row has one and no device."""
    hardware = df["device"].where(df["device"] != "", "system:" + df["system"])
    df["cell_id"] = [f"{m}|{h}|default|{i}|fp16|{mode}|{p}|-" for i, (m, h, mode, p) in
                     enumerate(zip(df["model"], hardware, df["mode"], df["plan"], strict=True))]
    return df


def test_summary_by_model_and_device():
    df = _cells([("m", "a", 2.0, 10.0, True, ""), ("m", "a", 1.0, 20.0, False, ""),
                 ("m", "a", np.nan, np.nan, False, "boom"), ("m", "b", 3.0, np.nan, True, "")])
    s = summary(df).set_index("hardware")
    assert list(s.index) == ["a", "b"]
    assert s.loc["a", "cells"] == 3
    assert s.loc["a", "errors"] == 1
    assert s.loc["a", "best_time_s"] == 1.0
    assert s.loc["a", "best_throughput_per_dollar"] == pytest.approx(0.1)
    assert s.loc["a", "fits_share"] == 0.5  # of the predicted cells
    assert np.isnan(s.loc["b", "best_throughput_per_dollar"])  # no price: not invented
    assert np.isnan(s.loc["a", "best_speedup"])  # no baseline: no speedup
    assert np.isnan(s.loc["a", "best_tokens_per_s_per_dollar"])  # not an LLM


def test_summary_keeps_families_and_systems_apart():
    graph = _cells([("m", "h", 1.0, 4.0, True, "")], speedup=2.0)
    plans = _cells([("m", "h", 0.4, 8.0, True, ""), ("m", "h", 0.3, 9.0, True, "")],
                   family="parallel", plan="tp2", n_devices=2, speedup=3.0)
    plans.loc[1, "speedup"] = 5.0
    system = _cells([("m", "", 0.1, 30.0, True, ""), ("m", "", np.nan, np.nan, False, "x")],
                    family="parallel", plan="tp4", system="hgx-h100", n_devices=8)
    llm = _cells([("g", "h", 2.0, 1.0, True, "")], family="serving", mode="serve",
                 input_tokens=512, output_tokens=128, tokens_per_s=1000.0, price_usd=500.0)
    df = _ids(pd.concat([graph, plans, system, llm], ignore_index=True))
    df.loc[df["system"] == "hgx-h100", "device"] = "h"  # as parallel cells carry it
    s = summary(df)
    rows = {(r.model, r.family, r.hardware): r for r in s.itertuples()}
    assert set(rows) == {("m", "graph", "h"), ("m", "parallel", "h"),
                         ("m", "parallel", "system:hgx-h100"), ("g", "serving", "h")}
    assert rows[("m", "graph", "h")].best_time_s == 1.0  # not the plans' 0.3
    assert rows[("m", "parallel", "h")].best_time_s == 0.3
    assert rows[("m", "parallel", "h")].max_devices == 2
    assert rows[("m", "parallel", "h")].best_speedup == 5.0
    assert rows[("m", "parallel", "system:hgx-h100")].errors == 1
    assert rows[("m", "parallel", "system:hgx-h100")].max_devices == 8
    assert rows[("g", "serving", "h")].best_tokens_per_s_per_dollar == pytest.approx(2.0)


def test_pareto_front_small_case():
    df = _cells([("m", "fast", 1.0, 9.0, True, ""), ("m", "cheap", 5.0, 1.0, True, ""),
                 ("m", "mid", 2.0, 5.0, True, ""), ("m", "worse", 3.0, 6.0, True, ""),
                 ("m", "tie", 2.0, 5.0, True, ""), ("m", "slowtie", 2.0, 7.0, True, ""),
                 ("m", "nofit", 0.5, 0.5, False, ""), ("m", "err", 0.1, 0.1, True, "x"),
                 ("m", "noprice", 0.2, np.nan, True, ""), ("n", "other", 9.0, 9.0, True, "")])
    front = pareto_front(df)
    assert sorted(front.loc[front["model"] == "m", "device"]) == ["cheap", "fast", "mid", "tie"]
    assert list(front.loc[front["model"] == "n", "device"]) == ["other"]
    assert set(front["rate_unit"]) == {"samples/s"}
    assert front["cost_usd_per_rate"].tolist() == front["usd_per_throughput"].tolist()


def test_pareto_front_per_family_mode_and_request_shape():
    """A plan cell does not push a graph cell off its front (another family), nor a training
    cell an inference one; LLM cells are priced per token/s and compared per request shape."""
    graph = _cells([("m", "a", 2.0, 5.0, True, "")])
    plan = _cells([("m", "a", 1.0, 1.0, True, "")], family="parallel", plan="tp2")
    train = _cells([("m", "a", 0.5, 0.5, True, "")], mode="train")
    shape = {"family": "serving", "mode": "serve", "input_tokens": 512, "output_tokens": 128}
    # usd_per_throughput would rank cheap first; $/(tokens/s) ranks tok first
    serve = _cells([("g", "cheap", 3.0, 1.0, True, ""), ("g", "tok", 3.0, 9.0, True, "")],
                   **shape, price_usd=100.0)
    serve["tokens_per_s"] = [10.0, 1000.0]
    long = _cells([("g", "cheap", 30.0, 1.0, True, "")], **{**shape, "input_tokens": 4096},
                  price_usd=100.0, tokens_per_s=50.0)
    df = _ids(pd.concat([graph, plan, train, serve, long], ignore_index=True))
    front = pareto_front(df)
    got = {(r.model, r.family, r.mode, r.input_tokens, r.device) for r in front.itertuples()}
    assert got == {("m", "graph", "infer", 0, "a"), ("m", "parallel", "infer", 0, "a"),
                   ("m", "graph", "train", 0, "a"), ("g", "serving", "serve", 512, "tok"),
                   ("g", "serving", "serve", 4096, "cheap")}
    tok = front[front["device"] == "tok"].iloc[0]
    assert tok["cost_usd_per_rate"] == pytest.approx(100.0 / 1000.0)
    assert tok["rate_unit"] == "tokens/s"


def test_pareto_front_matches_brute_force():
    rng = np.random.default_rng(7)
    n = 300
    df = _cells([("m" if i % 3 else "k", f"d{i}", float(rng.integers(1, 30)),
                  float(rng.integers(1, 30)), True, "") for i in range(n)])
    front = set(pareto_front(df)["cell_id"])
    t, u, m = df["time_s"].to_numpy(), df["usd_per_throughput"].to_numpy(), df["model"]
    brute = set()
    for i in range(n):
        same = (m == m[i]).to_numpy()
        beaten = same & (t <= t[i]) & (u <= u[i]) & ((t < t[i]) | (u < u[i]))
        if not beaten.any():
            brute.add(df["cell_id"][i])
    assert front == brute
    assert len(front) > 2


def test_empty_result_tables():
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in CELL_COLUMNS})
    assert summary(empty).empty
    assert pareto_front(empty.astype({"time_s": float, "usd_per_throughput": float,
                                      "input_tokens": int, "fits": bool})).empty
    assert SweepResult(empty, "local", 1.0).cells_per_s == 0


def test_system_cells_are_their_own_hardware(tmp_path):
    """A plan on system:hgx-h100 and the same plan on its device h100-sxm (the baseline): the
    system cell carries the device id in ``device``, yet it is its own summary row and its
    speedup is the device cell's time over its own, not 1."""
    spec = read_spec(write_spec(tmp_path, """
[sweep]
models = ["llm:gpt2"]
devices = ["h100-sxm", "system:hgx-h100"]
batches = [8]
precisions = ["bf16"]
modes = ["train"]
plans = ["tp2"]
input_tokens = [256]
baseline = "h100-sxm"
"""))
    cells = run_sweep(spec).cells
    assert (cells["error"] == "").all(), cells["error"].tolist()
    assert set(cells["device"]) == {"h100-sxm"}
    on_device = cells[cells["system"] != "hgx-h100"].iloc[0]
    on_system = cells[cells["system"] == "hgx-h100"].iloc[0]
    assert on_device["speedup"] == 1.0
    assert on_system["speedup"] == pytest.approx(on_device["time_s"] / on_system["time_s"])
    assert on_system["n_devices"] == 8
    assert sorted(summary(cells)["hardware"]) == ["h100-sxm", "system:hgx-h100"]
