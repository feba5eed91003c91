"""Graph cells: an ONNX/zoo model on one device, vectorised by ``predictor.sweep.sweep``.

A ``graph`` task is one model x one runtime x a slice of the devices x every batch, precision
and mode, predicted in one ``sweep`` call. Graphs come from a per-process LRU cache
(``graph_cache``), device texts are resolved once per process (``known_devices``). A device not
in the catalog or not run by the runtime, or a failed import, fails only its own cells; a
vectorised call that still raises is split by precision, mode, batch, then device and retried.
Every failure is a row with ``error`` set and NaN metrics. Sizing: ``FAMILY_SPECS["graph"]``
(fixed_s 10 ms, cell_s 0.25 ms; measurements in docs/design/layers.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import pandas as pd

from roofcast.graph_import import import_model
from roofcast.graph_import.dims import model_dim_names
from roofcast.graph_import.types import Graph
from roofcast.hw_catalog.catalog import get_device, load_catalog
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.runtimes.catalog import resolve_runtime
from roofcast.predictor.sweep import sweep
from roofcast.predictor.sweeps.cells import columns, concat, error_rows, key_columns, message
from roofcast.predictor.sweeps.families import register_family
from roofcast.predictor.sweeps.loaders import model_source
from roofcast.predictor.sweeps.types import DEFAULT_RUNTIME, SINGLE, CellKey, SweepTask

#: graphs kept per process (a zoo graph is a few MB; 8 batches x a few models fit)
GRAPH_CACHE_SIZE = 64


@lru_cache(maxsize=GRAPH_CACHE_SIZE)
def graph_cache(model: str, dims: tuple[tuple[str, int], ...], batch: int, root: str) -> Graph:
    """The model imported at ``batch`` with the spec's dims that it has (per-process cache).

    The spec's dims apply to the models that name them (``sequence`` binds BERT, not ResNet);
    a model without a ``batch`` dim cannot be swept over batches and raises. Which dims a
    model names is learnt from its first import (a probe at ``batch`` alone) and kept
    (``_DIM_NAMES``, per file version), so its other batches import once each, not twice."""
    source = model_source(model, root)
    try:
        stat = source.stat()
        key = (str(source), stat.st_mtime_ns, stat.st_size)  # an edited file is asked again
    except OSError:
        key = None  # the import says what is wrong
    names = _DIM_NAMES.get(key) if key else None
    probe = None
    if names is None:
        probe = import_model(source, dims={"batch": batch}, name=source.stem)
        names = tuple(model_dim_names(probe))
        if key:
            _DIM_NAMES[key] = names
    if "batch" not in names:
        raise ValueError(f"model {model!r} has no 'batch' dim (its dims: "
                         f"{', '.join(names) or 'none'}); it cannot be swept over batches")
    wanted = {k: v for k, v in dims if k in names and k != "batch"}
    if not wanted:
        return probe or import_model(source, dims={"batch": batch}, name=source.stem)
    return import_model(source, dims={**wanted, "batch": batch}, name=source.stem)


#: (model file, mtime, size) -> the dim names of the model (``graph_cache``'s first import)
_DIM_NAMES: dict[tuple[str, int, int], tuple[str, ...]] = {}


def clear_caches() -> None:
    """Forget the imported graphs, the models' dim names and the resolved devices (a cold
    start, as in a fresh worker)."""
    graph_cache.cache_clear()
    _DIM_NAMES.clear()
    _DEVICES[:] = [None, {}]


def known_devices() -> dict[str, HardwareSpec]:
    """The per-process map device text -> ``get_device(text)``, kept while the device catalog
    is the same object (``load_catalog`` hands out one object until a device file changes):
    a task checks the catalog once (``load_catalog`` stats every device file) instead of
    once per device. Failures are not kept."""
    catalog = load_catalog()
    if _DEVICES[0] is not catalog:
        _DEVICES[:] = [catalog, {}]
    return _DEVICES[1]


_DEVICES: list[Any] = [None, {}]  # [the catalog the entries come from, text -> device]


def _runtime_problem(runtime: str, kind: str) -> Exception | None:
    """Why ``runtime`` does not run on a device of ``kind`` (None: it does)."""
    try:
        resolve_runtime(None if runtime == DEFAULT_RUNTIME else runtime, kind)
    except Exception as exc:
        return exc
    return None


@register_family("graph")
def run_graph(task: SweepTask) -> pd.DataFrame:
    """Predict every cell of a graph ``task`` (module docstring); never raises for a bad cell."""
    errors: list[pd.DataFrame] = []
    cells = task.cells()
    good_devices: dict[str, str] = {}  # resolved id -> spec text
    specs: dict[str, HardwareSpec] = {}  # resolved id -> device
    runtimes: dict[str, Exception | None] = {}  # device kind -> why the runtime does not run
    known = known_devices()
    for device in task.devices:
        try:
            hw = known[device] if device in known else known.setdefault(device,
                                                                        get_device(device))
            if hw.kind not in runtimes:
                runtimes[hw.kind] = _runtime_problem(task.runtime, hw.kind)
            if runtimes[hw.kind] is not None:
                raise runtimes[hw.kind]
            if hw.id in good_devices:
                raise ValueError(f"device {device!r} is {good_devices[hw.id]!r} again")
            good_devices[hw.id] = device
            specs[hw.id] = hw
        except Exception as exc:  # a bad device fails its own cells only
            errors.append(error_rows(task, [c for c in cells if c.hardware == device],
                                     message(exc)))
    graphs: dict[int, Graph] = {}
    for batch in task.batches:
        try:
            graphs[batch] = graph_cache(task.model, task.dims, batch, task.model_root)
        except Exception as exc:  # a failed import fails its batch's cells
            errors.append(error_rows(task, [c for c in cells if c.batch == batch
                                            and c.hardware in good_devices.values()],
                                     message(exc)))
    frames = []
    if good_devices and graphs:
        frames, failed = _predict(task, _Part(good_devices, graphs, task.precisions,
                                              task.modes), specs)
        errors += failed
    return concat(frames + errors)


@dataclass(frozen=True)
class _Part:
    """A sub-grid of a task: devices (resolved id -> spec text), graphs by batch, precisions
    and modes."""

    devices: dict[str, str]
    graphs: dict[int, Graph]
    precisions: tuple[str, ...]
    modes: tuple[str, ...]

    def cells(self) -> list[CellKey]:
        return [CellKey(d, b, p, m) for d in self.devices.values() for b in self.graphs
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


def _predict(task: SweepTask, part: _Part, specs: dict[str, HardwareSpec]
             ) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """One vectorised call; if it raises, the part is split (``_Part.split``: precisions,
    modes, batches, then devices) and each piece retried, so a failure lands on exactly the
    cells it belongs to. Only a failing call costs extra calls."""
    try:
        return [_call(task, part, specs)], []
    except Exception as exc:
        if len(part.cells()) == 1 or len(part.split()) == 1:
            return [], [error_rows(task, part.cells(), message(exc))]
    frames, errors = [], []
    for piece in part.split():
        got, failed = _predict(task, piece, specs)
        frames += got
        errors += failed
    return frames, errors


def _call(task: SweepTask, part: _Part, specs: dict[str, HardwareSpec]) -> pd.DataFrame:
    devices = part.devices
    estimator = task.estimator
    df = sweep(part.graphs.__getitem__, [specs[i] for i in devices], list(part.graphs),
               part.precisions, part.modes, estimator,
               runtime=None if task.runtime == DEFAULT_RUNTIME else task.runtime)
    keys: Sequence[CellKey] = [
        CellKey(d, int(b), p, m, SINGLE) for d, b, p, m in
        zip(df["device"].map(devices), df["batch"], df["precision"], df["mode"], strict=True)]
    out = pd.DataFrame({
        **key_columns(task, keys), "runtime": df["runtime"].to_numpy(), "n_devices": 1,
        "estimator": estimator,
        **{c: df[c].to_numpy() for c in ("time_s", "lower_s", "upper_s",
                                         "throughput_samples_per_s", "memory_bytes",
                                         "mem_capacity_bytes", "fits", "price_usd", "tdp_W",
                                         "throughput_per_W", "dominant_bound")},
        "usd_per_throughput": (df["price_usd"] / df["throughput_samples_per_s"]).to_numpy(),
        "error": "",
    })
    return columns(out)
