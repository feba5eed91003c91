"""The Dask schedulers' registration, address errors through ``run_sweep`` and error rows (no
cluster started here; see test_dask_cluster; the parsers: tests/predictor/test_dask_client.py)."""

from __future__ import annotations

import sys
import time

import pandas as pd
import pytest

from roofcast.predictor import dask_client
from roofcast.predictor.sweeps import dask_scheduler as ds
from roofcast.predictor.sweeps.schedulers import (
    SCHEDULERS,
    SweepSchedulerError,
    get_scheduler,
    run_sweep,
)
from roofcast.predictor.sweeps.tasks import plan_tasks, run_task, task_cell_ids
from roofcast.predictor.sweeps.types import CELL_COLUMNS, SweepSpec

SPEC = SweepSpec(models=("mobilenet_v2",), devices=("h100-sxm", "no-such-device"),
                 batches=(1, 2), precisions=("fp16",))


def test_both_prefixes_are_registered_on_first_use():
    assert get_scheduler("dask-local") is ds.run_dask_local
    assert get_scheduler("dask") is ds.run_dask_remote
    assert SCHEDULERS["dask-local"] is ds.run_dask_local


def test_without_dask_installed_the_prefix_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # "import distributed" now fails
    monkeypatch.delitem(sys.modules, ds.__name__)
    monkeypatch.delitem(SCHEDULERS, "dask-local")
    with pytest.raises(SweepSchedulerError, match=r"needs 'distributed', which is not installed"):
        get_scheduler("dask-local")


def test_bad_addresses_fail_through_run_sweep_before_any_work():
    with pytest.raises(dask_client.DaskSchedulerError, match=r"dask-local:0"):
        run_sweep(SPEC, "dask-local:0")
    with pytest.raises(dask_client.DaskSchedulerError, match=r"dask://HOST:PORT"):
        run_sweep(SPEC, "dask://nohost")


def test_unreachable_scheduler_is_a_clear_error_within_the_timeout(monkeypatch):
    monkeypatch.setattr(dask_client, "CONNECT_TIMEOUT_S", 1.0)
    start = time.perf_counter()
    with pytest.raises(dask_client.DaskSchedulerError, match=r"cannot reach a Dask scheduler at tcp://nohost:1"):
        run_sweep(SPEC, "dask://nohost:1")
    assert time.perf_counter() - start < 15  # 1 s timeout + connection teardown, not a hang


def test_failed_task_rows_have_the_task_cells_and_run_task_dtypes():
    task = plan_tasks(SPEC)[0]
    rows = ds.failed_task_rows(task, "RuntimeError: boom")
    assert list(rows.columns) == list(CELL_COLUMNS)
    assert list(rows["cell_id"]) == task_cell_ids(task)
    assert (rows["error"] == "RuntimeError: boom").all()
    assert rows["time_s"].isna().all()
    assert not rows["fits"].any()
    assert (rows["task_id"] == task.task_id).all()
    pd.testing.assert_series_equal(rows.dtypes, run_task(task).dtypes)
