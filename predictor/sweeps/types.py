"""The contract of sweeps: a spec (the grid), tasks (slices of it), a result (one row per cell).

A **cell** is one (model, device, runtime, batch, precision, mode) prediction. Its id,
``cell_id(...)``, is the "|"-joined tuple: stable across schedulers, so results of the local
and the Dask scheduler compare row for row after sorting by ``cell_id``.

A **task** is the unit a scheduler ships: one model and one runtime choice, a list of devices
and the batch x precision x mode grid — the part ``predictor.sweep.sweep`` predicts in one
vectorised call. Tasks are sized to take >= 100 ms (``tasks.plan_tasks``); a worker imports a
model once per (model, dims, batch) and keeps it (``tasks.run_task``'s per-process cache).

A cell that cannot be predicted (an unknown device, a runtime that does not run on it, a
model that fails to import) is a row with ``error`` set and NaN metrics, never a crashed sweep.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from roofcast.predictor.errors import PredictionError

#: the Parquet dataset's columns, in order (one row per cell). Times in seconds, memory in
#: bytes; ``lower_s``/``upper_s`` the interval of ``time_s``; ``error`` "" when predicted.
CELL_COLUMNS: tuple[str, ...] = (
    "cell_id", "model", "device", "runtime", "batch", "precision", "mode", "estimator",
    "time_s", "lower_s", "upper_s", "throughput_samples_per_s", "memory_bytes",
    "mem_capacity_bytes", "fits", "price_usd", "tdp_W", "usd_per_throughput",
    "throughput_per_W", "dominant_bound", "task_id", "error",
)


class SweepSpecError(PredictionError):
    """A sweep file is wrong: the message names the key, the bad value and what to write."""


def cell_id(model: str, device: str, runtime: str, batch: int, precision: str, mode: str) -> str:
    """The cell's stable id: ``model|device|runtime|batch|precision|mode``."""
    return "|".join((model, device, runtime, str(batch), precision, mode))


@dataclass(frozen=True)
class SweepSpec:
    """A grid, as ``roofcast sweep SPEC.toml`` reads it (``spec.read_spec``).

    models: zoo names or ONNX paths (paths relative to the spec file's folder); devices:
    catalog ids, what-if specs (``h100-sxm:mem_bw_scale=2``) or kind selectors
    (``kind:gpu`` = every catalog GPU); batches; precisions; modes (``infer``/``train``);
    runtimes: profile names, ``default`` = each device kind's default; dims: other symbolic
    dims bound for every model (``{sequence = 128}``); estimator; baseline: the device
    speedups are relative to (None: no speedup column); name: the sweep's label;
    source: the spec file's path (for messages).
    """

    models: tuple[str, ...]
    devices: tuple[str, ...]
    batches: tuple[int, ...] = (1,)
    precisions: tuple[str, ...] = ("fp32",)
    modes: tuple[str, ...] = ("infer",)
    runtimes: tuple[str, ...] = ("default",)
    dims: Mapping[str, int] = field(default_factory=dict)
    estimator: str = "time-roofline"
    baseline: str | None = None
    name: str = "sweep"
    source: str = ""

    @property
    def n_cells(self) -> int:
        """Cells of the full grid (before any per-cell error)."""
        return (len(self.models) * len(self.devices) * len(self.batches)
                * len(self.precisions) * len(self.modes) * len(self.runtimes))


@dataclass(frozen=True)
class SweepTask:
    """One model x one runtime x ``devices`` x batches x precisions x modes (a vectorised call)."""

    task_id: int
    model: str
    runtime: str
    devices: tuple[str, ...]
    batches: tuple[int, ...]
    precisions: tuple[str, ...]
    modes: tuple[str, ...]
    dims: tuple[tuple[str, int], ...]
    estimator: str
    model_root: str = ""  # folder relative model paths are read from

    @property
    def n_cells(self) -> int:
        return len(self.devices) * len(self.batches) * len(self.precisions) * len(self.modes)


@dataclass(frozen=True)
class SweepResult:
    """The cells (``CELL_COLUMNS``, sorted by ``cell_id``), the scheduler's name, wall time
    and the rate ``cells_per_s`` = len(cells) / elapsed_s."""

    cells: pd.DataFrame
    scheduler: str
    elapsed_s: float

    @property
    def cells_per_s(self) -> float:
        return len(self.cells) / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    @property
    def n_errors(self) -> int:
        return int((self.cells["error"] != "").sum())
