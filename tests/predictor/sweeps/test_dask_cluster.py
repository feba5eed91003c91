"""The Dask schedulers on a real 2-worker ``LocalCluster`` (processes, one thread each).

* ``dask-local:2`` gives the very table of ``local`` (same cells, same numbers, same per-cell
  errors for an unknown device) and ticks the progress to the total;
* a worker process killed mid-sweep (``os._exit`` inside a task, once, recorded in a marker file)
  loses and duplicates no cell: the scheduler re-runs the task on a live worker;
* a task whose function raises is retried ``RETRIES`` times, then reported as error rows for
  its own cells only; a task that kills its worker every time ends as ``KilledWorker`` error
  rows, the rest of the sweep intact.

Clusters run with ``allowed-failures`` = 1 (a task may see one worker die, the second death is
``KilledWorker``). One serves the tests that kill no worker; each test that kills workers gets
its own, so none starts while nannies still restart (or, under load, failed to restart) another
test's victims. Each is torn down with timeouts and its surviving worker processes killed
(``helpers.local_cluster``); a hang fails its test by a signal (``pytestmark``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
from pathlib import Path

import cloudpickle
import dask
import pandas as pd
import pytest
from distributed import LocalCluster

from roofcast.predictor import dask_client
from roofcast.predictor.sweeps import dask_scheduler as ds
from roofcast.predictor.sweeps.schedulers import collect_cells, run_local, run_sweep
from roofcast.predictor.sweeps.tasks import plan_tasks, run_task
from roofcast.predictor.sweeps.types import SweepSpec

from .helpers import local_cluster

# a hang (a worker gone, the client in a futex wait) fails its own test in minutes, not the
# suite's 10, and by a signal: the thread method would end the whole run; each test here takes
# seconds idle, tens under a load of 2
pytestmark = pytest.mark.timeout(240, method="signal")

# the fault-injecting task functions below travel to the workers by value (the test package is
# not importable in the worker processes)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SPEC = SweepSpec(models=("mobilenet_v2",),
                 devices=("h100-sxm", "a100-80gb-sxm", "no-such-device", "l4", "epyc-9654"),
                 batches=(1, 4), precisions=("fp32", "fp16"))
CELLS_PER_TASK = 4  # one device per task: 5 tasks, enough to spread over 2 workers


@pytest.fixture(scope="module")
def tasks():
    return plan_tasks(SPEC, cells_per_task=CELLS_PER_TASK)


def _on_client(client, tasks, run):
    """The checked cells of ``tasks`` run with ``run`` on ``client`` (each task delivered once,
    each frame exactly its task's cells), sorted by cell_id."""
    return collect_cells(tasks, lambda deliver: ds.run_on_client(client, tasks, deliver, run=run))


@pytest.fixture(scope="module")
def local_cells(tasks):
    return collect_cells(tasks, lambda deliver: run_local(tasks, "", deliver))


@pytest.fixture(scope="module")
def client():
    with _cluster() as c:
        yield c


@pytest.fixture
def fresh_client():
    """A cluster of its own for a test that kills workers: no test starts on a cluster whose
    nannies are still restarting (or failed to restart, under load) the last test's victims."""
    with _cluster() as c:
        yield c


@contextlib.contextmanager
def _cluster():
    # allowed-failures 1: the second death of a task's worker is KilledWorker (default 3);
    # worker-saturation 1.0: a worker holds only the task it runs (the 5 tasks of one map are
    # queued on the scheduler: more than 2 x threads), so a killed worker takes no bystander
    # task with it (which, at allowed-failures 1, could die twice too)
    config = {"distributed.scheduler.allowed-failures": 1,
              "distributed.scheduler.worker-saturation": 1.0}
    with dask.config.set(config), \
            local_cluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=":0", silence_logs=logging.ERROR) as (_, c):
        c.wait_for_workers(2, timeout=120)
        yield c


def _die_once(task, *, victim: int, marker: str):
    """Kill this worker process the first time task ``victim`` runs (pid -> ``marker``)."""
    if task.task_id == victim and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os._exit(1)
    return run_task(task)


def _die_always(task, *, victim: int):
    if task.task_id == victim:
        os._exit(1)
    return run_task(task)


def _raise_for(task, *, victim: int, log: str):
    if task.task_id == victim:
        with open(log, "a") as f:
            f.write("try\n")
        raise RuntimeError("boom")
    return run_task(task)


