"""Run a sweep's tasks on a scheduler: ``run_sweep(spec, scheduler="local", sink=None)``.

Schedulers are a registry, ``SCHEDULERS``: prefix -> ``fn(tasks, address, deliver) -> None``,
added with ``@register_scheduler(prefix)``; each runs every task and calls
``deliver(task, frame)`` once per task as it finishes, so the client never holds the whole
sweep. The text is ``PREFIX``, ``PREFIX:ADDRESS`` or ``PREFIX://ADDRESS``; optional engines'
prefixes (Dask) are registered by their module, imported on first use (``PLUGIN_MODULES``).
``run_sweep`` plans the tasks (``tasks.plan_tasks``; the baseline's first), runs them and
streams each frame through ``stream.TaskLedger`` (every cell exactly once, else
``SweepIntegrityError``), ``stream.SpeedupFiller`` and the sink (``stream.MemorySink`` or
``output.DatasetWriter``). On any failure, Ctrl-C or SIGTERM (``SystemExit(143)``) the sink
is aborted. ``elapsed_s`` is the wall time of planning + running + checking + the sink.
Details: docs/design/module-notes.md.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from roofcast.predictor.dask_client import split_scheduler as parse_scheduler
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.sweeps.spec import MAX_ENTRY_CELLS
from roofcast.predictor.sweeps.stream import (
    SAME_WORK,
    CellSink,
    Deliver,
    MemorySink,
    Progress,
    SpeedupFiller,
    SweepIntegrityError,
    TaskLedger,
    baseline_first,
    collect_cells,
    hardware_of,
    with_speedup,
)
from roofcast.predictor.sweeps.tasks import plan_tasks, run_task
from roofcast.predictor.sweeps.types import SweepResult, SweepSpec, SweepTask

__all__ = ["PLUGIN_MODULES", "SAME_WORK", "SCHEDULERS", "Deliver", "Progress", "Scheduler",
           "SweepIntegrityError", "SweepSchedulerError", "collect_cells", "get_scheduler",
           "hardware_of", "parse_scheduler", "register_scheduler", "run_local", "run_sweep",
           "with_speedup"]

#: ``fn(tasks, address, deliver)``: run every task, ``deliver(task, frame)`` each once
Scheduler = Callable[[Sequence[SweepTask], str, Deliver], None]

SCHEDULERS: dict[str, Scheduler] = {}
#: prefix -> module that registers it when imported (optional dependencies)
PLUGIN_MODULES: dict[str, str] = {
    "dask": "roofcast.predictor.sweeps.dask_scheduler",
    "dask-local": "roofcast.predictor.sweeps.dask_scheduler",
}


class SweepSchedulerError(PredictionError):
    """The scheduler text names no known scheduler, or its engine is not installed."""


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
def run_local(tasks: Sequence[SweepTask], address: str, deliver: Deliver) -> None:
    """In-process: the tasks one after another (each one vectorised call), each delivered as
    it finishes."""
    if address:
        raise SweepSchedulerError(f"scheduler 'local' takes no address (got {address!r})")
    for task in tasks:
        deliver(task, run_task(task))


def _raise_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def terminate_as_exit() -> Iterator[None]:
    """Within the block, SIGTERM raises ``SystemExit(128 + 15)`` so ``finally``/``except``
    clean up as on Ctrl-C; only in the main thread and where SIGTERM has its default action (a
    host's own handler is left alone). The previous handler is restored after."""
    default = (threading.current_thread() is threading.main_thread()
               and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    if default:
        signal.signal(signal.SIGTERM, _raise_exit)
    try:
        yield
    finally:
        if default:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_sweep(spec: SweepSpec, scheduler: str = "local", *, progress: Progress | None = None,
              cells_per_task: int | None = None, sink: CellSink | None = None) -> SweepResult:
    """Plan, run on ``scheduler``, check and stream the sweep into ``sink`` (default: in
    memory) — module docstring."""
    sink = MemorySink() if sink is None else sink
    start = time.perf_counter()
    with terminate_as_exit():
        return _run(spec, scheduler, progress, cells_per_task, sink, start)


def _run(spec: SweepSpec, scheduler: str, progress: Progress | None,
         cells_per_task: int | None, sink: CellSink, start: float) -> SweepResult:
    try:
        prefix, address = parse_scheduler(scheduler)
        fn = get_scheduler(prefix)  # before any work: a bad name fails fast
        tasks = baseline_first(plan_tasks(spec, cells_per_task=cells_per_task,
                                          max_task_cells=MAX_ENTRY_CELLS.value()), spec.baseline)
        filler = SpeedupFiller(tasks, spec.baseline, sink.add)
        ledger = TaskLedger(tasks, filler, progress)
        if progress is not None:
            progress(0, ledger.total)
        fn(tasks, address, ledger.deliver)
        ledger.finish()
        if filler.held_frames:  # every task came, so every baseline did: a bug if not
            raise SweepIntegrityError(f"{filler.held_frames} frame(s) never got their baseline")
        return sink.close(scheduler, time.perf_counter() - start)
    except BaseException:
        sink.abort()
        raise
