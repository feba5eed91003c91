"""A sweep grid just under the 10**8-cell cap is cut into tasks that each hold at most the
memory budget (``tasks.MAX_TASK_CELLS``, raisable with ``ROOFCAST_MAX_TASK_CELLS``): planning
builds no cell, and a task's cells are what one worker holds."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from roofcast.predictor.sweeps.tasks import MAX_TASK_CELLS, expand_devices, plan_tasks
from roofcast.predictor.sweeps.types import SweepSpec
from tests.hostile.helpers import deadline

GPUS = expand_devices(["kind:gpu"])


def test_a_grid_under_the_cap_is_planned_in_budget_sized_tasks():
    per_batch = len(GPUS) * 4 * 2  # devices x precisions x modes
    n_batches = 10**8 // per_batch - 1  # just under the cap, whatever the catalog's size
    spec = SweepSpec(models=("resnet50",), devices=GPUS, batches=tuple(range(1, n_batches + 1)),
                     precisions=("fp32", "fp16", "bf16", "int8"), modes=("infer", "train"))
    assert 5 * 10**7 < spec.n_cells < 10**8
    with deadline(20):
        tasks = plan_tasks(spec)
    assert max(t.n_cells for t in tasks) <= MAX_TASK_CELLS
    assert sum(t.n_cells for t in tasks) == spec.n_cells
    first = tasks[0]
    assert len(list(itertools.islice(first.iter_cells(), 5))) == 5  # lazily, nothing built


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(n_devices=st.integers(1, len(GPUS)), n_batches=st.integers(1, 300),
       budget=st.integers(1, 5000), per_task=st.one_of(st.none(), st.integers(1, 10_000)))
def test_tasks_cover_the_grid_once_within_the_budget(n_devices, n_batches, budget, per_task):
    """Property: every (runtime, device) entry is in exactly one task, and a task holds more
    than ``budget`` cells only when it is a single hardware entry."""
    spec = SweepSpec(models=("resnet50",), devices=GPUS[:n_devices],
                     batches=tuple(range(1, n_batches + 1)), modes=("infer", "train"))
    tasks = plan_tasks(spec, cells_per_task=per_task, max_task_cells=budget)
    entries = [(t.runtime, d) for t in tasks for d in t.devices]
    assert sorted(entries) == sorted(set(entries))
    assert {d for _, d in entries} == set(GPUS[:n_devices])
    assert sum(t.n_cells for t in tasks) == spec.n_cells
    assert all(t.n_cells <= budget or len(t.devices) == 1 for t in tasks)
