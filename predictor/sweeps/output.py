"""A sweep's outputs: the Parquet dataset, the summary table and the Pareto front.

* ``write_dataset(result, folder)``, or streamed ``DatasetWriter(folder, name=, spec=)`` (a
  ``run_sweep`` sink): parts of at most ``ROWS_PER_PART`` cells plus ``_roofcast_sweep.json``
  (its ``files``: the manifest), written into a temporary sibling, renamed into place. An
  existing folder must be empty or an earlier sweep (``check_folder``); only its manifest's
  files are ever deleted. ``read_dataset`` reads one.
* ``summary(cells)``: per model x family x hardware: ``max_devices``, cells, errors, best
  ``time_s``, ``best_throughput_per_dollar`` = 1 / min(``usd_per_throughput``) (samples per s
  per $), ``best_tokens_per_s_per_dollar`` = max(``tokens_per_s`` / ``price_usd``),
  ``fits_share`` = fits / predicted, ``best_speedup``.
* ``pareto_front(cells)``: per work (``FRONT_KEYS``), the predicted, fitting, priced cells no
  other beats on both ``time_s`` (s) and ``cost_usd_per_rate`` (``price_usd`` /
  ``tokens_per_s`` for LLM cells, else ``usd_per_throughput``). The accumulators equal both
  exactly, built incrementally. Details and reasons: docs/design/module-notes.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.hw_catalog.confined import read_confined
from roofcast.hw_catalog.safe_load import load_json
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.sweeps.stream import empty_cells, hardware_of
from roofcast.predictor.sweeps.types import CELL_COLUMNS, SweepResult, SweepSpec

MARKER = "_roofcast_sweep.json"
#: the marker's key listing the files roofcast wrote beside it (the manifest)
MANIFEST_KEY = "files"
#: the only names a manifest may list
PART_NAME = re.compile(r"part-[0-9]{5,9}\.parquet")
#: the marker's largest size (the spec's lists, the columns and the part names)
MAX_MARKER_BYTES = 16 * 2**20
#: most cells per Parquet part; also what a streamed writer buffers (~1 kB per cell in pandas)
ROWS_PER_PART = 100_000
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
    if result.cells is None:
        raise ValueError("this sweep was streamed to a folder (result.folder); it holds no cells")
    folder = _plain(folder)
    tmp = _open_tmp(folder)
    try:
        cells = result.cells[list(CELL_COLUMNS)]
        n_parts = max(1, -(-len(cells) // ROWS_PER_PART))
        for i in range(n_parts):
            part = cells.iloc[i * ROWS_PER_PART:(i + 1) * ROWS_PER_PART]
            part.to_parquet(tmp / _part_name(i), index=False, engine="pyarrow")
        _write_marker(tmp, _meta(name, result.scheduler, result.elapsed_s, len(cells),
                                 result.n_errors, spec, n_parts))
        _replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def _plain(folder: str | Path) -> Path:
    """``folder`` absolute with ``.``/``..`` folded by name (links not followed: a link given as
    the folder stays a link, to be refused)."""
    return Path(os.path.abspath(folder))


def _part_name(i: int) -> str:
    return f"part-{i:05d}.parquet"


def read_manifest(folder: Path) -> list[str]:
    """The files an earlier sweep in ``folder`` wrote (its marker's manifest); refused when the
    marker is no regular file, unreadable or lists anything but part files."""
    def refuse(why: str) -> SweepOutputError:
        return SweepOutputError(f"output folder {folder} has a {MARKER} {why}, so roofcast "
                                "cannot tell its own files from others; it replaces only what "
                                "it wrote: choose a new or empty folder for --output")
    try:
        data = read_confined(folder / MARKER, folder, max_bytes=MAX_MARKER_BYTES,
                             what="sweep marker", error=SweepOutputError)
        meta = load_json(data, str(folder / MARKER), error=SweepOutputError,
                         max_bytes=MAX_MARKER_BYTES)
    except SweepOutputError as exc:
        raise refuse(f"that cannot be read ({exc})") from None
    files = meta.get(MANIFEST_KEY) if isinstance(meta, dict) else None
    if not isinstance(files, list) or not all(
            isinstance(f, str) and PART_NAME.fullmatch(f) for f in files):
        raise refuse(f"without a valid manifest ({MANIFEST_KEY!r}: the part files it wrote; an "
                     "older roofcast or another program wrote it)")
    return list(dict.fromkeys(files))


def check_folder(folder: Path) -> list[str]:
    """The files of an earlier sweep that writing to ``folder`` replaces (``[]``: no folder or
    an empty one); ``SweepOutputError`` saying why for anything else (module docstring)."""
    folder = _plain(folder)
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SweepOutputError(f"output {folder} cannot be used: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise SweepOutputError(f"output {folder} is a symbolic link; roofcast does not replace "
                               "links: give the folder itself (or a new folder) for --output")
    if not stat.S_ISDIR(st.st_mode):
        raise SweepOutputError(f"output {folder} is a file; give a folder path for --output")
    if _holds_cwd(folder):
        raise SweepOutputError(f"output folder {folder} is the working directory or holds it; "
                               "give a new subfolder for --output, e.g. --output out.parquet")
    try:
        entries = os.listdir(folder)
    except OSError as exc:
        raise SweepOutputError(f"output folder {folder} cannot be listed: {exc.strerror}") from None
    if not entries:
        return []
    if MARKER not in entries:
        raise SweepOutputError(f"output folder {folder} is not empty (a non-empty folder "
                               "that holds no earlier sweep); choose a new or empty folder "
                               "for --output")
    files = read_manifest(folder)
    foreign = sorted(e for e in entries if e != MARKER and (
        e not in files or not stat.S_ISREG(os.lstat(folder / e).st_mode)))
    if foreign:
        shown = ", ".join(repr(f) for f in foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        raise SweepOutputError(f"output folder {folder} holds an earlier sweep and {len(foreign)} "
                               f"other entr{'y' if len(foreign) == 1 else 'ies'} roofcast did "
                               f"not write ({shown}); it replaces only its own files: move "
                               "them out or choose a new folder for --output")
    return files


def _holds_cwd(folder: Path) -> bool:
    """Whether ``folder`` is the working directory or one of its parents (it cannot be moved
    aside while in use)."""
    try:
        return Path.cwd().resolve().is_relative_to(folder.resolve())
    except OSError:  # the working directory was removed
        return False


def _open_tmp(folder: Path) -> Path:
    """A fresh temporary sibling of ``folder`` (after ``check_folder``), readable as the umask
    allows (mkdtemp's 0700 would hide the dataset from others)."""
    check_folder(folder)
    parent = folder.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)
    return tmp


def _meta(name: str, scheduler: str, elapsed_s: float, cells: int, errors: int,
          spec: SweepSpec | None, parts: int) -> dict:
    return {"name": name, "scheduler": scheduler, "elapsed_s": elapsed_s, "cells": cells,
            "errors": errors, "columns": list(CELL_COLUMNS),
            MANIFEST_KEY: [_part_name(i) for i in range(parts)],
            "spec": None if spec is None else {**asdict(spec), "dims": dict(spec.dims)}}


def _write_marker(tmp: Path, meta: dict) -> None:
    (tmp / MARKER).write_text(json.dumps(meta, indent=2) + "\n")


def _replace(tmp: Path, folder: Path) -> None:
    """Move ``tmp`` to ``folder``. An existing (empty or earlier-sweep) folder is checked again,
    moved aside, and after the rename only its manifest's files are deleted, then the folder if
    nothing else is left in it (never a whole tree)."""
    if not os.path.lexists(folder):
        os.replace(tmp, folder)
        return
    files = check_folder(folder)
    old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=tmp.parent))
    os.rmdir(old)
    os.replace(folder, old)
    try:
        os.replace(tmp, folder)
    except BaseException:
        os.replace(old, folder)
        raise
    for name in (*files, MARKER):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(old / name)
    try:
        os.rmdir(old)
    except OSError:
        warnings.warn(f"files added to {folder} while the sweep was written were kept in {old}",
                      stacklevel=2)