def _workers_alive() -> set[int]:
    """This process's live multiprocessing-spawned descendants (Dask worker processes)."""
    import psutil

    alive = set()
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "spawn_main" in " ".join(proc.cmdline()) and proc.status() != "zombie":
                alive.add(proc.pid)
    return alive


def test_dask_local_gives_the_local_table(tasks):
    local = run_sweep(SPEC, "local", cells_per_task=CELLS_PER_TASK)
    ticks = []
    before = _workers_alive()
    dask2 = run_sweep(SPEC, "dask-local:2", cells_per_task=CELLS_PER_TASK,
                      progress=lambda done, total: ticks.append((done, total)))
    assert _workers_alive() <= before  # dask-local's workers are gone with the sweep
    pd.testing.assert_frame_equal(dask2.cells, local.cells)
    assert len(local.cells) == SPEC.n_cells == 20
    bad = local.cells["device"] == "no-such-device"
    assert (local.cells.loc[bad, "error"] != "").all()
    assert bad.sum() == 4
    assert (local.cells.loc[~bad, "error"] == "").all()
    assert local.cells.loc[~bad, "time_s"].gt(0).all()
    assert ticks[-1] == (20, 20)
    assert [d for d, _ in ticks] == sorted(d for d, _ in ticks)
    assert len(ticks) == len(tasks) + 1  # the 0 tick, then one per task


def test_dask_address_runs_on_a_running_cluster_and_leaves_it_running(client, local_cells):
    url = client.scheduler.address  # tcp://127.0.0.1:PORT
    result = run_sweep(SPEC, "dask://" + url.removeprefix("tcp://"), cells_per_task=CELLS_PER_TASK)
    pd.testing.assert_frame_equal(result.cells, local_cells)
    assert len(client.scheduler_info(n_workers=-1)["workers"]) == 2  # the cluster is still up


def test_workers_without_roofcast_are_a_clear_error(client, monkeypatch):
    monkeypatch.setattr(ds, "WORKER_MODULE", "roofcast_not_installed_here")
    url = client.scheduler.address.removeprefix("tcp://")
    with pytest.raises(dask_client.DaskSchedulerError,
                       match=r"cannot import roofcast_not_installed_here"):
        run_sweep(SPEC, "dask://" + url)


def test_streamed_to_a_folder_on_the_cluster_equals_local_in_memory(client, tmp_path):
    from dataclasses import replace

    from roofcast.predictor.sweeps.output import (
        DatasetWriter,
        pareto_front,
        read_dataset,
        summary,
    )

    spec = replace(SPEC, baseline="l4")  # speedups: the baseline's tasks go first, any order
    local = run_sweep(spec, "local", cells_per_task=CELLS_PER_TASK).cells
    url = client.scheduler.address.removeprefix("tcp://")
    streamed = run_sweep(spec, "dask://" + url, cells_per_task=CELLS_PER_TASK,
                         sink=DatasetWriter(tmp_path / "out", name="d"))
    assert local["speedup"].notna().sum() == 16  # every predicted cell has l4's time
    pd.testing.assert_frame_equal(streamed.summary, summary(local), check_exact=True)
    pd.testing.assert_frame_equal(streamed.front, pareto_front(local), check_exact=True)
    back = read_dataset(tmp_path / "out").sort_values("cell_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(back, local, check_exact=True, check_dtype=False)


def _graph_imports() -> int:
    from roofcast.predictor.sweeps.family_graph import graph_cache

    return graph_cache.cache_info().misses


def test_each_worker_imports_a_graph_once_not_once_per_task(client, tasks):
    ds.run_on_client(client, tasks, lambda task, frame: None)
    imports = client.run(_graph_imports)
    distinct = len(SPEC.models) * len(SPEC.batches)  # (model, batch) pairs: 2
    # 5 tasks x 2 batches = 10 graph look-ups over 2 workers; each worker imports each
    # (model, batch) at most once, however many of the tasks it ran
    assert all(n <= distinct for n in imports.values()), imports
    assert sum(imports.values()) < len(tasks) * distinct


def test_workers_outliving_their_close_are_killed():
    import multiprocessing
    import time

    before = dask_client._children()
    stuck = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,),
                                                        daemon=True)
    stuck.start()
    try:
        dask_client.kill_survivors(before)
        stuck.join(timeout=30)
        assert stuck.exitcode == -9  # SIGKILL
    finally:
        if stuck.is_alive():
            stuck.kill()


