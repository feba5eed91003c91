"""``write_dataset`` (atomic Parquet folder, overwrite rules), ``summary`` and
``pareto_front`` (checked against a brute-force dominance test)."""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return run_sweep(read_spec(write_spec(tmp_path_factory.mktemp("spec"), SMALL)))


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


def _cells(rows):
    cols = ["model", "device", "time_s", "usd_per_throughput", "fits", "error"]
    df = pd.DataFrame(rows, columns=cols)
    df["cell_id"] = [f"c{i}" for i in range(len(df))]
    return df


def test_summary_by_model_and_device():
    df = _cells([("m", "a", 2.0, 10.0, True, ""), ("m", "a", 1.0, 20.0, False, ""),
                 ("m", "a", np.nan, np.nan, False, "boom"), ("m", "b", 3.0, np.nan, True, "")])
    s = summary(df).set_index("device")
    assert list(s.index) == ["a", "b"]
    assert s.loc["a", "cells"] == 3
    assert s.loc["a", "errors"] == 1
    assert s.loc["a", "best_time_s"] == 1.0
    assert s.loc["a", "best_throughput_per_usd"] == pytest.approx(0.1)
    assert s.loc["a", "fits_share"] == 0.5  # of the predicted cells
    assert np.isnan(s.loc["b", "best_throughput_per_usd"])  # no price: not invented


def test_pareto_front_small_case():
    df = _cells([("m", "fast", 1.0, 9.0, True, ""), ("m", "cheap", 5.0, 1.0, True, ""),
                 ("m", "mid", 2.0, 5.0, True, ""), ("m", "worse", 3.0, 6.0, True, ""),
                 ("m", "tie", 2.0, 5.0, True, ""), ("m", "slowtie", 2.0, 7.0, True, ""),
                 ("m", "nofit", 0.5, 0.5, False, ""), ("m", "err", 0.1, 0.1, True, "x"),
                 ("m", "noprice", 0.2, np.nan, True, ""), ("n", "other", 9.0, 9.0, True, "")])
    front = pareto_front(df)
    assert sorted(front.loc[front["model"] == "m", "device"]) == ["cheap", "fast", "mid", "tie"]
    assert list(front.loc[front["model"] == "n", "device"]) == ["other"]


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
                                      "fits": bool})).empty
    assert SweepResult(empty, "local", 1.0).cells_per_s == 0
