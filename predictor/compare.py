"""Compare devices: one model and run configuration on several devices side by side.

``compare_devices(graph_source, devices, config, estimator, baseline=...)`` is one
``predictor.sweep`` cell per device and returns one row per device (``COMPARE_COLUMNS``):
``time_s`` with ``lower_s``..``upper_s`` (seconds); ``speedup`` = baseline time / time beside
``speedup_at_lower``/``speedup_at_upper`` (both devices at their lower / upper bound: like over
like); throughput = batch / time_s; USD and W per sample/s (NaN without price / TDP); memory and
``fits``; time per bound label; and the physical bounds of the speedup
(``speedup_bounds``: compute and bandwidth ratios, ``speedup_min``..``speedup_max``,
``within_bounds``, ``road``, ``same_road``) for devices that run the baseline's runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.estimator_registry import as_estimator
from roofcast.predictor.kernel_rows import BOUNDS, NOTE_SEP, explain_rows, step_rows
from roofcast.predictor.memory.graph import GraphSource
from roofcast.predictor.runtimes import resolve_runtime
from roofcast.predictor.runtimes.profile import whatif_launch_notes
from roofcast.predictor.speedup_bounds import BOUND_COLUMNS, speedup_bounds, within
from roofcast.predictor.sweep import sweep

COMPARE_COLUMNS: tuple[str, ...] = (
    "model", "device", "runtime", "baseline", "batch", "time_s", "lower_s", "upper_s", "speedup",
    "speedup_at_lower", "speedup_at_upper", "throughput_samples_per_s", "usd_per_throughput",
    "W_per_throughput", "memory_bytes", "mem_capacity_bytes", "fits", "price_usd", "tdp_W",
    *(f"{b}_bound_s" for b in BOUNDS), "dominant_bound", "peak_notes", *BOUND_COLUMNS,
)


def compare_devices(graph_source: GraphSource, devices: Sequence, config: RunConfig,
                    estimator: Any = GRAPH_ESTIMATOR, *, baseline=None,
                    allow_incomplete: bool = False) -> pd.DataFrame:
    """One row per device (module docstring), in the order of ``devices``.

    ``graph_source(batch)`` imports the model at ``config``'s batch (1 when it binds none), its
    other dims bound by the import; ``estimator``: a name or an estimator object; ``devices``:
    ids / inline what-if specs / HardwareSpec objects; ``baseline``: the device the speedups
    are relative to (default: the first device).
    """
    estimator = as_estimator(estimator)  # one object (one loaded model) for sweep and bounds
    graphs: dict[int, Any] = {}

    def source(batch: int):  # imports once: the sweep and the bounds share the graph
        if batch not in graphs:
            graphs[batch] = graph_source(batch)
        return graphs[batch]

    df = sweep(source, devices, [config.batch or 1], precisions=[config.precision],
               modes=[config.mode], estimator=estimator, baseline=baseline,
               fusion=config.fusion, inter_op=config.inter_op, optimizer=config.optimizer,
               threads=config.threads, allow_incomplete=allow_incomplete,
               runtime=config.runtime)
    base = df.loc[df["device"] == df["baseline"]].iloc[0]
    bounds = _bounds(graphs[config.batch or 1], devices, config, estimator, str(base["device"]),
                     allow_incomplete)
    df = df.join(bounds, on="device")
    df["within_bounds"] = within(df["speedup"], df["speedup_min"], df["speedup_max"]).astype(
        object).where(df["speedup_max"].notna(), None)
    specs = {hw.id: hw for hw in map(get_device, devices)}
    df["peak_notes"] = [NOTE_SEP.join(filter(None, [notes, _outside(r),
                                                    *_launch(specs[r["device"]], config)]))
                        for notes, (_, r) in zip(df["peak_notes"], df.iterrows(), strict=True)]
    return df.assign(
        speedup_at_lower=float(base["lower_s"]) / df["lower_s"],
        speedup_at_upper=float(base["upper_s"]) / df["upper_s"],
        usd_per_throughput=df["price_usd"] / df["throughput_samples_per_s"],
        W_per_throughput=df["tdp_W"] / df["throughput_samples_per_s"],
    )[list(COMPARE_COLUMNS)]


def _launch(hw, config: RunConfig) -> tuple[str, ...]:
    """A what-if launch overhead the device's runtime floor hides (``whatif_launch_notes``)."""
    return whatif_launch_notes(resolve_runtime(config.runtime, hw.kind), hw)


def _bounds(graph, devices: Sequence, config: RunConfig, estimator: Any, base_id: str,
            allow_incomplete: bool) -> pd.DataFrame:
    """``speedup_bounds`` of the run's workload on the devices that run the baseline's runtime
    (its own explain of the rows). A device under another runtime (a CPU beside GPUs) runs
    other kernels, so no per-kernel bound exists: its bound columns are NaN and
    ``within_bounds`` None (``_outside`` says why)."""
    specs = [get_device(d) for d in devices]
    base = next(s for s in specs if s.id == base_id)
    profile = resolve_runtime(config.runtime, base.kind)
    same = [s for s in specs if resolve_runtime(config.runtime, s.kind).name == profile.name]
    work = step_rows(graph, config, profile, allow_incomplete=allow_incomplete)
    feats, explained = explain_rows(work, same, config, estimator, profile)
    return speedup_bounds(feats, explained, [s.id for s in same], base_id).reindex(
        [s.id for s in specs])


def _outside(row: pd.Series) -> str:
    """The note of a speedup outside its physical bounds ('' when within)."""
    if row["within_bounds"] is None:
        return (f"{row['device']} runs {row['runtime']}, the baseline another runtime: their "
                "kernels differ, so its speedup has no like-for-like hardware bound")
    if row["within_bounds"]:
        return ""
    return (f"{row['device']}: predicted speedup {row['speedup']:.2f}x is outside what its "
            f"hardware allows over {row['baseline']} ({row['speedup_min']:.2f}-"
            f"{row['speedup_max']:.2f}x; compute ratio {row['compute_ratio']:.2f}, bandwidth "
            f"ratio {row['bandwidth_ratio']:.2f}): the estimator gave it another efficiency for "
            f"the same kernels ({row['road']})")