def test_scheduler_without_workers_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(dask_client, "WORKERS_TIMEOUT_S", 0.5)
    with LocalCluster(n_workers=0, protocol="tcp", dashboard_address=":0") as empty, \
            pytest.raises(dask_client.DaskSchedulerError, match=r"has no workers after 0.5 s"):
        run_sweep(SPEC, "dask://" + empty.scheduler_address.removeprefix("tcp://"))


def test_killed_worker_loses_and_duplicates_no_cell(fresh_client, tasks, local_cells, tmp_path):
    marker = tmp_path / "killed"
    run = functools.partial(_die_once, victim=tasks[2].task_id, marker=str(marker))
    cells = _on_client(fresh_client, tasks, run)  # raises on a lost or duplicated cell
    assert marker.exists(), "the victim task never ran"
    killed_pid = int(marker.read_text())
    assert killed_pid not in fresh_client.run(os.getpid).values()  # that worker really died
    pd.testing.assert_frame_equal(cells, local_cells)


def test_raising_task_is_retried_then_reported_per_cell(client, tasks, local_cells, tmp_path):
    log = tmp_path / "tries"
    victim = tasks[0].task_id
    run = functools.partial(_raise_for, victim=victim, log=str(log))
    cells = _on_client(client, tasks, run)
    assert log.read_text().count("try") == ds.RETRIES + 1
    hit = cells["task_id"] == victim
    assert hit.sum() == tasks[0].n_cells
    assert cells.loc[hit, "error"].str.contains("RuntimeError: boom").all()
    assert cells.loc[hit, "time_s"].isna().all()
    pd.testing.assert_frame_equal(cells[~hit], local_cells[~hit])


def test_task_killing_its_worker_every_time_is_reported_per_cell(fresh_client, tasks, local_cells):
    victim = tasks[1].task_id
    cells = _on_client(fresh_client, tasks, functools.partial(_die_always, victim=victim))
    hit = cells["task_id"] == victim
    assert hit.sum() == tasks[1].n_cells
    assert cells.loc[hit, "error"].str.contains("worker process running this task died").all()
    pd.testing.assert_frame_equal(cells[~hit], local_cells[~hit])


def test_a_slow_client_still_gets_the_frames_of_a_killed_workers_bystanders(fresh_client, tasks,
                                                                            local_cells):
    """A finished task whose worker dies before the client looks at it is recomputed, not
    reported failed: the client (slow here: each delivery takes 0.3 s, as a sink writing a
    part may) waits for its result."""
    import time

    victim = tasks[1].task_id
    sink = []

    def slow(task, frame):
        time.sleep(0.3)
        sink.append(frame)

    def start(deliver):
        ds.run_on_client(fresh_client, tasks, lambda t, f: (slow(t, f), deliver(t, f)),
                         run=functools.partial(_die_always, victim=victim))

    cells = collect_cells(tasks, start)
    hit = cells["task_id"] == victim
    assert cells.loc[hit, "error"].str.contains("worker process running this task died").all()
    pd.testing.assert_frame_equal(cells[~hit], local_cells[~hit])


def _sleep_then_run(task):
    import time

    time.sleep(0.5)
    return run_task(task)


def test_a_cluster_without_workers_ends_the_sweep_instead_of_waiting(tasks, monkeypatch):
    """Every worker gone and none restarted (as under load, when nannies fail to restart the
    killed ones): a one-line DaskSchedulerError after ``NO_WORKERS_TIMEOUT_S``, not a hang."""
    monkeypatch.setattr(ds, "NO_WORKERS_TIMEOUT_S", 2.0)
    with local_cluster(n_workers=1, threads_per_worker=1, processes=False,
                       dashboard_address=":0", silence_logs=logging.ERROR) as (cluster, client):
        client.wait_for_workers(1, timeout=60)
        cluster.scale(0)
        delivered = []
        with pytest.raises(dask_client.DaskSchedulerError, match="no worker for 2 s"):
            ds.run_on_client(client, tasks, lambda t, f: delivered.append(t),
                             run=_sleep_then_run)
    assert len(delivered) < len(tasks)
