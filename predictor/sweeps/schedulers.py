"""Run a sweep's tasks on a scheduler: ``run_sweep(spec, scheduler="local") -> SweepResult``.

Schedulers are a registry, ``SCHEDULERS``: prefix -> ``fn(tasks, address, advance) ->
list[DataFrame]`` (one ``CELL_COLUMNS`` frame per task, any order), added with
``@register_scheduler(prefix)``. The scheduler text is ``PREFIX``, ``PREFIX:ADDRESS`` or
``PREFIX://ADDRESS`` (``local``, ``dask-local:4``, ``dask://10.0.0.5:8786``); the function gets
the address part. ``advance(n_cells)`` is called by the scheduler as each task finishes (the
progress bar's tick). Prefixes of optional engines (Dask) are registered by their module,
imported on first use (``PLUGIN_MODULES``), so this module never imports them.

``run_sweep`` plans the tasks (``tasks.plan_tasks``), runs them, sorts the cells by
``cell_id``, checks the result and fills ``speedup`` against the spec's baseline
(``with_speedup``): every planned cell exactly once — a lost or duplicated
cell (a scheduler bug, a retried task counted twice) raises ``SweepIntegrityError``, never a
silently short table. ``elapsed_s`` is the wall time of planning + running + checking.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence

import pandas as pd

from roofcast.predictor.dask_client import split_scheduler as parse_scheduler
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.sweeps.tasks import plan_tasks, run_task, task_cell_ids
from roofcast.predictor.sweeps.types import CELL_COLUMNS, SweepResult, SweepSpec, SweepTask

#: ``advance(n_cells)``: a task of ``n_cells`` cells finished
Advance = Callable[[int], None]
#: ``progress(done_cells, total_cells)``: what ``run_sweep``'s caller gets
Progress = Callable[[int, int], None]
Scheduler = Callable[[Sequence[SweepTask], str, Advance], list[pd.DataFrame]]

SCHEDULERS: dict[str, Scheduler] = {}
#: prefix -> module that registers it when imported (optional dependencies)
PLUGIN_MODULES: dict[str, str] = {
    "dask": "roofcast.predictor.sweeps.dask_scheduler",
    "dask-local": "roofcast.predictor.sweeps.dask_scheduler",
}


class SweepSchedulerError(PredictionError):
    """The scheduler text names no known scheduler, or its engine is not installed."""


class SweepIntegrityError(RuntimeError):
    """A scheduler lost or duplicated cells (a bug, not a user error)."""


def register_scheduler(prefix: str) -> Callable[[Scheduler], Scheduler]:
    """Decorator: ``@register_scheduler("dask-local")`` adds the function under ``prefix``."""
    def add(fn: Scheduler) -> Scheduler:
        SCHEDULERS[prefix] = fn
        return fn
    return add


def get_scheduler(prefix: str) -> Scheduler:
    """The registered function for ``prefix`` (importing its plugin module if needed)."""
    if prefix not in SCHEDULERS and prefix in PLUGIN_MODULES:
        module = PLUGIN_MODULES[prefix]
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise SweepSchedulerError(
                f"scheduler {prefix!r} needs {exc.name!r}, which is not installed (the dask "
                "schedulers: pip install 'dask[distributed]'); or use --scheduler local") from exc
    if prefix not in SCHEDULERS:
        known = sorted({*SCHEDULERS, *PLUGIN_MODULES})
        raise SweepSchedulerError(
            f"unknown scheduler {prefix!r}; use one of: local, dask-local:N, dask://HOST:PORT "
            f"(registered prefixes: {', '.join(known)})")
    return SCHEDULERS[prefix]


@register_scheduler("local")
def run_local(tasks: Sequence[SweepTask], address: str, advance: Advance) -> list[pd.DataFrame]:
    """In-process: the tasks one after another (each one vectorised ``sweep`` call)."""
    if address:
        raise SweepSchedulerError(f"scheduler 'local' takes no address (got {address!r})")
    frames = []
    for task in tasks:
        frames.append(run_task(task))
        advance(task.n_cells)
    return frames


def run_sweep(spec: SweepSpec, scheduler: str = "local", *, progress: Progress | None = None,
              cells_per_task: int | None = None) -> SweepResult:
    """Plan, run on ``scheduler`` and check the sweep (module docstring)."""
    prefix, address = parse_scheduler(scheduler)
    fn = get_scheduler(prefix)  # before any work: a bad name fails fast
    start = time.perf_counter()
    tasks = plan_tasks(spec, cells_per_task=cells_per_task)
    total = sum(t.n_cells for t in tasks)
    done = 0

    def advance(n_cells: int) -> None:
        nonlocal done
        done += n_cells
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    frames = fn(tasks, address, advance)
    cells = with_speedup(check_cells(frames, tasks), spec.baseline)
    return SweepResult(cells=cells, scheduler=scheduler,
                       elapsed_s=time.perf_counter() - start)


def check_cells(frames: Sequence[pd.DataFrame], tasks: Sequence[SweepTask]) -> pd.DataFrame:
    """Concatenate the task frames, sorted by ``cell_id``; raise ``SweepIntegrityError`` unless
    every planned cell is there exactly once with the ``CELL_COLUMNS``."""
    planned = [c for t in tasks for c in task_cell_ids(t)]
    if not frames:
        cells = pd.DataFrame({c: pd.Series(dtype=object) for c in CELL_COLUMNS})
    else:
        cells = pd.concat(list(frames), ignore_index=True)
    if list(cells.columns) != list(CELL_COLUMNS):
        raise SweepIntegrityError(f"task frames have columns {list(cells.columns)}, "
                                  f"expected {list(CELL_COLUMNS)}")
    ids = cells["cell_id"]
    dup = ids[ids.duplicated()].unique()
    if len(dup):
        raise SweepIntegrityError(f"{len(dup)} cell(s) returned more than once, e.g. {dup[0]!r}")
    want = set(planned)
    got = set(ids)
    lost, extra = want - got, got - want
    if lost or extra:
        raise SweepIntegrityError(
            f"{len(lost)} planned cell(s) missing (e.g. {sorted(lost)[:1]}), "
            f"{len(extra)} unplanned cell(s) returned (e.g. {sorted(extra)[:1]})")
    return cells.sort_values("cell_id", kind="stable").reset_index(drop=True)


#: the cell columns that, with the hardware and the spec's runtime, make a cell: rows equal
#: on these compare across hardware (``with_speedup``)
SAME_WORK = ("model", "batch", "precision", "mode", "plan", "input_tokens", "output_tokens")


def hardware_of(cells: pd.DataFrame) -> pd.Series:
    """Each cell's hardware text as the spec wrote it (a device, a what-if, ``system:ID``): the
    part of its ``cell_id`` after ``model|`` and before the six key parts that follow (runtime,
    batch, precision, mode, plan, tokens). Not the ``device`` column: a parallel cell on a
    ``system:`` entry carries the system's device id there, and a plan on a what-if the
    derived device. (~1 s per 10^6 cells.)"""
    hardware = [cid[len(model) + 1:].rsplit("|", 6)[0]
                for cid, model in zip(cells["cell_id"], cells["model"], strict=True)]
    return pd.Series(hardware, index=cells.index, dtype=object)


def with_speedup(cells: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """``cells`` with ``speedup`` = time_s of the ``baseline`` hardware's cell of the same work
    (``SAME_WORK`` and the spec's runtime, the third part of ``cell_id``: ``default`` compares
    each kind's default runtime) / this cell's time_s; NaN without a baseline, where the
    baseline's cell failed or is missing (a ``system:`` baseline for a single-device cell)."""
    out = cells.copy()
    if baseline is None or out.empty:
        out["speedup"] = float("nan")
        return out
    work = out[list(SAME_WORK)].assign(spec_runtime=out["cell_id"].str.split("|").str[2])
    base = work[hardware_of(out) == baseline]
    base_t = pd.Series(out.loc[base.index, "time_s"].to_numpy(),
                       index=pd.MultiIndex.from_frame(base))
    keys = pd.MultiIndex.from_frame(work)
    out["speedup"] = base_t.reindex(keys).to_numpy() / out["time_s"].to_numpy()
    return out
