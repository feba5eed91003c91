"""Compare devices: one model and run configuration on several devices side by side.

``compare_devices(graph_source, devices, config, estimator, baseline=...)`` is one
``predictor.sweep`` cell per device (one vectorised evaluation for all devices, no per-device
``predict_graph``) and returns one row per device (``COMPARE_COLUMNS``):

* ``time_s`` (critical path with ``config.inter_op``, else the sequential sum) and its interval
  ``lower_s`` .. ``upper_s`` = the sums of the per-op lower / upper bounds;
* ``speedup`` = baseline time / time, beside ``speedup_at_lower`` = baseline lower_s / lower_s
  and ``speedup_at_upper`` = baseline upper_s / upper_s: the speedup with both devices at their
  lower bound and both at their upper bound. The bounds are assumptions shared by every device
  (for the analytical estimators: the pure roofline without launch overhead, and compute +
  memory + launch serialised), so only like over like is a ratio worth printing; a device's
  interval over the baseline's point time (0.9-9x for ResNet-50 at batch 1 on MI300X vs
  1.05x predicted) mixes two assumptions and says nothing. Where the three agree the speedup
  holds whatever the assumption; where they differ it depends on it (mostly launch overhead);
* ``throughput_samples_per_s`` = batch / time_s; ``usd_per_throughput`` = list price /
  throughput (USD per sample/s) and ``W_per_throughput`` = TDP / throughput (W per sample/s),
  NaN where the catalog has no price or TDP — never invented;
* ``memory_bytes``, ``mem_capacity_bytes`` and ``fits`` (memory <= capacity);
* the time split by bound (``compute_bound_s``, ``memory_bound_s``, ``overhead_bound_s``: the
  summed time of the ops with that bound label), ``dominant_bound`` and ``peak_notes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from roofcast.predictor.config import RunConfig
from roofcast.predictor.estimator_registry import DEFAULT_ESTIMATOR
from roofcast.predictor.memory import GraphSource
from roofcast.predictor.sweep import BOUNDS, sweep

COMPARE_COLUMNS: tuple[str, ...] = (
    "model", "device", "baseline", "batch", "time_s", "lower_s", "upper_s", "speedup",
    "speedup_at_lower", "speedup_at_upper", "throughput_samples_per_s", "usd_per_throughput",
    "W_per_throughput", "memory_bytes", "mem_capacity_bytes", "fits", "price_usd", "tdp_W",
    *(f"{b}_bound_s" for b in BOUNDS), "dominant_bound", "peak_notes",
)


def compare_devices(graph_source: GraphSource, devices: Sequence, config: RunConfig,
                    estimator: Any = DEFAULT_ESTIMATOR, *, baseline=None,
                    allow_incomplete: bool = False) -> pd.DataFrame:
    """One row per device (module docstring), in the order of ``devices``.

    ``graph_source(batch)`` imports the model at ``config``'s batch (1 when it binds none), its
    other dims bound by the import; ``estimator``: a name or an estimator object; ``devices``: ids / inline what-if specs / HardwareSpec objects; ``baseline``: the device the
    speedups are relative to (default: the first device).
    """
    df = sweep(graph_source, devices, [config.batch or 1], precisions=[config.precision],
               modes=[config.mode], estimator=estimator, baseline=baseline,
               fusion=config.fusion, inter_op=config.inter_op, optimizer=config.optimizer,
               threads=config.threads, allow_incomplete=allow_incomplete,
               runtime=config.runtime)
    base = df.loc[df["device"] == df["baseline"]].iloc[0]
    return df.assign(
        speedup_at_lower=float(base["lower_s"]) / df["lower_s"],
        speedup_at_upper=float(base["upper_s"]) / df["upper_s"],
        usd_per_throughput=df["price_usd"] / df["throughput_samples_per_s"],
        W_per_throughput=df["tdp_W"] / df["throughput_samples_per_s"],
    )[list(COMPARE_COLUMNS)]
