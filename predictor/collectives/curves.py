"""Measured collective curves (``predictor/data/collectives/curves.csv``) and log-log interpolation.

A curve is keyed by (system name, collective, n_ranks, ranks_per_node). Between measured sizes the
time is interpolated linearly in log(size)-log(time), exact at the measured points; outside the
measured range there is no curve (the step model answers).
"""

from __future__ import annotations

from functools import cache, lru_cache

import numpy as np
import pandas as pd

from roofcast.predictor.collectives.params import CURVES_PATH

KEY = ["system", "collective", "n_ranks", "ranks_per_node"]


@lru_cache(maxsize=1)
def load_curves() -> pd.DataFrame:
    return pd.read_csv(CURVES_PATH)


@cache
def _curve(system: str, collective: str, n_ranks: int, per_node: int
           ) -> tuple[np.ndarray, np.ndarray] | None:
    c = load_curves()
    rows = c[(c.system == system) & (c.collective == collective) & (c.n_ranks == n_ranks)
             & (c.ranks_per_node == per_node)].sort_values("size_bytes")
    if rows.empty:
        return None
    return np.log(rows.size_bytes.to_numpy(float)), np.log(rows.time_s.to_numpy(float))


def measured_time_s(names: tuple[str, ...], collective: str, size_bytes: float, n_ranks: int,
                    per_node: int) -> float | None:
    """Log-log interpolated time from the first named system's curve covering ``size_bytes``."""
    if size_bytes <= 0:
        return None
    for name in names:
        curve = _curve(name, collective, n_ranks, per_node)
        if curve is None:
            continue
        xs, ys = curve
        x = np.log(size_bytes)
        if xs[0] <= x <= xs[-1]:
            return float(np.exp(np.interp(x, xs, ys)))
    return None
