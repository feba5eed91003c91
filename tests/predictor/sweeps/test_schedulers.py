"""``run_sweep`` and the scheduler registry: the local scheduler, parsing, the progress
callback, and the no-loss/no-duplicate check against misbehaving schedulers."""

from __future__ import annotations

import pandas as pd
import pytest

from roofcast.predictor.sweeps import schedulers as sched
from roofcast.predictor.sweeps.schedulers import (
    SweepIntegrityError,
    SweepSchedulerError,
    parse_scheduler,
    register_scheduler,
    run_sweep,
)
from roofcast.predictor.sweeps.spec import read_spec
from roofcast.predictor.sweeps.tasks import run_task

from .helpers import SMALL, write_spec


@pytest.fixture
def small(tmp_path):
    return read_spec(write_spec(tmp_path, SMALL))


@pytest.fixture
def registry(monkeypatch):
    """A scratch copy of SCHEDULERS, so test schedulers do not leak."""
    monkeypatch.setattr(sched, "SCHEDULERS", dict(sched.SCHEDULERS))
    return sched.SCHEDULERS


@pytest.mark.parametrize(("text", "parsed"), [
    ("local", ("local", "")), ("dask-local:2", ("dask-local", "2")),
    ("dask://10.0.0.5:8786", ("dask", "10.0.0.5:8786")), (" dask://h:1 ", ("dask", "h:1")),
])
def test_parse_scheduler(text, parsed):
    assert parse_scheduler(text) == parsed


def test_local_sweep_sorted_complete_with_progress(small):
    seen = []
    result = run_sweep(small, progress=lambda done, total: seen.append((done, total)),
                       cells_per_task=4)
    cells = result.cells
    assert len(cells) == small.n_cells == 16
    assert list(cells["cell_id"]) == sorted(cells["cell_id"])
    assert result.n_errors == 4  # the unknown device's cells, reported, not raised
    assert result.scheduler == "local"
    assert result.elapsed_s > 0
    assert seen[0] == (0, 16)
    assert seen[-1] == (16, 16)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert cells["task_id"].nunique() == 4  # 4 devices, 4 cells each


def test_unknown_scheduler_and_local_address(small):
    with pytest.raises(SweepSchedulerError, match="unknown scheduler 'slurm'"):
        run_sweep(small, "slurm://x")
    with pytest.raises(SweepSchedulerError, match="takes no address"):
        run_sweep(small, "local:3")


def test_missing_plugin_module_is_a_clear_error(small, registry, monkeypatch):
    monkeypatch.setitem(sched.PLUGIN_MODULES, "fancy", "roofcast.predictor.sweeps.no_such_mod")
    with pytest.raises(SweepSchedulerError, match=r"needs 'roofcast\.predictor\.sweeps\.no_such"):
        run_sweep(small, "fancy:1")


def test_registered_scheduler_any_order_same_result(small, registry):
    @register_scheduler("backwards")
    def backwards(tasks, address, deliver):
        assert address == "x"
        for task in reversed(tasks):
            deliver(task, run_task(task))

    assert registry["backwards"] is backwards
    local = run_sweep(small, cells_per_task=4).cells
    other = run_sweep(small, "backwards:x", cells_per_task=4)
    assert other.scheduler == "backwards:x"
    pd.testing.assert_frame_equal(local, other.cells)


def _first_twice(tasks, deliver):
    for task in [*tasks, tasks[0]]:  # a retried task delivered twice
        deliver(task, run_task(task))


def _one_lost(tasks, deliver):
    for task in tasks[1:]:
        deliver(task, run_task(task))


def _cell_lost(tasks, deliver):
    for i, task in enumerate(tasks):
        frame = run_task(task)
        deliver(task, frame.iloc[1:] if i == 0 else frame)


def _cell_twice(tasks, deliver):
    for i, task in enumerate(tasks):
        frame = run_task(task)
        deliver(task, pd.concat([frame, frame.iloc[:1]]) if i == 1 else frame)


def _renamed(tasks, deliver):
    for task in tasks:
        frame = run_task(task)
        deliver(task, frame.assign(cell_id=frame["cell_id"] + "x"))


def _swapped(tasks, deliver):  # task 0's cells delivered as task 1 and back
    frames = [run_task(t) for t in tasks]
    deliver(tasks[0], frames[1])
    deliver(tasks[1], frames[0])


def _no_error_column(tasks, deliver):
    for task in tasks:
        deliver(task, run_task(task).drop(columns="error"))


def _foreign_task(tasks, deliver):
    from dataclasses import replace
    for task in tasks:
        deliver(replace(task, task_id=task.task_id + 100), run_task(task))


@pytest.mark.parametrize(("scheduler", "message"), [
    (_first_twice, "delivered more than once"), (_one_lost, "task.s. missing"),
    (_cell_lost, "cell.s. missing"), (_cell_twice, "more than once"),
    (_renamed, "unplanned cell"), (_swapped, "missing"),
    (_no_error_column, "columns"), (_foreign_task, "unplanned"),
])
def test_lost_or_duplicated_cells_raise(small, registry, scheduler, message):
    register_scheduler("bad")(lambda tasks, address, deliver: scheduler(tasks, deliver))
    with pytest.raises(SweepIntegrityError, match=message):
        run_sweep(small, "bad", cells_per_task=4)


def test_speedup_is_the_baseline_time_over_the_cell_time(tmp_path):
    from .helpers import CPU, GPU, GPU2
    body = SMALL + f'baseline = "{GPU2}"\n'
    res = run_sweep(read_spec(write_spec(tmp_path, body)))
    cells = res.cells.set_index(["device", "batch", "precision"])
    base = cells.loc[GPU2, "time_s"]
    for dev in (GPU, GPU2, CPU):
        want = base / cells.loc[dev, "time_s"]
        pd.testing.assert_series_equal(cells.loc[dev, "speedup"], want, check_names=False)
    assert (cells.loc[GPU2, "speedup"] == 1.0).all()
    assert cells.loc["no-such-device", "speedup"].isna().all()  # failed cells: no speedup
    plain = run_sweep(read_spec(write_spec(tmp_path / "plain", SMALL)))
    assert plain.cells["speedup"].isna().all()  # no baseline: NaN, not 1
