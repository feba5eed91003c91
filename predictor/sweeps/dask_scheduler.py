"""Sweep tasks on a Dask cluster: ``--scheduler dask-local:N`` and ``dask://HOST:PORT``.

Registers both prefixes in ``schedulers.SCHEDULERS`` (``(tasks, address, deliver) -> None``,
calling ``deliver(task, frame)`` once per task as it completes); ``schedulers.get_scheduler``
imports this module on first use of either. The address is read and the client opened by
``predictor.dask_client`` (as for ``roofcast train --scheduler``; bad addresses are
``dask_client.DaskSchedulerError``). Each task is one call of ``tasks.run_task``
(``client.map(..., pure=False, retries=RETRIES)``), started in list order (the baseline's
tasks first); results are delivered and released as they complete, so the client holds one
at a time. A task that still fails (``RETRIES + 1`` raises, or ``KilledWorker``) becomes one
error row per cell of the task and the sweep goes on. A cluster left without a worker for
``NO_WORKERS_TIMEOUT_S`` (all died, none restarted) ends the sweep with a ``DaskSchedulerError``
instead of a wait for ever. Graphs are imported once per worker process (module-level LRU
cache). Rationale: docs/design/module-notes.md.
"""

from __future__ import annotations

import time
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

#: seconds a cluster may have no worker while tasks are pending before the sweep gives up
NO_WORKERS_TIMEOUT_S = 120.0

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
    for future in _completed(client, futures):
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


def _completed(client, futures):
    """``futures`` as they complete (``as_completed``, no default client needed); while none is
    ready, the cluster's workers are counted each second: none for ``NO_WORKERS_TIMEOUT_S`` is
    a ``DaskSchedulerError``."""
    pending = as_completed(futures, loop=client.loop)
    check_at, alone_since = 0.0, None
    while not pending.is_empty():
        if pending.has_ready():
            yield next(pending)
            alone_since = None
            continue
        now = time.monotonic()
        if now >= check_at:
            check_at = now + 1.0
            alone_since = None if client.nthreads() else (alone_since or now)
            if alone_since is not None and now - alone_since > NO_WORKERS_TIMEOUT_S:
                raise dask_client.DaskSchedulerError(
                    f"the Dask cluster has had no worker for {NO_WORKERS_TIMEOUT_S:g} s with "
                    "tasks pending (its workers died and were not restarted); restart the "
                    "workers or use fewer per machine (dask-local:N)")
        time.sleep(0.05)


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
