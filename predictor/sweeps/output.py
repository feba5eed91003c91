"""A sweep's outputs: the Parquet dataset, the summary table and the Pareto front.

* ``write_dataset(result, folder)``: a Parquet dataset folder (``part-00000.parquet``, ... of
  ``ROWS_PER_PART`` cells each, ``CELL_COLUMNS``) plus ``_roofcast_sweep.json`` (name,
  scheduler, wall time, cell and error counts, the spec's grid; Parquet readers skip
  ``_``-files). Written
  atomically: into a temporary sibling folder, then renamed into place — a reader never sees
  half a sweep. A folder that exists must be empty or an earlier sweep output (it has the
  marker file); anything else is refused rather than overwritten. ``read_dataset`` reads one.
* ``summary(cells)``: per model x device — cells, errors, the best (lowest) ``time_s``, the
  best throughput per dollar = max(throughput / price) = 1 / min(``usd_per_throughput``), and
  the share of predicted cells whose memory fits the device.
* ``pareto_front(cells)``: per model, the cells no other cell beats on both ``time_s`` and
  ``usd_per_throughput`` (another cell dominates when it is <= on both and < on one). Only
  predicted cells that fit in memory and have a list price (a finite ``usd_per_throughput``)
  compete: a cell that cannot run or has no price is no option to buy.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.sweeps.types import CELL_COLUMNS, SweepResult, SweepSpec

MARKER = "_roofcast_sweep.json"
ROWS_PER_PART = 1_000_000
SUMMARY_COLUMNS = ("model", "device", "cells", "errors", "best_time_s",
                   "best_throughput_per_usd", "fits_share")


class SweepOutputError(PredictionError):
    """The output folder cannot take the sweep (not empty and not a sweep, unreadable)."""


def is_sweep_folder(folder: Path) -> bool:
    """Whether ``folder`` holds an earlier sweep output (its marker file)."""
    return (folder / MARKER).is_file()


def write_dataset(result: SweepResult, folder: str | Path, *, name: str = "sweep",
                  spec: SweepSpec | None = None) -> Path:
    """Write ``result.cells`` as a Parquet dataset folder, atomically (module docstring);
    ``spec``'s grid goes into the marker file when given."""
    folder = Path(folder)
    if folder.exists():
        if not folder.is_dir():
            raise SweepOutputError(f"output {folder} is a file; give a folder path for --output")
        if any(folder.iterdir()) and not is_sweep_folder(folder):
            raise SweepOutputError(f"output folder {folder} is not empty and holds no earlier "
                                   "sweep; choose a new or empty folder for --output")
    parent = folder.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would hide the dataset from others
        cells = result.cells[list(CELL_COLUMNS)]
        n_parts = max(1, -(-len(cells) // ROWS_PER_PART))
        for i in range(n_parts):
            part = cells.iloc[i * ROWS_PER_PART:(i + 1) * ROWS_PER_PART]
            part.to_parquet(tmp / f"part-{i:05d}.parquet", index=False, engine="pyarrow")
        meta = {"name": name, "scheduler": result.scheduler,
                "elapsed_s": result.elapsed_s, "cells": len(cells),
                "errors": result.n_errors, "columns": list(CELL_COLUMNS),
                "spec": None if spec is None else {**asdict(spec), "dims": dict(spec.dims)}}
        (tmp / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        _replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def _replace(tmp: Path, folder: Path) -> None:
    """Move ``tmp`` to ``folder``; an existing (empty or earlier-sweep) folder is moved aside
    first and deleted only after the rename succeeded."""
    if not folder.exists():
        os.replace(tmp, folder)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=tmp.parent))
    os.rmdir(old)
    os.replace(folder, old)
    try:
        os.replace(tmp, folder)
    except BaseException:
        os.replace(old, folder)
        raise
    shutil.rmtree(old, ignore_errors=True)


def read_dataset(folder: str | Path) -> pd.DataFrame:
    """The cells of a sweep folder written by ``write_dataset`` (``CELL_COLUMNS``)."""
    folder = Path(folder)
    if not folder.is_dir() or not is_sweep_folder(folder):
        raise SweepOutputError(f"{folder} is not a sweep output folder (no {MARKER}); give the "
                               "folder that `roofcast sweep SPEC.toml --output DIR` wrote")
    parts = sorted(folder.glob("part-*.parquet"))
    if not parts:
        raise SweepOutputError(f"sweep folder {folder} holds no part-*.parquet file")
    cells = pd.concat([pd.read_parquet(p, engine="pyarrow") for p in parts], ignore_index=True)
    missing = [c for c in CELL_COLUMNS if c not in cells.columns]
    if missing:
        raise SweepOutputError(f"sweep folder {folder} lacks columns {missing}")
    return cells[list(CELL_COLUMNS)]


def _predicted(cells: pd.DataFrame) -> pd.DataFrame:
    return cells[cells["error"] == ""]


def summary(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (model, device): cells, errors, best time, best throughput per $, fits share."""
    if cells.empty:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    ok = _predicted(cells)
    keys = ["model", "device"]
    counts = cells.groupby(keys, sort=True).agg(
        cells=("cell_id", "size"), errors=("error", lambda e: int((e != "").sum())))
    best = ok.groupby(keys, sort=True).agg(
        best_time_s=("time_s", "min"), min_usd=("usd_per_throughput", "min"),
        fits_share=("fits", "mean"))
    out = counts.join(best, how="left").reset_index()
    out["best_throughput_per_usd"] = 1.0 / out["min_usd"]
    return out[list(SUMMARY_COLUMNS)]


def pareto_front(cells: pd.DataFrame) -> pd.DataFrame:
    """Per model, the non-dominated cells on (``time_s``, ``usd_per_throughput``), both lower
    better (module docstring), sorted by model then time."""
    ok = _predicted(cells)
    ok = ok[ok["fits"] & np.isfinite(ok["time_s"]) & np.isfinite(ok["usd_per_throughput"])]
    if ok.empty:
        return ok.reset_index(drop=True)
    ok = ok.sort_values(["model", "time_s", "usd_per_throughput", "cell_id"], kind="stable")
    keep = []
    for _, group in ok.groupby("model", sort=True):
        t = group["time_s"].to_numpy()
        u = group["usd_per_throughput"].to_numpy()
        # best usd among cells strictly faster: running min, shifted to the first of each time
        run_min = np.minimum.accumulate(u)
        first = np.searchsorted(t, t, side="left")  # index of the first cell with this time
        before = np.where(first > 0, run_min[np.maximum(first - 1, 0)], np.inf)
        group_min = pd.Series(u).groupby(t).transform("min").to_numpy()
        mask = (u < before) & (u <= group_min)
        keep.append(group[mask])
    return pd.concat(keep).reset_index(drop=True)
