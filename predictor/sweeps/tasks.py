"""Cut a sweep into tasks and run one: ``plan_tasks(spec)``, ``run_task(task) -> DataFrame``.

**Planning.** One task = one model x one runtime x a slice of the devices x every batch,
precision and mode (one vectorised ``predictor.sweep.sweep`` call). Order and ids are
deterministic: models, then runtimes, then device slices, in the spec's order; ``task_id``
counts from 0.

Sizing rule, from the measured cost of a ``sweep`` call (``time-roofline``, graphs cached,
2 shared cores): with G = batches x precisions x modes and w devices, a task costs about
G x (F + w x c), F = ``TASK_FIXED_S`` ~35 ms of per-(batch, precision, mode) work that does
not depend on the devices (workload table, fusion plan, memory; ~35 ms for resnet50 and
mobilenet_v2, ~125 ms for bert_base) and c = ``CELL_S`` ~1 ms per device-cell (resnet50: 147 ms
for 1 device x G=4, 327 ms for 43 devices; 1.0-1.5 ms per extra device-cell). Splitting the
devices repeats F in every slice, so a slice holds at least w = max(ceil(F / c),
ceil((``TASK_MIN_S`` / G - F) / c)) devices: the fixed part is at most half the task, and
a task takes >= 100 ms even at G = 1 (65 devices). The devices are cut into
max(1, floor(devices / w)) slices of near-equal size (each >= w). ``cells_per_task`` overrides
the rule: w = ceil(cells_per_task / G) (tests, tuning).

**Running.** ``run_task`` returns one ``CELL_COLUMNS`` row per cell of the task:

* graphs come from a per-process LRU cache keyed by (model, dims, batch, folder)
  (``graph_cache``): a worker imports a model once per (dims, batch), not once per cell/task;
* a device that is not in the catalog, or on which the runtime does not run, fails only its
  own cells; a model/batch whose import fails fails only its cells; if the vectorised call
  still raises, it is split by precision, mode, batch, then device and retried, so one bad
  precision (int8 on pytorch-eager), batch or device cannot sink the rest;
  every failure is a row with ``error`` = the message and NaN metrics.

``cell_id``'s runtime part is the spec's runtime (``default`` = each device kind's default
profile); the ``runtime`` column holds the profile that was modelled (the spec's text where
the cell failed before a profile was chosen). ``model``/``device`` are the spec's texts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.graph_import import import_model
from roofcast.graph_import.dims import model_dim_names
from roofcast.graph_import.types import Graph
from roofcast.hw_catalog.catalog import get_device, list_devices
from roofcast.models import resolve_model_path
from roofcast.predictor.runtimes.catalog import resolve_runtime
from roofcast.predictor.sweep import sweep
from roofcast.predictor.sweeps.types import CELL_COLUMNS, SweepSpec, SweepTask, cell_id

#: measured costs of a task (module docstring): fixed per (batch, precision, mode), per cell
TASK_FIXED_S = 0.035
CELL_S = 0.001
#: the least a task should take (scheduler overhead per task is ~1-10 ms on Dask)
TASK_MIN_S = 0.1
#: graphs kept per process (a zoo graph is a few MB; 8 batches x a few models fit)
GRAPH_CACHE_SIZE = 64
KIND_PREFIX = "kind:"
DEFAULT_RUNTIME = "default"


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


def plan_tasks(spec: SweepSpec, *, cells_per_task: int | None = None) -> list[SweepTask]:
    """The tasks of ``spec`` (module docstring: order, ids, sizing)."""
    devices = expand_devices(spec.devices)
    per_device = len(spec.batches) * len(spec.precisions) * len(spec.modes)
    if not devices or per_device == 0:
        return []
    width = slice_width(per_device, cells_per_task)
    n_slices = max(1, len(devices) // width)
    slices = [tuple(s) for s in np.array_split(np.array(devices, dtype=object), n_slices)]
    dims = tuple(sorted((str(k), int(v)) for k, v in spec.dims.items()))
    root = str(Path(spec.source).parent) if spec.source else ""
    tasks = []
    for model in spec.models:
        for runtime in spec.runtimes:
            for devs in slices:
                tasks.append(SweepTask(
                    task_id=len(tasks), model=model, runtime=runtime, devices=devs,
                    batches=tuple(spec.batches), precisions=tuple(spec.precisions),
                    modes=tuple(spec.modes), dims=dims, estimator=spec.estimator,
                    model_root=root))
    return tasks


def slice_width(per_device: int, cells_per_task: int | None = None) -> int:
    """The least devices per task for ``per_device`` = batches x precisions x modes cells per
    device (module docstring's sizing rule)."""
    if cells_per_task is not None:
        if cells_per_task < 1:
            raise ValueError(f"cells_per_task must be >= 1, got {cells_per_task}")
        return max(1, math.ceil(cells_per_task / per_device))
    amortised = math.ceil(TASK_FIXED_S / CELL_S)
    long_enough = math.ceil((TASK_MIN_S / per_device - TASK_FIXED_S) / CELL_S)
    return max(1, amortised, long_enough)


def _grid(task: SweepTask) -> Iterator[tuple[str, int, str, str]]:
    for device in task.devices:
        for batch in task.batches:
            for precision in task.precisions:
                for mode in task.modes:
                    yield device, batch, precision, mode


def task_cell_ids(task: SweepTask) -> list[str]:
    """The ids of the task's cells (what ``run_task`` must return, each once)."""
    return [cell_id(task.model, d, task.runtime, b, p, m) for d, b, p, m in _grid(task)]


def model_source(model: str, root: str) -> Path:
    """A spec model: an ``.onnx`` path (relative to the spec's folder) or a zoo name."""
    if model.endswith(".onnx"):
        path = Path(model)
        return path if path.is_absolute() or not root else Path(root) / path
    return resolve_model_path(model)


@lru_cache(maxsize=GRAPH_CACHE_SIZE)
def graph_cache(model: str, dims: tuple[tuple[str, int], ...], batch: int, root: str) -> Graph:
    """The model imported at ``batch`` with the spec's dims that it has (per-process cache).

    The spec's dims apply to the models that name them (``sequence`` binds BERT, not ResNet);
    a model without a ``batch`` dim cannot be swept over batches and raises."""
    source = model_source(model, root)
    probe = import_model(source, dims={"batch": batch}, name=source.stem)
    names = model_dim_names(probe)
    if "batch" not in names:
        raise ValueError(f"model {model!r} has no 'batch' dim (its dims: "
                         f"{', '.join(names) or 'none'}); it cannot be swept over batches")
    wanted = {k: v for k, v in dims if k in names and k != "batch"}
    if not wanted:
        return probe
    return import_model(source, dims={**wanted, "batch": batch}, name=source.stem)


def _error_rows(task: SweepTask, cells: Sequence[tuple[str, int, str, str]],
                message: str) -> list[dict]:
    return [{"cell_id": cell_id(task.model, d, task.runtime, b, p, m), "model": task.model,
             "device": d, "runtime": task.runtime, "batch": b, "precision": p, "mode": m,
             "estimator": task.estimator, "task_id": task.task_id, "error": message or "error"}
            for d, b, p, m in cells]


def _message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def run_task(task: SweepTask) -> pd.DataFrame:
    """Predict every cell of ``task`` (module docstring); never raises for a bad cell."""
    errors: list[dict] = []
    good_devices: dict[str, str] = {}  # resolved id -> spec text
    for device in task.devices:
        try:
            hw = get_device(device)
            resolve_runtime(None if task.runtime == DEFAULT_RUNTIME else task.runtime, hw.kind)
            if hw.id in good_devices:
                raise ValueError(f"device {device!r} is {good_devices[hw.id]!r} again")
            good_devices[hw.id] = device
        except Exception as exc:  # a bad device fails its own cells only
            errors += _error_rows(task, [c for c in _grid(task) if c[0] == device],
                                  _message(exc))
    graphs: dict[int, Graph] = {}
    for batch in task.batches:
        try:
            graphs[batch] = graph_cache(task.model, task.dims, batch, task.model_root)
        except Exception as exc:  # a failed import fails its batch's cells
            errors += _error_rows(task, [c for c in _grid(task) if c[1] == batch
                                         and c[0] in good_devices.values()], _message(exc))
    frames = []
    if good_devices and graphs:
        frames, failed = _predict(task, _Part(good_devices, graphs, task.precisions,
                                              task.modes))
        errors += failed
    if errors:
        frames.append(pd.DataFrame.from_records(errors))
    out = pd.concat(frames, ignore_index=True) if frames else _error_frame()
    return _columns(out)


@dataclass(frozen=True)
class _Part:
    """A sub-grid of a task: devices (resolved id -> spec text), graphs by batch, precisions
    and modes."""

    devices: dict[str, str]
    graphs: dict[int, Graph]
    precisions: tuple[str, ...]
    modes: tuple[str, ...]

    def cells(self) -> list[tuple[str, int, str, str]]:
        return [(d, b, p, m) for d in self.devices.values() for b in self.graphs
                for p in self.precisions for m in self.modes]

    def split(self) -> list[_Part]:
        """One part per precision, else per mode, else per batch, else per device."""
        if len(self.precisions) > 1:
            return [replace(self, precisions=(p,)) for p in self.precisions]
        if len(self.modes) > 1:
            return [replace(self, modes=(m,)) for m in self.modes]
        if len(self.graphs) > 1:
            return [replace(self, graphs={b: g}) for b, g in self.graphs.items()]
        return [replace(self, devices={k: v}) for k, v in self.devices.items()]


def _predict(task: SweepTask, part: _Part) -> tuple[list[pd.DataFrame], list[dict]]:
    """One vectorised call; if it raises, the part is split (``_Part.split``: precisions,
    modes, batches, then devices) and each piece retried, so a failure lands on exactly the
    cells it belongs to. Only a failing call costs extra calls."""
    try:
        return [_call(task, part)], []
    except Exception as exc:
        if len(part.cells()) == 1 or len(part.split()) == 1:
            return [], _error_rows(task, part.cells(), _message(exc))
    frames, errors = [], []
    for piece in part.split():
        got, failed = _predict(task, piece)
        frames += got
        errors += failed
    return frames, errors


def _call(task: SweepTask, part: _Part) -> pd.DataFrame:
    devices = part.devices
    df = sweep(part.graphs.__getitem__, list(devices.values()), list(part.graphs),
               part.precisions, part.modes, task.estimator,
               runtime=None if task.runtime == DEFAULT_RUNTIME else task.runtime)
    spec_text = df["device"].map(devices)
    out = pd.DataFrame({
        "cell_id": [cell_id(task.model, d, task.runtime, int(b), p, m) for d, b, p, m in
                    zip(spec_text, df["batch"], df["precision"], df["mode"], strict=True)],
        "model": task.model, "device": spec_text, "runtime": df["runtime"],
        "batch": df["batch"].astype("int64"), "precision": df["precision"], "mode": df["mode"],
        "estimator": task.estimator,
        **{c: df[c] for c in ("time_s", "lower_s", "upper_s", "throughput_samples_per_s",
                              "memory_bytes", "mem_capacity_bytes", "fits", "price_usd",
                              "tdp_W")},
        "usd_per_throughput": df["price_usd"] / df["throughput_samples_per_s"],
        "throughput_per_W": df["throughput_per_W"], "dominant_bound": df["dominant_bound"],
        "task_id": task.task_id, "error": "",
    })
    return out


def _error_frame() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in CELL_COLUMNS})


#: dtypes of the output columns (stable across tasks, so Parquet parts share one schema)
FLOAT_COLUMNS = ("time_s", "lower_s", "upper_s", "throughput_samples_per_s", "memory_bytes",
                 "mem_capacity_bytes", "price_usd", "tdp_W", "usd_per_throughput",
                 "throughput_per_W")
INT_COLUMNS = ("batch", "task_id")
STR_COLUMNS = ("cell_id", "model", "device", "runtime", "precision", "mode", "estimator",
               "dominant_bound", "error")


def _columns(df: pd.DataFrame) -> pd.DataFrame:
    """``CELL_COLUMNS`` in order with fixed dtypes (float, int64, bool ``fits``, str)."""
    out = df.reindex(columns=list(CELL_COLUMNS))
    for c in FLOAT_COLUMNS:
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("float64")
    for c in INT_COLUMNS:
        out[c] = out[c].astype("int64")
    for c in STR_COLUMNS:
        out[c] = out[c].astype(object).where(out[c].notna(), "").astype(str)
    out["fits"] = out["fits"].astype(object).where(out["fits"].notna(), False).astype(bool)
    return out
