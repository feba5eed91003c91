"""Roofline family: roofline, no-overlap, time-based roofline, roofline with efficiency curves.

F = FLOPs, B = bytes, P = peak FLOP/s of the engine, BW = memory bandwidth (B/s), L = launch
overhead (s), e_c / e_m = efficiency curves (``predictor/data/efficiency_curves.toml``).

* ``roofline``: ``max(F/P, B/BW)`` (Williams et al. 2009); ``no-overlap``: ``F/P + B/BW``;
* ``time-roofline`` (Yang et al. 2020): ``max(F/P, B/BW, L)``, each row labelled by its term;
* ``roofline+eff``: ``max(F/(P·e_c), B/(BW·e_m), L)``.

``overhead="floor"`` (``max(T, L)``, default) or ``"additive"`` (``T + L``). Intervals (``base``):
lower ``max(F/P, B/BW)``, upper compute + memory + overhead serialised.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.estimators.roofline).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.predictor.efficiency import EfficiencyCurves, default_curves
from roofcast.predictor.estimators.base import (
    AnalyticalEstimator,
    base_terms,
    check_features,
    frame,
    with_overhead,
)
from roofcast.predictor.estimators.whatif import efficiency_devices


class Roofline(AnalyticalEstimator):
    """``max(F/P, B/BW)``."""

    name = "roofline"

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        check_features(X)
        c, m, lo = base_terms(X)
        t = np.maximum(c, m)
        return frame(X, self.name, t, c, m, np.zeros_like(t), t, c + m + lo)


class NoOverlap(AnalyticalEstimator):
    """``F/P + B/BW``."""

    name = "no-overlap"

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        check_features(X)
        c, m, lo = base_terms(X)
        t = c + m
        return frame(X, self.name, t, c, m, np.zeros_like(t), np.maximum(c, m), c + m + lo)


class TimeRoofline(AnalyticalEstimator):
    """``max(F/P, B/BW, L)`` (Yang et al. 2020); ``overhead="additive"``: ``max(F/P, B/BW) + L``."""

    name = "time-roofline"

    def __init__(self, overhead: str = "floor") -> None:
        self.overhead = overhead

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        check_features(X)
        c, m, lo = base_terms(X)
        t = with_overhead(np.maximum(c, m), lo, self.overhead)
        return frame(X, self.name, t, c, m, lo, np.maximum(c, m), c + m + lo)


def efficiencies(X: pd.DataFrame, curves: EfficiencyCurves) -> tuple[np.ndarray, np.ndarray]:
    """(compute efficiency, memory efficiency) per row from the curves.

    Compute curve key: (device, or a what-if device's base, device_kind, row engine, peak_dtype)
    at the row's FLOPs (an fp32 GEMM on a device without an fp32 matrix unit uses the
    matrix/fp32 curve: an SGEMM on the FMA pipes).
    Memory curve key: (device_kind, "memory", peak_dtype) at the row's bytes moved. Rows on
    data/free engines get compute efficiency 1 (they have no compute term).
    """
    kind = X["device_kind"].astype(str).to_numpy()
    device = efficiency_devices(X)
    engine = X["engine"].astype(str).to_numpy()
    dtype = X["peak_dtype"].astype(str).to_numpy()
    flops = X["flops"].to_numpy(float)
    moved = X["bytes_read"].to_numpy(float) + X["bytes_written"].to_numpy(float)
    comp = np.ones(len(X))
    has = np.isin(engine, ("matrix", "vector"))
    if has.any():
        comp[has] = curves.fraction(device[has], kind[has], engine[has], dtype[has], flops[has])
    mem = curves.fraction(device, kind, np.full(len(X), "memory", dtype=object), dtype, moved)
    return comp, mem


class RooflineEff(AnalyticalEstimator):
    """``max(F/(P·e_c), B/(BW·e_m), L)`` with data-file efficiency curves (or ``+ L``)."""

    name = "roofline+eff"

    def __init__(self, curves_path: str | None = None, overhead: str = "floor") -> None:
        self.curves_path = curves_path
        self.overhead = overhead

    def _curves(self) -> EfficiencyCurves:
        return EfficiencyCurves.load(self.curves_path) if self.curves_path else default_curves()

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        check_features(X, ("device", "device_kind", "peak_dtype"))
        c, m, lo = base_terms(X)
        ec, em = efficiencies(X, self._curves())
        c2, m2 = c / ec, m / em
        t = with_overhead(np.maximum(c2, m2), lo, self.overhead)
        return frame(X, self.name, t, c2, m2, lo, np.maximum(c, m), c2 + m2 + lo,
                     eff_compute=ec, eff_memory=em)
