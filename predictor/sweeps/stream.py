"""The client side of a sweep, streamed: each task's frame is checked, given its speedups and
handed to a sink as it arrives, so the client holds one task's cells at a time, not the sweep.

* ``TaskLedger.deliver(task, frame)``: the frame has ``CELL_COLUMNS``, its ``task_id`` and
  exactly the task's ids, each once; the task is planned and new. ``finish()`` raises unless
  every planned task came. Tasks' cells are disjoint, so this is "every planned cell exactly
  once"; a failure is ``SweepIntegrityError``.
* ``SpeedupFiller``: ``speedup`` = the baseline hardware's ``time_s`` for the same work / this
  ``time_s``; a frame that arrives before its baseline's tasks is held until they come.
* Sinks (``CellSink``): ``add(frame)``, ``close(scheduler, elapsed_s) -> SweepResult``,
  ``abort()``; ``MemorySink`` returns the frames concatenated and sorted by ``cell_id``,
  ``output.DatasetWriter`` streams them into a Parquet folder.
Rationale: docs/design/module-notes.md.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Protocol

import pandas as pd

from roofcast.predictor.sweeps.cells import columns
from roofcast.predictor.sweeps.types import CELL_COLUMNS, ID_SEPARATOR, SweepResult, SweepTask

#: ``deliver(task, frame)``: a scheduler hands over one finished task's ``CELL_COLUMNS`` frame
Deliver = Callable[[SweepTask, pd.DataFrame], None]
#: ``progress(done_cells, total_cells)``
Progress = Callable[[int, int], None]
#: the cell columns that, with the hardware and the spec's runtime, make a cell: rows equal
#: on these compare across hardware (``with_speedup``)
SAME_WORK = ("model", "batch", "precision", "mode", "plan", "input_tokens", "output_tokens")


class SweepIntegrityError(RuntimeError):
    """A scheduler lost or duplicated cells or tasks (a bug, not a user error)."""


class CellSink(Protocol):
    """Where checked frames go (module docstring)."""

    def add(self, frame: pd.DataFrame) -> None: ...

    def close(self, scheduler: str, elapsed_s: float) -> SweepResult: ...

    def abort(self) -> None: ...


def empty_cells() -> pd.DataFrame:
    """A ``CELL_COLUMNS`` frame without rows (the dtypes of ``cells.columns``)."""
    return columns(pd.DataFrame({c: pd.Series(dtype=object) for c in CELL_COLUMNS}))


def sort_cells(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """``frames`` concatenated and sorted by ``cell_id`` (stable), index 0..n-1."""
    if not frames:
        return empty_cells()
    cells = pd.concat(list(frames), ignore_index=True)
    return cells.sort_values("cell_id", kind="stable").reset_index(drop=True)


class MemorySink:
    """Keeps every frame; ``close`` returns them as ``SweepResult.cells`` sorted by ``cell_id``."""

    def __init__(self) -> None:
        self.frames: list[pd.DataFrame] = []

    def add(self, frame: pd.DataFrame) -> None:
        self.frames.append(frame)

    def close(self, scheduler: str, elapsed_s: float) -> SweepResult:
        cells, self.frames = sort_cells(self.frames), []
        return SweepResult(cells=cells, scheduler=scheduler, elapsed_s=elapsed_s)

    def abort(self) -> None:
        self.frames = []


def check_task_frame(task: SweepTask, frame: pd.DataFrame) -> None:
    """Raise ``SweepIntegrityError`` unless ``frame`` holds exactly ``task``'s cells, each once,
    with ``CELL_COLUMNS`` and the task's ``task_id``."""
    where = f"task {task.task_id} ({task.family} {task.model})"
    if list(frame.columns) != list(CELL_COLUMNS):
        raise SweepIntegrityError(f"{where}: frame has columns {list(frame.columns)}, "
                                  f"expected {list(CELL_COLUMNS)}")
    ids = frame["cell_id"]
    dup = ids[ids.duplicated()].unique()
    if len(dup):
        raise SweepIntegrityError(f"{where}: {len(dup)} cell(s) returned more than once, "
                                  f"e.g. {dup[0]!r}")
    want, got = set(task.cell_ids()), set(ids)
    lost, extra = want - got, got - want
    if lost or extra:
        raise SweepIntegrityError(
            f"{where}: {len(lost)} planned cell(s) missing (e.g. {sorted(lost)[:1]}), "
            f"{len(extra)} unplanned cell(s) returned (e.g. {sorted(extra)[:1]})")
    if len(frame) and not (frame["task_id"] == task.task_id).all():
        raise SweepIntegrityError(f"{where}: rows carry another task_id")


class TaskLedger:
    """Checks each delivery (module docstring), ticks ``progress`` and passes the frame on to
    ``out(task, frame)``; ``finish()`` raises if a planned task never came."""

    def __init__(self, tasks: Sequence[SweepTask], out: Deliver,
                 progress: Progress | None = None) -> None:
        self.planned = {t.task_id: t for t in tasks}
        if len(self.planned) != len(tasks):
            raise SweepIntegrityError("two planned tasks share a task_id")
        self.delivered: set[int] = set()
        self.out, self.progress = out, progress
        self.total = sum(t.n_cells for t in tasks)
        self.done = 0

    def deliver(self, task: SweepTask, frame: pd.DataFrame) -> None:
        if self.planned.get(task.task_id) != task:
            raise SweepIntegrityError(f"task {task.task_id} delivered is unplanned (not a "
                                      "task of this sweep)")
        if task.task_id in self.delivered:
            raise SweepIntegrityError(f"task {task.task_id} delivered more than once (its "
                                      f"{task.n_cells} cells would be counted twice)")
        check_task_frame(task, frame)
        self.delivered.add(task.task_id)
        self.out(task, frame)
        self.done += task.n_cells
        if self.progress is not None:
            self.progress(self.done, self.total)

    def finish(self) -> None:
        lost = sorted(set(self.planned) - self.delivered)
        if lost:
            cells = sum(self.planned[i].n_cells for i in lost)
            raise SweepIntegrityError(f"{len(lost)} planned task(s) missing ({cells} cells), "
                                      f"e.g. task {lost[0]}")


