"""Fit efficiency curves on needed-efficiency rows (``EfficiencyCurves.fit``).

Rows: one measured kernel each, columns ``device``, ``family``, ``flops``, ``bytes`` (moved),
``compute_s``/``memory_s`` (the model's terms at efficiency 1), ``t_kernel`` (measured kernel
time, s) and ``l2_bytes``. The efficiency a row needed is its model term over ``t_kernel``:
matrix (GEMM/conv rows, compute-bound) ``compute_s / t_kernel`` vs log10(flops), memory
(elementwise rows larger than L2) ``memory_s / t_kernel`` vs log10(bytes). Per device, rows are
binned in half decades (bins of fewer than ``MIN_ROWS`` dropped), a bin's median clipped to
``CLIP`` is a point; matrix curves are made non-decreasing. The ``gpu`` kind curves are the
per-bin medians over devices (bins seen on >= 3); memory curves start with ``PRIOR_MEMORY_RAMP``.
Method and history: ``docs/design/fitted.md``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from roofcast.predictor.fitted import FittedMetadata, rows_hash

PRIOR_MEMORY_RAMP = [[4.0, 0.08], [5.0, 0.25], [6.0, 0.5]]
MIN_ROWS = 30
BIN = 0.5
CLIP = (0.01, 1.0)
BASIS = ("Fitted by benchmarks/fit_efficiency_curves.py on the NeuSight train split ({what}); "
         "median needed efficiency per half-decade bin. NeuSight test split and DeepBench not "
         "used.{note}")
MEMORY_NOTE = (" Below the first fitted point: the Little's-law prior ramp (no DRAM-bound train"
               " rows there; the harness keeps such tensors in L2).")
MATRIX_NOTE = " Made non-decreasing (running max; see the script)."


def _points(x: pd.Series, need: pd.Series, monotone: bool = False) -> list[list[float]]:
    ok = need.notna() & np.isfinite(need) & (need > 0)
    bins = (np.floor(np.log10(x[ok]) / BIN) * BIN + BIN / 2).round(2)
    g = need[ok].groupby(bins)
    med = g.median()[g.size() >= MIN_ROWS].clip(*CLIP)
    if monotone:
        med = med.cummax()
    return [[float(b), round(float(v), 3)] for b, v in med.items()]


def device_points(df: pd.DataFrame) -> dict[tuple[str, str], list[list[float]]]:
    """(device, engine) -> fitted points (module docstring)."""
    out = {}
    valid = df["t_kernel"] > 0
    mat = df[valid & df["family"].isin(["matmul", "conv"]) & (df["compute_s"] >= df["memory_s"])]
    mem = df[valid & df["family"].eq("elementwise") & (df["bytes"] > df["l2_bytes"])]
    for dev in sorted(df["device"].unique()):
        m, b = mat[mat.device == dev], mem[mem.device == dev]
        out[(dev, "matrix")] = _points(m["flops"], m["compute_s"] / m["t_kernel"], monotone=True)
        out[(dev, "memory")] = _points(b["bytes"], b["memory_s"] / b["t_kernel"])
    return out


def pooled(curves: dict, engine: str) -> list[list[float]]:
    """Per-bin median over the devices' ``engine`` curves (bins seen on >= 3 devices)."""
    per = [dict(map(tuple, pts)) for (dev, e), pts in curves.items() if e == engine]
    xs = sorted({x for p in per for x in p})
    return [[x, round(float(np.median([p[x] for p in per if x in p])), 3)] for x in xs
            if sum(x in p for p in per) >= 3]


def _curve(scope: str, engine: str, dtype: str, points: list[list[float]], what: str
           ) -> dict[str, Any]:
    note = MATRIX_NOTE if engine == "matrix" else ""
    if engine == "memory":
        points = [p for p in PRIOR_MEMORY_RAMP if p[0] < points[0][0] - BIN] + points
        note = MEMORY_NOTE
    x = "log10_bytes" if engine == "memory" else "log10_flops"
    return {"scope": scope, "engine": engine, "dtype": dtype, "x": x,
            "xs": tuple(float(p[0]) for p in points),
            "fractions": tuple(float(p[1]) for p in points),
            "basis": BASIS.format(what=what, note=note)}


def fit_curves(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Per-device curves, then the pooled ``gpu`` matrix (fp32 and ``*``) and memory curves,
    each as the fields of an ``efficiency.Curve``; a curve without points is left out."""
    per = device_points(rows)
    matrix, memory = pooled(per, "matrix"), pooled(per, "memory")
    wanted = [*((dev, e, "fp32" if e == "matrix" else "*", pts, f"device {dev}")
                for (dev, e), pts in per.items()),
              ("gpu", "matrix", "fp32", matrix, "median over devices"),
              ("gpu", "matrix", "*", matrix,
               "pooled fp32 curve reused for tensor-core dtypes: no such train rows"),
              ("gpu", "memory", "*", memory, "median over devices")]
    return [_curve(*w) for w in wanted if w[3]]


def fit_metadata(rows: pd.DataFrame, before: FittedMetadata) -> FittedMetadata:
    """``before`` with this fit's date, rows hash and row counts."""
    return replace(before, fitted_on=dt.date.today().isoformat(), data_hash=rows_hash(rows),
                   validation={**before.validation, "fit_rows": len(rows)})
