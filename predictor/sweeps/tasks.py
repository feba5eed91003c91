"""Cut a sweep into tasks and run one: ``plan_tasks(spec)``, ``run_task(task) -> DataFrame``.

Planning: each cell group (``types.cell_groups``) is cut into tasks of one runtime and a slice
of its hardware, carrying the group's full product of the other axes; order and ids are
deterministic. Sizing (per family, ``families.FAMILY_SPECS``): with G non-hardware combinations
and w hardware entries a task costs about G x (F + w x c) seconds, so a slice holds at least
w = max(ceil(F / c), ceil((``TASK_MIN_S`` / G - F) / c)) entries (fixed part <= half, task >=
100 ms); ``cells_per_task`` overrides it (w = ceil(cells_per_task / G)); w x G is at most the
memory budget ``MAX_TASK_CELLS`` (w >= 1). Running: the task's
family runner returns one ``CELL_COLUMNS`` row per cell and never raises for a bad cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from roofcast.hw_catalog.catalog import list_devices
from roofcast.predictor.sweeps.families import FAMILY_SPECS, run_task
from roofcast.predictor.sweeps.types import (
    DEFAULT_RUNTIME,
    FAMILIES,
    SweepSpec,
    SweepTask,
    cell_groups,
)

__all__ = ["DEFAULT_RUNTIME", "KIND_PREFIX", "MAX_TASK_CELLS", "TASK_MIN_S", "expand_devices",
           "plan_tasks", "run_task", "slice_width", "task_cell_ids"]

#: the least a task should take (scheduler overhead per task is ~1-10 ms on Dask)
TASK_MIN_S = 0.1
#: the most cells one task holds (the memory budget of a worker; ``ROOFCAST_MAX_TASK_CELLS``
#: through ``spec.MAX_ENTRY_CELLS`` when run by ``schedulers.run_sweep``)
MAX_TASK_CELLS = 2 * 10**6
KIND_PREFIX = "kind:"


def expand_devices(devices: Sequence[str]) -> tuple[str, ...]:
    """``kind:gpu`` -> every catalog device of that kind (catalog order); others as given;
    first occurrence kept when a device appears twice after expansion."""
    out: list[str] = []
    for d in devices:
        if d.startswith(KIND_PREFIX):
            out.extend(hw.id for hw in list_devices(d[len(KIND_PREFIX):].strip()))
        else:
            out.append(d)
    return tuple(dict.fromkeys(out))


def plan_tasks(spec: SweepSpec, *, cells_per_task: int | None = None,
               max_task_cells: int = MAX_TASK_CELLS) -> list[SweepTask]:
    """The tasks of ``spec`` (module docstring: order, ids, sizing); no task holds more than
    ``max_task_cells`` cells unless one hardware entry alone has more (its cells are built in
    memory when it runs, so this bounds a worker's memory whatever the grid's size)."""
    dims = tuple(sorted((str(k), int(v)) for k, v in spec.dims.items()))
    root = str(Path(spec.source).parent) if spec.source else ""
    groups = sorted(cell_groups(spec), key=lambda g: (spec.models.index(g.model),
                                                      FAMILIES.index(g.family)))
    tasks: list[SweepTask] = []
    for group in groups:
        family = FAMILY_SPECS[group.family]
        hardware = expand_devices(group.hardware)
        per_entry = group.n_cells // max(1, len(group.hardware))
        width = slice_width(per_entry, cells_per_task, fixed_s=family.fixed_s,
                            cell_s=family.cell_s)
        most = max(1, max_task_cells // per_entry)  # entries within the memory budget
        n_slices = max(1, len(hardware) // width, math.ceil(len(hardware) / most))
        slices = [tuple(s) for s in np.array_split(np.array(hardware, dtype=object), n_slices)]
        for runtime in spec.runtimes:
            for devs in slices:
                tasks.append(SweepTask(
                    task_id=len(tasks), model=group.model, runtime=runtime, devices=devs,
                    batches=group.batches, precisions=group.precisions, modes=group.modes,
                    dims=dims, estimator=spec.estimator or family.estimator, model_root=root,
                    family=group.family, plans=group.plans, tokens=group.tokens,
                    llm=group.model in spec.llms))
    return tasks


def slice_width(per_entry: int, cells_per_task: int | None = None, *,
                fixed_s: float = FAMILY_SPECS["graph"].fixed_s,
                cell_s: float = FAMILY_SPECS["graph"].cell_s) -> int:
    """The least hardware entries per task for ``per_entry`` cells per entry (module
    docstring's sizing rule; ``fixed_s``/``cell_s``: the family's costs)."""
    if cells_per_task is not None:
        if cells_per_task < 1:
            raise ValueError(f"cells_per_task must be >= 1, got {cells_per_task}")
        return max(1, -(-cells_per_task // per_entry))  # integer ceil: any size, no float
    amortised = math.ceil(fixed_s / cell_s)
    long_enough = math.ceil((TASK_MIN_S / per_entry - fixed_s) / cell_s)
    return max(1, amortised, long_enough)


def task_cell_ids(task: SweepTask) -> list[str]:
    """The ids of the task's cells (what ``run_task`` must return, each once)."""
    return task.cell_ids()