def baseline_tasks(tasks: Sequence[SweepTask], baseline: str | None) -> list[SweepTask]:
    """The tasks holding the ``baseline`` hardware entry's cells."""
    return [] if baseline is None else [t for t in tasks if baseline in t.devices]


def baseline_first(tasks: Sequence[SweepTask], baseline: str | None) -> list[SweepTask]:
    """``tasks`` with the baseline's tasks first (each part in its planned order)."""
    first = {t.task_id for t in baseline_tasks(tasks, baseline)}
    return ([t for t in tasks if t.task_id in first]
            + [t for t in tasks if t.task_id not in first])


def hardware_of(cells: pd.DataFrame) -> pd.Series:
    """Each cell's hardware text as the spec wrote it (a device, a what-if, ``system:ID``): the
    part of its ``cell_id`` after ``model|`` and before the six key parts that follow (runtime,
    batch, precision, mode, plan, tokens). Not the ``device`` column: a parallel cell on a
    ``system:`` entry carries the system's device id there, and a plan on a what-if the
    derived device. (~1 s per 10^6 cells.)"""
    hardware = [cid[len(model) + 1:].rsplit(ID_SEPARATOR, 6)[0]
                for cid, model in zip(cells["cell_id"], cells["model"], strict=True)]
    return pd.Series(hardware, index=cells.index, dtype=object)


def _work(cells: pd.DataFrame) -> pd.DataFrame:
    """``SAME_WORK`` plus the spec's runtime (the third part of ``cell_id``)."""
    runtime = cells["cell_id"].str.split(ID_SEPARATOR).str[2]
    return cells[list(SAME_WORK)].assign(spec_runtime=runtime)


def baseline_times(cells: pd.DataFrame, baseline: str) -> pd.Series:
    """The ``baseline`` hardware's ``time_s`` in ``cells``, indexed by work (``_work``)."""
    base = cells[hardware_of(cells) == baseline]
    return pd.Series(base["time_s"].to_numpy(), index=pd.MultiIndex.from_frame(_work(base)))


def fill_speedup(cells: pd.DataFrame, base_t: pd.Series | None) -> pd.DataFrame:
    """``cells`` with ``speedup`` = ``base_t`` of the same work / ``time_s`` (NaN where
    ``base_t`` has no such work or is None)."""
    out = cells.copy()
    if base_t is None or out.empty:
        out["speedup"] = float("nan")
        return out
    keys = pd.MultiIndex.from_frame(_work(out))
    out["speedup"] = base_t.reindex(keys).to_numpy() / out["time_s"].to_numpy()
    return out


def with_speedup(cells: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """``cells`` with ``speedup`` = time_s of the ``baseline`` hardware's cell of the same work
    (``SAME_WORK`` and the spec's runtime, the third part of ``cell_id``: ``default`` compares
    each kind's default runtime) / this cell's time_s; NaN without a baseline, where the
    baseline's cell failed or is missing (a ``system:`` baseline for a single-device cell).
    The whole table at once; ``SpeedupFiller`` does the same per frame."""
    if baseline is None or cells.empty:
        return fill_speedup(cells, None)
    return fill_speedup(cells, baseline_times(cells, baseline))


class SpeedupFiller:
    """Fills ``speedup`` frame by frame (module docstring) and passes frames to ``out``."""

    def __init__(self, tasks: Sequence[SweepTask], baseline: str | None,
                 out: Callable[[pd.DataFrame], None]) -> None:
        self.baseline, self.out = baseline, out
        self.pending = Counter((t.model, t.runtime) for t in baseline_tasks(tasks, baseline))
        self.base_parts: dict[tuple[str, str], list[pd.Series]] = defaultdict(list)
        self.base_t: dict[tuple[str, str], pd.Series] = {}
        self.held: dict[tuple[str, str], list[pd.DataFrame]] = defaultdict(list)

    def __call__(self, task: SweepTask, frame: pd.DataFrame) -> None:
        if self.baseline is None:
            self.out(fill_speedup(frame, None))
            return
        key = (task.model, task.runtime)
        self.held[key].append(frame)
        if self.baseline in task.devices:
            self.base_parts[key].append(baseline_times(frame, self.baseline))
            self.pending[key] -= 1
        if self.pending[key] > 0:
            return  # the baseline's other tasks of this (model, runtime) are still out
        if key in self.base_parts:
            self.base_t[key] = pd.concat(self.base_parts.pop(key))
        for held in self.held.pop(key):
            self.out(fill_speedup(held, self.base_t.get(key)))

    @property
    def held_frames(self) -> int:
        """Frames waiting for their baseline (0 once every task has come)."""
        return sum(len(v) for v in self.held.values())


def collect_cells(tasks: Sequence[SweepTask], start: Callable[[Deliver], None]) -> pd.DataFrame:
    """Run ``start(deliver)`` (a scheduler bound to its tasks), check every delivery and return
    the cells sorted by ``cell_id``, speedups as the tasks computed them (tests, tools)."""
    sink = MemorySink()
    ledger = TaskLedger(tasks, lambda task, frame: sink.add(frame))
    start(ledger.deliver)
    ledger.finish()
    return sink.close("", 0.0).cells
