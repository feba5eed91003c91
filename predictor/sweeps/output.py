"""A sweep's outputs: the Parquet dataset, the summary table and the Pareto front.

* ``write_dataset(result, folder)``: a Parquet dataset folder (``part-00000.parquet``, ... of
  ``ROWS_PER_PART`` cells each, ``CELL_COLUMNS``) plus ``_roofcast_sweep.json`` (name,
  scheduler, wall time, cell and error counts, the columns, the spec's grid with every key —
  plans, tokens, LLM configs, ``system:`` entries; Parquet readers skip ``_``-files). Written
  atomically: into a temporary sibling folder, then renamed into place — a reader never sees
  half a sweep. A folder that exists must be empty or an earlier sweep output (it has the
  marker file); anything else is refused rather than overwritten. ``read_dataset`` reads one.
* ``summary(cells)``: per model x family x hardware (``schedulers.hardware_of``: the spec's
  entry, read from the cell id — a device or what-if, or ``system:ID``) — the most devices a
  predicted cell of it uses (``max_devices``: a plan on a device uses dp x tp x pp of it),
  cells, errors, the best (lowest) ``time_s``, ``best_throughput_per_dollar`` = max(throughput
  / price) = 1 / min(``usd_per_throughput``) in samples (requests) per s per $,
  ``best_tokens_per_s_per_dollar`` = max(``tokens_per_s`` / ``price_usd``) for LLM cells (NaN
  otherwise), ``fits_share`` of the predicted cells, and ``best_speedup``, the largest
  ``speedup`` (NaN without a baseline). A family's ``time_s`` is its own quantity (one batch, one serving request batch's
  end-to-end latency, one training/inference step), so families are never mixed in a row.
* ``pareto_front(cells)``: per **work** (``FRONT_KEYS``: model, family, mode, input_tokens,
  output_tokens — a model with two families has a front per family, an LLM one per request
  shape, since a 128-token request is no substitute for a 2048-token one), the cells no other
  cell of the same work beats on both axes (it dominates when it is <= on both and < on one):
  latency ``time_s`` (graph: one batch; serving: the end-to-end latency of a static batch,
  TTFT + (M-1) x TPOT; parallel: one step) and the cost of throughput ``cost_usd_per_rate``
  (``pareto_cost``): for LLM cells (``input_tokens`` > 0) $ per (token/s) = ``price_usd`` /
  ``tokens_per_s``, else $ per (sample/s) = ``usd_per_throughput``. Hardware, plan, runtime,
  batch and precision are the choices that compete. Only predicted cells that fit in memory and
  have a finite latency and cost (a list price) compete: a cell that cannot run or has no price
  is no option to buy. The front carries ``cost_usd_per_rate``, ``rate_unit`` (``tokens/s`` or
  ``samples/s``) and ``hardware``.
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
from roofcast.predictor.sweeps.schedulers import hardware_of
from roofcast.predictor.sweeps.types import CELL_COLUMNS, SweepResult, SweepSpec

MARKER = "_roofcast_sweep.json"
ROWS_PER_PART = 1_000_000
SUMMARY_COLUMNS = ("model", "family", "hardware", "max_devices", "cells", "errors",
                   "best_time_s", "best_throughput_per_dollar", "best_tokens_per_s_per_dollar",
                   "fits_share", "best_speedup")


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
    """The cells of a sweep folder written by ``write_dataset`` (``CELL_COLUMNS``); a folder
    written with another column set (an older roofcast) is refused: re-run the sweep."""
    folder = Path(folder)
    if not folder.is_dir() or not is_sweep_folder(folder):
        raise SweepOutputError(f"{folder} is not a sweep output folder (no {MARKER}); give the "
                               "folder that `roofcast sweep SPEC.toml --output DIR` wrote")
    try:
        meta = json.loads((folder / MARKER).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SweepOutputError(f"sweep folder {folder}: {MARKER} cannot be read ({exc}); "
                               "re-run the sweep") from None
    written = meta.get("columns") if isinstance(meta, dict) else None
    if written != list(CELL_COLUMNS):
        raise SweepOutputError(_old_columns(folder, written))
    parts = sorted(folder.glob("part-*.parquet"))
    if not parts:
        raise SweepOutputError(f"sweep folder {folder} holds no part-*.parquet file")
    cells = pd.concat([pd.read_parquet(p, engine="pyarrow") for p in parts], ignore_index=True)
    missing = [c for c in CELL_COLUMNS if c not in cells.columns]
    if missing:
        raise SweepOutputError(f"sweep folder {folder} lacks columns {missing}")
    return cells[list(CELL_COLUMNS)]


def _old_columns(folder: Path, written: object) -> str:
    """The message for a sweep folder whose marker lists other columns than ``CELL_COLUMNS``."""
    have = set(written) if isinstance(written, list) else set()
    missing = [c for c in CELL_COLUMNS if c not in have]
    return (f"sweep folder {folder} was written with another column set (an older roofcast; "
            f"it lacks {', '.join(missing) or 'the column order'}): re-run the sweep "
            "(`roofcast sweep SPEC.toml --output DIR`) to get the current columns")


#: the cells of one work: the Pareto front is per group of these (module docstring)
FRONT_KEYS = ("model", "family", "mode", "input_tokens", "output_tokens")
#: ``rate_unit`` of a front row: LLM cells are priced per output token/s, others per sample/s
TOKEN_RATE, SAMPLE_RATE = "tokens/s", "samples/s"


def _predicted(cells: pd.DataFrame) -> pd.DataFrame:
    return cells[cells["error"] == ""]


def pareto_cost(cells: pd.DataFrame) -> pd.Series:
    """The cost axis of the front, per cell: $ per (token/s) = ``price_usd`` / ``tokens_per_s``
    for LLM cells (``input_tokens`` > 0), else ``usd_per_throughput`` ($ per (sample/s)); NaN
    where the price or the rate is missing."""
    llm = cells["input_tokens"] > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        per_token = cells["price_usd"] / cells["tokens_per_s"].where(cells["tokens_per_s"] > 0)
    return per_token.where(llm, cells["usd_per_throughput"]).astype(float)


def _hardware(cells: pd.DataFrame) -> pd.Series:
    """The ``hardware`` column where the caller added it (the explorer, once per load), else
    ``hardware_of`` (read from the cell ids)."""
    return cells["hardware"] if "hardware" in cells.columns else hardware_of(cells)


def rate_unit(cells: pd.DataFrame) -> np.ndarray:
    """The unit ``pareto_cost`` prices each cell's throughput in: ``TOKEN_RATE`` for LLM cells
    (``input_tokens`` > 0), else ``SAMPLE_RATE``."""
    return np.where(cells["input_tokens"] > 0, TOKEN_RATE, SAMPLE_RATE)


def summary(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (model, family, hardware): cells, errors, best time, best throughput per $ (samples
    and, for LLM cells, tokens), fits share, best speedup (module docstring)."""
    if cells.empty:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    cells = cells.assign(hardware=_hardware(cells))
    with np.errstate(divide="ignore", invalid="ignore"):
        cells["tokens_per_s_per_usd"] = cells["tokens_per_s"] / cells["price_usd"]
    ok = _predicted(cells)
    keys = ["model", "family", "hardware"]
    counts = cells.groupby(keys, sort=True).agg(
        cells=("cell_id", "size"), errors=("error", lambda e: int((e != "").sum())))
    best = ok.groupby(keys, sort=True).agg(
        max_devices=("n_devices", "max"),
        best_time_s=("time_s", "min"), min_usd=("usd_per_throughput", "min"),
        best_tokens_per_s_per_dollar=("tokens_per_s_per_usd", "max"),
        fits_share=("fits", "mean"), best_speedup=("speedup", "max"))
    out = counts.join(best, how="left").reset_index()
    out["best_throughput_per_dollar"] = 1.0 / out["min_usd"]
    return out[list(SUMMARY_COLUMNS)]


