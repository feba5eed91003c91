"""The streamed client side of a sweep (``stream``, ``output.DatasetWriter``): tasks' cells are
disjoint by construction, the Parquet sink gives the in-memory results (table, summary, Pareto
front) exactly, speedups are filled whatever order the baseline arrives in, and a failed or
interrupted sweep leaves nothing behind."""

from __future__ import annotations

import pandas as pd
import pytest

from roofcast.predictor.sweeps import output
from roofcast.predictor.sweeps import schedulers as sched
from roofcast.predictor.sweeps.output import (
    DatasetWriter,
    SweepOutputError,
    pareto_front,
    read_dataset,
    summary,
)
from roofcast.predictor.sweeps.schedulers import register_scheduler, run_sweep, with_speedup
from roofcast.predictor.sweeps.spec import read_spec
from roofcast.predictor.sweeps.tasks import plan_tasks, run_task
from roofcast.predictor.sweeps.types import FAMILIES

from .helpers import write_spec

#: graph, serving and parallel cells, systems, plans, a baseline (the brief's example spec)
MIXED = """
[sweep]
name = "mixed"
models = ["resnet50", "llama-3.1-8b", "llm:gpt2"]
devices = ["h100-sxm", "a100-80gb-sxm", "system:hgx-h100"]
batches = [1, 8]
precisions = ["fp16"]
modes = ["infer", "train", "serve"]
plans = ["single", "tp2", "pp2 tp2"]
baseline = "a100-80gb-sxm"
"""
CELLS_PER_TASK = 8  # several tasks per family, several frames per Parquet part


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return read_spec(write_spec(tmp_path_factory.mktemp("mixed"), MIXED))


@pytest.fixture(scope="module")
def in_memory(mixed):
    return run_sweep(mixed, cells_per_task=CELLS_PER_TASK)


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(sched, "SCHEDULERS", dict(sched.SCHEDULERS))
    return sched.SCHEDULERS


def test_tasks_of_a_mixed_spec_are_disjoint_and_cover_the_grid(mixed):
    tasks = plan_tasks(mixed, cells_per_task=CELLS_PER_TASK)
    assert {t.family for t in tasks} == set(FAMILIES)
    ids = [c for t in tasks for c in t.cell_ids()]
    assert len(ids) == len(set(ids)) == mixed.n_cells  # no cell in two tasks, none left out
    assert len(tasks) > len(FAMILIES)


def test_streamed_sink_equals_in_memory(mixed, in_memory, tmp_path, monkeypatch):
    # tiny parts and compaction limits: frames are split and merged many times
    monkeypatch.setattr(output, "ROWS_PER_PART", 7)
    monkeypatch.setattr(output, "COMPACT_ROWS", 5)
    streamed = run_sweep(mixed, cells_per_task=CELLS_PER_TASK,
                         sink=DatasetWriter(tmp_path / "out", name=mixed.name, spec=mixed))
    cells = in_memory.cells
    assert streamed.cells is None
    assert streamed.folder == str(tmp_path / "out")
    assert (streamed.n_cells, streamed.n_errors) == (len(cells), in_memory.n_errors)
    assert 0 < in_memory.n_errors < len(cells)
    assert cells["speedup"].notna().any()  # the baseline's speedups are in both
    pd.testing.assert_frame_equal(streamed.summary, summary(cells), check_exact=True)
    pd.testing.assert_frame_equal(streamed.front, pareto_front(cells), check_exact=True)
    assert set(streamed.front["family"]) == set(FAMILIES)
    parts = sorted((tmp_path / "out").glob("part-*.parquet"))
    assert len(parts) >= -(-len(cells) // 7)  # ceil(cells / 7): no part over the limit
    for part in parts:
        ids = pd.read_parquet(part)["cell_id"]
        assert 0 < len(ids) <= 7
        assert ids.is_monotonic_increasing
    back = read_dataset(tmp_path / "out").sort_values("cell_id").reset_index(drop=True)
    memory_back = read_dataset(output.write_dataset(in_memory, tmp_path / "mem"))
    pd.testing.assert_frame_equal(back, memory_back, check_exact=True)
    pd.testing.assert_frame_equal(back, cells, check_exact=True, check_dtype=False)


def test_speedups_wait_for_a_baseline_that_comes_last(mixed, in_memory, registry):
    tasks_seen = []

    @register_scheduler("baseline-last")
    def baseline_last(tasks, address, deliver):
        # the planner puts the baseline's tasks first; deliver them last instead
        ordered = [t for t in tasks if mixed.baseline not in t.devices]
        ordered += [t for t in tasks if mixed.baseline in t.devices]
        tasks_seen.extend(tasks)
        for task in ordered:
            deliver(task, run_task(task))

    late = run_sweep(mixed, "baseline-last", cells_per_task=CELLS_PER_TASK)
    firsts = [mixed.baseline in t.devices for t in tasks_seen]
    assert firsts == sorted(firsts, reverse=True)  # the baseline's tasks were planned first
    assert any(firsts)
    assert not all(firsts)
    pd.testing.assert_frame_equal(late.cells, in_memory.cells, check_exact=True)
    plain = pd.concat([run_task(t) for t in tasks_seen])
    whole = with_speedup(plain, mixed.baseline).sort_values("cell_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(late.cells, whole, check_exact=True)


@pytest.mark.parametrize("exc", [RuntimeError("scheduler crashed"), KeyboardInterrupt()])
def test_failed_or_interrupted_sweep_leaves_nothing(mixed, registry, tmp_path, monkeypatch,
                                                     exc):
    monkeypatch.setattr(output, "ROWS_PER_PART", 3)  # parts are on disk when it fails

    @register_scheduler("dies")
    def dies(tasks, address, deliver):
        for task in tasks[:3]:
            deliver(task, run_task(task))
        assert any(tmp_path.glob(".out.tmp-*/part-*.parquet"))
        raise exc

    with pytest.raises(type(exc)):
        run_sweep(mixed, "dies", cells_per_task=CELLS_PER_TASK,
                  sink=DatasetWriter(tmp_path / "out", name="x"))
    assert list(tmp_path.iterdir()) == []


def test_writer_refuses_a_foreign_folder_before_running(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SweepOutputError, match="not empty"):
        DatasetWriter(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
