"""The contract of sweeps: a spec (the grid), tasks (slices of it), a result (one row per cell).

A cell is one prediction (model, hardware, runtime, batch, precision, mode, plan, tokens) with a
stable id ``cell_id`` ("|"-joined), so schedulers compare row for row. Families (``FAMILIES``):
``graph`` (an ONNX/zoo model on one device), ``serving`` (an LLM config served by an engine on
one device or a tp x pp replica) and ``parallel`` (a plan over several devices; ``batch`` is the
global batch). Hardware: a device text or ``system:ID``; systems take plans only. A task is one
family, model and runtime, a slice of the hardware and the full product of the other axes,
sized to take >= 100 ms. A cell that cannot be predicted is a row with ``error`` set and NaN
metrics, never a crashed sweep.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import product
from typing import NamedTuple

import pandas as pd

from roofcast.predictor.errors import PredictionError

#: the runtime text that means each device kind's default profile or engine
DEFAULT_RUNTIME = "default"
#: the plan of a one-device cell (no parallelism)
SINGLE = "single"
#: a cell's tokens when the model is not an LLM config (``input_tokens``/``output_tokens`` 0)
NO_TOKENS: tuple[int, int] = (0, 0)
#: the hardware prefix of a system entry (``system:hgx-h100``)
SYSTEM_PREFIX = "system:"
#: joins the parts of a cell id (``cell_id``); spec texts may not contain it
ID_SEPARATOR = "|"
#: the families of cells, in planning order (module docstring)
FAMILIES: tuple[str, ...] = ("graph", "serving", "parallel")
#: modes of a sweep: ``infer``/``train`` (graphs and plans), ``serve`` (LLM configs only)
SWEEP_MODES: tuple[str, ...] = ("infer", "train", "serve")

#: the Parquet dataset's columns, in order (one row per cell). Times in seconds, memory in
#: bytes (per device: the fullest one), prices in USD (all ``n_devices``), power in W.
#: ``family``: graph/serving/parallel; ``device``: the spec's device text (a system cell: the
#: system's device id); ``system``: "" for one device, else the system (the spec's
#: ``system:`` text without the prefix, or ``N x DEVICE`` built from a device);
#: ``n_devices``: devices the cell uses; ``plan``: the spec's plan text (``single``);
#: ``input_tokens``/``output_tokens``: 0 unless an LLM config; ``time_s``: graph: one batch,
#: serving: the end-to-end latency of a static batch (TTFT + (M-1) x TPOT), parallel: one
#: step; ``lower_s``/``upper_s``: its interval; ``throughput_samples_per_s``: samples
#: (requests) per second over all replicas; ``tokens_per_s``: output tokens/s (serving),
#: tokens/s (parallel LLM), NaN otherwise; ``ttft_s``/``tpot_s``: serving only (NaN
#: otherwise); ``usd_per_throughput`` = price_usd / throughput; ``speedup``: the baseline
#: hardware's time_s / this time_s for the same (model, runtime, batch, precision, mode, plan,
#: tokens) (NaN without a baseline); ``dominant_bound``: graph: the bound of most time,
#: parallel: the largest part of the step (compute, comm, bubble, optimizer), serving:
#: ``prefill`` or ``decode`` (the larger share of e2e); ``error``: "" when predicted.
CELL_COLUMNS: tuple[str, ...] = (
    "cell_id", "family", "model", "device", "system", "n_devices", "runtime", "batch",
    "precision", "mode", "plan", "input_tokens", "output_tokens", "estimator",
    "time_s", "lower_s", "upper_s", "throughput_samples_per_s", "tokens_per_s", "ttft_s",
    "tpot_s", "memory_bytes", "mem_capacity_bytes", "fits", "price_usd", "tdp_W",
    "usd_per_throughput", "throughput_per_W", "speedup", "dominant_bound", "task_id", "error",
)
FLOAT_COLUMNS: tuple[str, ...] = (
    "time_s", "lower_s", "upper_s", "throughput_samples_per_s", "tokens_per_s", "ttft_s",
    "tpot_s", "memory_bytes", "mem_capacity_bytes", "price_usd", "tdp_W", "usd_per_throughput",
    "throughput_per_W", "speedup")
INT_COLUMNS: tuple[str, ...] = ("n_devices", "batch", "input_tokens", "output_tokens", "task_id")
STR_COLUMNS: tuple[str, ...] = (
    "cell_id", "family", "model", "device", "system", "runtime", "precision", "mode", "plan",
    "estimator", "dominant_bound", "error")


class SweepSpecError(PredictionError):
    """A sweep file is wrong: the message names the key, the bad value and what to write."""


class CellKey(NamedTuple):
    """A cell of a task (the model and runtime are the task's): hardware text, batch,
    precision, mode, plan text, (input_tokens, output_tokens)."""

    hardware: str
    batch: int
    precision: str
    mode: str
    plan: str = SINGLE
    tokens: tuple[int, int] = NO_TOKENS


def cell_id(model: str, runtime: str, key: CellKey) -> str:
    """The cell's stable id: ``model|hardware|runtime|batch|precision|mode|plan|IN:OUT``
    (``-`` for no tokens)."""
    tokens = "-" if key.tokens == NO_TOKENS else f"{key.tokens[0]}:{key.tokens[1]}"
    return ID_SEPARATOR.join((model, key.hardware, runtime, str(key.batch), key.precision, key.mode,
                     key.plan, tokens))


@dataclass(frozen=True)
class SweepSpec:
    """A grid, as ``roofcast sweep SPEC.toml`` reads it (``spec.read_spec``).

    models: zoo names, ONNX paths (relative to the spec file's folder) and LLM configs
    (bundled names, ``llm:NAME``, ``.json`` paths); llms: the entries of ``models`` that are
    LLM configs; devices: the hardware axis — catalog ids, what-if specs
    (``h100-sxm:mem_bw_scale=2``), ``kind:`` selectors (expanded by ``read_spec``) and
    ``system:ID`` entries; batches; precisions (serving: the weights' dtype); modes
    (``SWEEP_MODES``); runtimes: profile or engine names, ``default`` = each device kind's
    default; plans: ``single`` and plan texts (``plans.parse_plan``: ``tp4 pp2``, ``dp2 tp4
    m8 z1 sp rc``); input_tokens / output_tokens: the LLM request shape axes; dims: other
    symbolic dims bound for every graph model (``{sequence = 128}``); estimator: None = each
    family's default; baseline: the hardware entry speedups are relative to (None: NaN
    speedups); name: the sweep's label; source: the spec file's path (for messages).
    """

    models: tuple[str, ...]
    devices: tuple[str, ...]
    batches: tuple[int, ...] = (1,)
    precisions: tuple[str, ...] = ("fp32",)
    modes: tuple[str, ...] = ("infer",)
    runtimes: tuple[str, ...] = ("default",)
    plans: tuple[str, ...] = (SINGLE,)
    input_tokens: tuple[int, ...] = (512,)
    output_tokens: tuple[int, ...] = (128,)
    llms: tuple[str, ...] = ()
    dims: Mapping[str, int] = field(default_factory=dict)
    estimator: str | None = None
    baseline: str | None = None
    name: str = "sweep"
    source: str = ""

    @property
    def n_cells(self) -> int:
        """Cells of the grid (``cell_groups``; before any per-cell error)."""
        return sum(g.n_cells * len(self.runtimes) for g in cell_groups(self))


@dataclass(frozen=True)
class CellGroup:
    """One model's cells of one family: the full product of ``hardware`` x batches x
    precisions x ``modes`` x ``plans`` x ``tokens`` (``cell_groups``)."""

    family: str
    model: str
    hardware: tuple[str, ...]
    modes: tuple[str, ...]
    plans: tuple[str, ...]
    tokens: tuple[tuple[int, int], ...]
    batches: tuple[int, ...]
    precisions: tuple[str, ...]

    @property
    def n_cells(self) -> int:
        return (len(self.hardware) * len(self.batches) * len(self.precisions)
                * len(self.modes) * len(self.plans) * len(self.tokens))


def cell_groups(spec: SweepSpec) -> list[CellGroup]:
    """Which cells of the product a spec means (the rule of the module docstring):

    * a graph model: ``graph`` cells = its device entries x {infer, train} modes x plan
      ``single``; ``parallel`` cells = every hardware entry x {infer, train} x the other plans;
    * an LLM config: ``serving`` cells = every hardware entry x mode ``serve`` x every plan x
      input_tokens x output_tokens; ``parallel`` cells = every hardware entry x {infer, train}
      x every plan x (input_tokens, 0);
    * ``serve`` does not apply to graph models, ``single`` not to ``system:`` entries of graph
      models: those combinations are not cells (not errors). Empty groups are dropped.
    """
    devices = tuple(d for d in spec.devices if not d.startswith(SYSTEM_PREFIX))
    run_modes = tuple(m for m in spec.modes if m != "serve")
    serve = tuple(m for m in spec.modes if m == "serve")
    multi = tuple(p for p in spec.plans if p != SINGLE)
    llm_io = tuple(product(spec.input_tokens, spec.output_tokens))
    llm_seq = tuple((n, 0) for n in spec.input_tokens)
    groups = []
    for model in spec.models:
        if model in spec.llms:
            wanted = [("serving", spec.devices, serve, spec.plans, llm_io),
                      ("parallel", spec.devices, run_modes, spec.plans, llm_seq)]
        else:
            wanted = [("graph", devices, run_modes, (SINGLE,) if SINGLE in spec.plans else (),
                       (NO_TOKENS,)),
                      ("parallel", spec.devices, run_modes, multi, (NO_TOKENS,))]
        for family, hardware, modes, plans, tokens in wanted:
            group = CellGroup(family, model, tuple(hardware), modes, plans, tokens,
                              tuple(spec.batches), tuple(spec.precisions))
            if group.n_cells:
                groups.append(group)
    return groups


@dataclass(frozen=True)
class SweepTask:
    """One family x one model x one runtime x ``devices`` (hardware entries) x batches x
    precisions x modes x plans x tokens (``cells``, in that nesting order).

    estimator: None = the family's default; model_root: the folder relative model paths are
    read from; llm: whether ``model`` is an LLM config."""

    task_id: int
    model: str
    runtime: str
    devices: tuple[str, ...]
    batches: tuple[int, ...]
    precisions: tuple[str, ...]
    modes: tuple[str, ...]
    dims: tuple[tuple[str, int], ...]
    estimator: str | None
    model_root: str = ""
    family: str = "graph"
    plans: tuple[str, ...] = (SINGLE,)
    tokens: tuple[tuple[int, int], ...] = (NO_TOKENS,)
    llm: bool = False

    @property
    def n_cells(self) -> int:
        return (len(self.devices) * len(self.batches) * len(self.precisions) * len(self.modes)
                * len(self.plans) * len(self.tokens))

    def iter_cells(self) -> Iterator[CellKey]:
        """Every cell of the task, hardware-major, one at a time (nothing held)."""
        return (CellKey(*c) for c in product(self.devices, self.batches, self.precisions,
                                             self.modes, self.plans, self.tokens))

    def cells(self) -> list[CellKey]:
        """Every cell of the task as a list (at most ``tasks.MAX_TASK_CELLS`` unless one
        hardware entry has more), in ``iter_cells`` order."""
        return list(self.iter_cells())

    def cell_ids(self) -> list[str]:
        """The ids of the task's cells (what running it must return, each once)."""
        return [cell_id(self.model, self.runtime, c) for c in self.iter_cells()]


@dataclass(frozen=True)
class SweepResult:
    """What ``run_sweep`` returns: the scheduler's name, the wall time and the cells.

    In memory (the Python API's default sink): ``cells`` (``CELL_COLUMNS``, sorted by
    ``cell_id``); ``summary`` and ``front`` are None (``output.summary(cells)``,
    ``output.pareto_front(cells)`` compute them). Streamed to a Parquet folder
    (``output.DatasetWriter``, what ``roofcast sweep SPEC.toml`` does): ``cells`` is None — the
    client never held them all — and the sink's incremental ``summary`` and ``front`` (equal to
    the in-memory ones), the counts ``cell_count`` / ``error_count`` and ``folder`` are set.
    ``cells_per_s`` = cells / elapsed_s either way."""

    cells: pd.DataFrame | None
    scheduler: str
    elapsed_s: float
    summary: pd.DataFrame | None = None
    front: pd.DataFrame | None = None
    cell_count: int | None = None
    error_count: int | None = None
    folder: str = ""

    @property
    def n_cells(self) -> int:
        return len(self.cells) if self.cells is not None else int(self.cell_count or 0)

    @property
    def cells_per_s(self) -> float:
        return self.n_cells / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    @property
    def n_errors(self) -> int:
        if self.cells is None:
            return int(self.error_count or 0)
        return int((self.cells["error"] != "").sum())