def pareto_front(cells: pd.DataFrame) -> pd.DataFrame:
    """Per work (``FRONT_KEYS``), the non-dominated cells on (``time_s``,
    ``cost_usd_per_rate``), both lower better (module docstring), sorted by the work then
    time; with the columns ``cost_usd_per_rate``, ``rate_unit`` and ``hardware``."""
    ok = _predicted(cells)
    ok = ok.assign(cost_usd_per_rate=pareto_cost(ok),
                   rate_unit=rate_unit(ok),
                   hardware=_hardware(ok))
    ok = ok[ok["fits"].astype(bool) & np.isfinite(ok["time_s"])
            & np.isfinite(ok["cost_usd_per_rate"])]
    if ok.empty:
        return ok.reset_index(drop=True)
    keys = list(FRONT_KEYS)
    ok = ok.sort_values([*keys, "time_s", "cost_usd_per_rate", "cell_id"], kind="stable")
    keep = []
    for _, group in ok.groupby(keys, sort=True):
        t = group["time_s"].to_numpy()
        u = group["cost_usd_per_rate"].to_numpy()
        # best cost among cells strictly faster: running min, shifted to the first of each time
        run_min = np.minimum.accumulate(u)
        first = np.searchsorted(t, t, side="left")  # index of the first cell with this time
        before = np.where(first > 0, run_min[np.maximum(first - 1, 0)], np.inf)
        group_min = pd.Series(u).groupby(t).transform("min").to_numpy()
        mask = (u < before) & (u <= group_min)
        keep.append(group[mask])
    return pd.concat(keep).reset_index(drop=True)