def read_dataset(folder: str | Path) -> pd.DataFrame:
    """The cells of a sweep folder written by ``write_dataset`` (``CELL_COLUMNS``); a folder
    written with another column set (an older roofcast) is refused: re-run the sweep."""
    folder = Path(folder)
    if not folder.is_dir() or not is_sweep_folder(folder):
        raise SweepOutputError(f"{folder} is not a sweep output folder (no {MARKER}); give the "
                               "folder that `roofcast sweep SPEC.toml --output DIR` wrote")
    try:
        meta = load_json(read_confined(folder / MARKER, folder, max_bytes=MAX_MARKER_BYTES,
                                       what="sweep marker", error=SweepOutputError),
                         str(folder / MARKER), error=SweepOutputError,
                         max_bytes=MAX_MARKER_BYTES)
    except SweepOutputError as exc:
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
    and, for LLM cells, tokens), fits share, best speedup (module docstring): the
    ``SummaryAccumulator`` of one frame, so a streamed sweep and a table in memory share the
    arithmetic."""
    acc = SummaryAccumulator()
    acc.add(cells)
    return acc.table()


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


#: partial rows kept before the summary's partials are merged (and, doubled after each merge,
#: front candidates before they are reduced to their front)
COMPACT_ROWS = 50_000
_KEYS = ["model", "family", "hardware"]
#: the summary's partials over the predicted cells: column -> (source column, merge)
_BEST_PARTS = {"predicted": ("cell_id", "size"), "fitting": ("fits", "sum"),
               "max_devices": ("n_devices", "max"), "best_time_s": ("time_s", "min"),
               "min_usd": ("usd_per_throughput", "min"),
               "best_tokens_per_s_per_dollar": ("tokens_per_s_per_usd", "max"),
               "best_speedup": ("speedup", "max")}
_MERGE = {"cells": "sum", "errors": "sum",
          **{k: ("sum" if how == "size" else how) for k, (_, how) in _BEST_PARTS.items()}}


class SummaryAccumulator:
    """``summary`` computed frame by frame from mergeable partials (module docstring)."""

    def __init__(self) -> None:
        self.counts: list[pd.DataFrame] = []
        self.best: list[pd.DataFrame] = []
        self.rows = 0

    def add(self, cells: pd.DataFrame) -> None:
        if cells.empty:
            return
        cells = cells.assign(hardware=_hardware(cells), failed=cells["error"] != "")
        with np.errstate(divide="ignore", invalid="ignore"):
            cells["tokens_per_s_per_usd"] = cells["tokens_per_s"] / cells["price_usd"]
        self.counts.append(cells.groupby(_KEYS, sort=True).agg(
            cells=("cell_id", "size"), errors=("failed", "sum")))
        best = _predicted(cells).groupby(_KEYS, sort=True).agg(**_BEST_PARTS)
        if not self.best or len(best):  # one (maybe empty) frame gives the dtypes
            self.best.append(best)
        self.rows += len(self.counts[-1]) + len(best)
        if self.rows > COMPACT_ROWS:
            self.counts, self.best = [_merge(self.counts)], [_merge(self.best)]
            self.rows = len(self.counts[0]) + len(self.best[0])

    def table(self) -> pd.DataFrame:
        """The summary of every cell added (``summary``'s rows, columns and dtypes)."""
        if not self.counts:
            return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
        counts, best = _merge(self.counts), _merge(self.best)
        best["fits_share"] = best["fitting"] / best["predicted"]
        best = best.drop(columns=["predicted", "fitting"])
        out = counts.join(best, how="left").reset_index()
        out["best_throughput_per_dollar"] = 1.0 / out["min_usd"]
        return out[list(SUMMARY_COLUMNS)]


def _merge(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Partials (indexed by ``_KEYS``) of any frames merged into one row per group."""
    if len(parts) == 1:
        return parts[0]
    both = pd.concat([p for p in parts if len(p)] or parts[:1])
    return both.groupby(level=_KEYS, sort=True).agg({c: _MERGE[c] for c in both.columns})


class FrontAccumulator:
    """``pareto_front`` computed frame by frame: each frame's front is kept as candidates,
    reduced to their own front when they pass a limit (module docstring)."""

    def __init__(self) -> None:
        self.parts: list[pd.DataFrame] = []
        self.rows = 0
        self.limit = COMPACT_ROWS

    def add(self, cells: pd.DataFrame) -> None:
        front = pareto_front(cells)
        if front.empty:
            return
        self.parts.append(front)
        self.rows += len(front)
        if self.rows > self.limit:
            self.parts = [pareto_front(pd.concat(self.parts, ignore_index=True))]
            self.rows = len(self.parts[0])
            self.limit = max(COMPACT_ROWS, 2 * self.rows)

    def front(self) -> pd.DataFrame:
        """The Pareto front of every cell added (``pareto_front``'s rows and order; frames
        that came with a ``hardware`` column give it last, as ``pareto_front`` of the cells)."""
        if not self.parts:
            return pareto_front(empty_cells())
        front = pareto_front(pd.concat(self.parts, ignore_index=True))
        return front[[*(c for c in front.columns if c != "hardware"), "hardware"]]


class DatasetWriter:
    """A ``run_sweep`` sink that streams the cells into a Parquet dataset folder (module
    docstring); ``close`` returns a ``SweepResult`` without ``cells``, with the summary, the
    front, the counts and the folder. The folder is checked at once (before the sweep runs)."""

    def __init__(self, folder: str | Path, *, name: str = "sweep",
                 spec: SweepSpec | None = None) -> None:
        self.given, self.name, self.spec = Path(folder), name, spec
        self.folder = _plain(folder)
        self.tmp: Path | None = _open_tmp(self.folder)
        self.buffer: list[pd.DataFrame] = []
        self.buffered = self.parts = self.cells = self.errors = 0
        self.summary, self.front = SummaryAccumulator(), FrontAccumulator()

    def add(self, frame: pd.DataFrame) -> None:
        frame = frame[list(CELL_COLUMNS)]
        tagged = frame.assign(hardware=hardware_of(frame))  # read from the ids once, not twice
        self.summary.add(tagged)
        self.front.add(tagged)
        self.cells += len(frame)
        self.errors += int((frame["error"] != "").sum())
        if self.buffered + len(frame) > ROWS_PER_PART:
            self._flush()
        if len(frame) > ROWS_PER_PART:  # one big frame: full parts now, the tail buffered
            frame = frame.sort_values("cell_id", kind="stable")
            full = len(frame) // ROWS_PER_PART * ROWS_PER_PART
            for i in range(0, full, ROWS_PER_PART):
                self._write(frame.iloc[i:i + ROWS_PER_PART])
            frame = frame.iloc[full:]
        if len(frame):
            self.buffer.append(frame)
            self.buffered += len(frame)

    def _flush(self) -> None:
        if self.buffer:
            self._write(pd.concat(self.buffer, ignore_index=True)
                        .sort_values("cell_id", kind="stable"))
        self.buffer, self.buffered = [], 0

    def _write(self, part: pd.DataFrame) -> None:
        assert self.tmp is not None, "the writer is closed"
        part.to_parquet(self.tmp / _part_name(self.parts), index=False, engine="pyarrow")
        self.parts += 1

    def close(self, scheduler: str, elapsed_s: float) -> SweepResult:
        self._flush()
        if not self.parts:  # no cell: one empty part, as write_dataset
            self._write(empty_cells())
        assert self.tmp is not None, "the writer is closed"
        _write_marker(self.tmp, _meta(self.name, scheduler, elapsed_s, self.cells,
                                      self.errors, self.spec, self.parts))
        _replace(self.tmp, self.folder)
        self.tmp = None
        return SweepResult(cells=None, scheduler=scheduler, elapsed_s=elapsed_s,
                           summary=self.summary.table(), front=self.front.front(),
                           cell_count=self.cells, error_count=self.errors,
                           folder=str(self.given))

    def abort(self) -> None:
        """Delete the temporary folder (nothing half-written stays)."""
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
        self.buffer, self.buffered = [], 0
