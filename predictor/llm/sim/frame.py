"""Simulation results as rows: one per device, times in ms, rates per second, GiB.

Columns: ``COLUMNS`` (``ttft_p50_ms`` ... ``e2e_p99_ms``, ``*_mean_ms``, ``requests_per_s``,
``output_tokens_per_s``, ``in_flight``, ``little_error``, ``goodput_per_s``, ``slo_share``,
``preemptions``, ``kv_pool_GiB``, ``policy``, ``road``, ``notes``, ``series``: queue, running
and KV use over time, ``series_records``); NaN where not predicted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from roofcast.predictor.llm.sim.metrics import PERCENTILES
from roofcast.predictor.llm.sim.run import SimResult

GIB = float(2**30)
LATENCIES: tuple[tuple[str, str], ...] = (("ttft", "ttft_s"), ("tpot", "tpot_s"),
                                          ("e2e", "e2e_s"))
STATS: tuple[str, ...] = ("mean", *(f"p{q}" for q in PERCENTILES))
COLUMNS: tuple[str, ...] = (
    "device", "runtime", "policy", "clients",
    *(f"{k}_{s}_ms" for k, _ in LATENCIES for s in STATS),
    "requests_per_s", "output_tokens_per_s", "total_tokens_per_s", "in_flight",
    "little_error", "goodput_per_s", "slo_share", "preemptions", "steps", "kv_pool_GiB",
    "road", "notes", "series")


def sim_row(r: SimResult) -> dict[str, Any]:
    """One device's row (module docstring)."""
    row: dict[str, Any] = {"device": r.device, "runtime": r.runtime, "policy": r.policy.name,
                           "clients": r.clients, "kv_pool_GiB": r.pool.bytes / GIB,
                           "road": r.road, "notes": list(r.notes)}
    m = r.metrics
    for key, attr in LATENCIES:
        for s in STATS:
            row[f"{key}_{s}_ms"] = m.latency[attr][s] * 1e3 if m else math.nan
    for col in ("requests_per_s", "output_tokens_per_s", "total_tokens_per_s", "in_flight",
                "little_error", "preemptions", "steps"):
        row[col] = getattr(m, col) if m else math.nan
    row["goodput_per_s"] = m.goodput_per_s if m and m.goodput_per_s is not None else math.nan
    row["slo_share"] = m.slo_share if m and m.slo_share is not None else math.nan
    row["series"] = series_records(r)
    return row


def sim_frame(results: Sequence[SimResult]) -> pd.DataFrame:
    """One row per result (``COLUMNS``)."""
    return pd.DataFrame([sim_row(r) for r in results]).reindex(columns=COLUMNS)


def series_records(r: SimResult) -> list[dict[str, float]]:
    """The queue / running / KV-use series of one result (at most 200 samples)."""
    if r.metrics is None:
        return []
    s = r.metrics.series
    return [{"time_s": float(t), "queued": int(q), "running": int(n), "kv_used": float(k)}
            for t, q, n, k in zip(s["time_s"], s["queued"], s["running"], s["kv_used"],
                                  strict=True)]
