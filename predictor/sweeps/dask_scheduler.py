"""Sweep tasks on a Dask cluster: ``--scheduler dask-local:N`` and ``--scheduler dask://HOST:PORT``.

Registers two prefixes in ``schedulers.SCHEDULERS`` (a scheduler function is
``(tasks, address, advance) -> list[pd.DataFrame]``, one frame per task, in task order;
``schedulers.get_scheduler`` imports this module on first use of either prefix):

* ``dask-local:N`` starts a ``distributed.LocalCluster`` of N worker *processes* with one
  thread each (the vectorised predictor holds the GIL for much of a task, so processes, not
  threads, give parallelism) and shuts it down when the sweep ends;
* ``dask://HOST:PORT`` connects a ``Client`` to a running scheduler (``dask scheduler`` +
  ``dask worker tcp://HOST:PORT`` on machines that have roofcast installed) and leaves the
  cluster running.

Each task is one call of ``tasks.run_task`` (``client.map(..., pure=False, retries=RETRIES)``): ``pure=False``
gives every submission its own key (two equal tasks are never merged), ``retries`` re-runs a
task whose function raised; a task whose *worker died* is re-run by the scheduler itself (up to
``distributed.scheduler.allowed-failures`` deaths, default 3). Results are gathered as they
complete (``distributed.as_completed``) so ``advance(n_cells)`` ticks the progress bar per
finished task. A task that still fails (its function raised ``RETRIES + 1`` times, or its worker died too
often: ``KilledWorker``) becomes one error row per cell of the task — the sweep goes on and the
failure is reported per cell, as ``tasks.run_task`` reports the failures it catches itself.

Graphs are imported once per worker process, not per cell: ``run_task`` is pickled by
reference, so each worker runs the module-level function with its module-level LRU cache.

Bad addresses are user errors (``DaskSchedulerError``, a ``PredictionError``): a malformed
``dask-local:N`` / ``dask://HOST:PORT`` at once, an unreachable scheduler after
``CONNECT_TIMEOUT_S``, a scheduler without workers after ``WORKERS_TIMEOUT_S``, a worker that
cannot import roofcast before any task is sent.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Sequence

import pandas as pd
from distributed import Client, LocalCluster, as_completed
from distributed.scheduler import KilledWorker

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.sweeps import tasks as sweep_tasks
from roofcast.predictor.sweeps.cells import error_rows
from roofcast.predictor.sweeps.schedulers import register_scheduler
from roofcast.predictor.sweeps.types import SweepTask

#: times a task whose function raised is re-submitted (Dask ``retries``); 3 runs in all
RETRIES = 2
#: seconds to reach a ``dask://`` scheduler before giving up with a clear error
CONNECT_TIMEOUT_S = 10.0
#: seconds a ``dask://`` scheduler may take to have at least one worker
WORKERS_TIMEOUT_S = 30.0
#: the module every ``dask://`` worker must import (checked once before any task is sent)
WORKER_MODULE = "roofcast.predictor.sweeps.tasks"
#: the largest ``dask-local:N`` (each worker is a process importing the predictor)
MAX_LOCAL_WORKERS = 256

#: ``advance(n_cells)``: a task of ``n_cells`` cells finished (the progress bar's tick)
Advance = Callable[[int], None] | None
RunTask = Callable[[SweepTask], pd.DataFrame]

_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]+)$")


class DaskSchedulerError(PredictionError):
    """A Dask scheduler address is malformed or unreachable: the message says what to write."""


# ---------------------------------------------------------------- addresses


def parse_local_workers(address: str) -> int:
    """``"2"`` or ``"dask-local:2"`` -> 2 (1 <= N <= ``MAX_LOCAL_WORKERS``)."""
    text = address.strip().removeprefix("dask-local").removeprefix(":")
    if not text.isdigit() or not 1 <= int(text) <= MAX_LOCAL_WORKERS:
        raise DaskSchedulerError(
            f"bad scheduler 'dask-local:{text}': write dask-local:N with N the number of worker "
            f"processes, 1 to {MAX_LOCAL_WORKERS} (e.g. dask-local:2)")
    return int(text)


def parse_remote_address(address: str) -> str:
    """``"HOST:PORT"``, ``"//HOST:PORT"`` or ``"dask://HOST:PORT"`` -> ``"tcp://HOST:PORT"``."""
    text = address.strip()
    for prefix in ("dask://", "dask:", "tcp://", "//"):
        text = text.removeprefix(prefix)
    match = _HOST_PORT.match(text)
    if match is None or not 1 <= int(match["port"]) <= 65535:
        raise DaskSchedulerError(
            f"bad scheduler address {address!r}: write dask://HOST:PORT, the address "
            "`dask scheduler` prints (e.g. dask://10.0.0.5:8786), or dask-local:N for N "
            "workers on this machine")
    return f"tcp://{match['host']}:{match['port']}"


# ---------------------------------------------------------------- running tasks


def failed_task_rows(task: SweepTask, message: str) -> pd.DataFrame:
    """One ``CELL_COLUMNS`` row per cell of ``task``: ``error`` = ``message``, NaN metrics,
    ``fits`` False (the dtypes of ``tasks.run_task``'s frames, so the Parquet parts agree)."""
    return error_rows(task, task.cells(), message)


def _failure_message(exc: BaseException) -> str:
    if isinstance(exc, KilledWorker):
        return (f"the worker process running this task died repeatedly ({exc}); the task may "
                "need more memory than a worker has")
    return f"task failed on the Dask worker after {RETRIES + 1} tries: {type(exc).__name__}: {exc}"


def run_on_client(client, tasks: Sequence[SweepTask], advance: Advance = None, *,
                  run: RunTask | None = None) -> list[pd.DataFrame]:
    """Submit every task to ``client``; the frames in task order (see the module docstring).

    ``run`` (default ``tasks.run_task``) must be importable by the workers.
    """
    run = sweep_tasks.run_task if run is None else run
    # one map (one graph update), not a submit per task: the scheduler sees the whole batch of
    # independent tasks at once and queues them, handing a worker a task when a thread frees
    futures = client.map(run, list(tasks), pure=False, retries=RETRIES)
    index = {future.key: i for i, future in enumerate(futures)}
    out: list[pd.DataFrame | None] = [None] * len(tasks)
    for future in as_completed(futures, loop=client.loop):  # no default client needed
        i = index[future.key]
        if future.status == "finished":
            out[i] = future.result()
        else:  # "error" (raised every try) or "lost"/"cancelled" surfaces as an exception
            out[i] = failed_task_rows(tasks[i], _failure_message(future.exception()))
        future.release()
        if advance is not None:
            advance(tasks[i].n_cells)
    missing = [t.task_id for t, frame in zip(tasks, out, strict=True) if frame is None]
    if missing:  # as_completed yields every future once; a gap is a bug, never a short table
        raise RuntimeError(f"Dask returned no result for task(s) {missing}")
    return out


@register_scheduler("dask-local")
def run_dask_local(tasks: Sequence[SweepTask], address: str,
                   advance: Advance = None) -> list[pd.DataFrame]:
    """``dask-local:N``: a fresh ``LocalCluster`` of N single-threaded worker processes."""
    n_workers = parse_local_workers(address)
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as client:
        return run_on_client(client, tasks, advance)


@register_scheduler("dask")
def run_dask_remote(tasks: Sequence[SweepTask], address: str,
                    advance: Advance = None) -> list[pd.DataFrame]:
    """``dask://HOST:PORT``: the running cluster behind that scheduler (left running)."""
    url = parse_remote_address(address)
    try:
        client = Client(url, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise DaskSchedulerError(
            f"cannot reach a Dask scheduler at {url} ({exc}); "
            "start one (`dask scheduler`, then `dask worker " + url + "`) or use dask-local:N"
        ) from exc
    with client:
        try:
            client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
        except TimeoutError as exc:
            raise DaskSchedulerError(
                f"the Dask scheduler at {url} has no workers after {WORKERS_TIMEOUT_S:g} s; "
                f"start some with `dask worker {url}` (roofcast installed on their machines)"
            ) from exc
        try:  # a worker without roofcast would fail every task: say so once instead
            client.run(importlib.import_module, WORKER_MODULE)
        except ImportError as exc:
            raise DaskSchedulerError(
                f"a worker of the Dask cluster at {url} cannot import {WORKER_MODULE} ({exc}); "
                "install roofcast (this version) in every worker's environment") from exc
        return run_on_client(client, tasks, advance)
