"""Sweep tasks on a Dask cluster: ``--scheduler dask-local:N`` and ``--scheduler dask://HOST:PORT``.

Registers two prefixes in ``schedulers.SCHEDULERS`` (a scheduler function is
``(tasks, address, deliver) -> None``, calling ``deliver(task, frame)`` once per task as it
completes; ``schedulers.get_scheduler`` imports this module on first use of either prefix):

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
complete (``distributed.as_completed``) and delivered at once, then released, so the client
holds one result at a time (the sweep's sink streams it on). One ``client.map`` gives the
tasks priorities in list order, so they start in the order ``run_sweep`` planned (the
baseline's tasks first). A task that still fails (its function raised ``RETRIES + 1`` times, or its worker died too
often: ``KilledWorker``) becomes one error row per cell of the task — the sweep goes on and the
failure is reported per cell, as ``tasks.run_task`` reports the failures it catches itself.

Graphs are imported once per worker process, not per cell: ``run_task`` is pickled by
reference, so each worker runs the module-level function with its module-level LRU cache.

The address is read and the client opened by ``predictor.dask_client`` (the same parser and
connector as ``roofcast train --scheduler``): bad addresses are user errors
(``dask_client.DaskSchedulerError``, a ``PredictionError``): a malformed ``dask-local:N`` /
``dask://HOST:PORT`` at once, an unreachable scheduler after ``dask_client.CONNECT_TIMEOUT_S``, a
scheduler without workers after ``dask_client.WORKERS_TIMEOUT_S``, a worker that cannot import
``WORKER_MODULE`` before any task is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
from distributed import as_completed
from distributed.scheduler import KilledWorker

from roofcast.predictor import dask_client
from roofcast.predictor.sweeps import tasks as sweep_tasks
from roofcast.predictor.sweeps.cells import error_rows
from roofcast.predictor.sweeps.schedulers import register_scheduler
from roofcast.predictor.sweeps.stream import Deliver
from roofcast.predictor.sweeps.types import SweepTask

#: times a task whose function raised is re-submitted (Dask ``retries``); 3 runs in all
RETRIES = 2
#: the module every ``dask://`` worker must import (checked once before any task is sent)
WORKER_MODULE = "roofcast.predictor.sweeps.tasks"

RunTask = Callable[[SweepTask], pd.DataFrame]


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


def run_on_client(client, tasks: Sequence[SweepTask], deliver: Deliver, *,
                  run: RunTask | None = None) -> None:
    """Submit every task to ``client`` and ``deliver(task, frame)`` each as it completes (see
    the module docstring). ``run`` (default ``tasks.run_task``) must be importable by the
    workers."""
    run = sweep_tasks.run_task if run is None else run
    # one map (one graph update), not a submit per task: the scheduler sees the whole batch of
    # independent tasks at once and queues them, handing a worker a task when a thread frees
    futures = client.map(run, list(tasks), pure=False, retries=RETRIES)
    index = {future.key: i for i, future in enumerate(futures)}
    done = [False] * len(tasks)
    for future in as_completed(futures, loop=client.loop):  # no default client needed
        i = index[future.key]
        # result(), not a look at future.status: a finished task whose worker died since (a
        # bystander of a killed worker) is being recomputed — result() waits for it, where the
        # status would read "pending" for a moment and the task pass for failed
        try:
            frame = future.result()
        except Exception as exc:  # raised every try, or KilledWorker: error rows for its cells
            frame = failed_task_rows(tasks[i], _failure_message(exc))
        future.release()
        done[i] = True
        deliver(tasks[i], frame)
    missing = [t.task_id for t, d in zip(tasks, done, strict=True) if not d]
    if missing:  # as_completed yields every future once; a gap is a bug, never a short table
        raise RuntimeError(f"Dask returned no result for task(s) {missing}")


@register_scheduler("dask-local")
def run_dask_local(tasks: Sequence[SweepTask], address: str, deliver: Deliver) -> None:
    """``dask-local:N``: a fresh ``LocalCluster`` of N single-threaded worker processes."""
    spec = dask_client.SchedulerSpec("dask-local",
                                     workers=dask_client.parse_local_workers(address))
    with dask_client.open_client(spec) as client:
        run_on_client(client, tasks, deliver)


@register_scheduler("dask")
def run_dask_remote(tasks: Sequence[SweepTask], address: str, deliver: Deliver) -> None:
    """``dask://HOST:PORT``: the running cluster behind that scheduler (left running)."""
    spec = dask_client.SchedulerSpec("dask", address=dask_client.parse_remote_address(address))
    with dask_client.open_client(spec, (WORKER_MODULE,)) as client:
        run_on_client(client, tasks, deliver)
