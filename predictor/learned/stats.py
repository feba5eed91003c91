"""Small weighted statistics shared by the learned models and their validation."""

from __future__ import annotations

import numpy as np

#: relative slack under which the cumulative weight counts as exactly half the total
HALF_TOL = 1e-9


def weighted_median(values: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The value ``v`` where the cumulative weight of the sorted values first reaches half the
    total, ``W(v) >= W / 2``; when it lands on half exactly (within ``HALF_TOL`` x W), the mean
    of that value and the next — so equal weights give ``np.median`` and float rounding of
    1/n weights cannot flip the result between the two middle values. No weights: the plain
    median. Empty input: NaN."""
    v = np.asarray(values, float)
    if weights is None:
        return float(np.median(v)) if len(v) else float("nan")
    if not len(v):
        return float("nan")
    o = np.argsort(v, kind="stable")
    v, c = v[o], np.cumsum(np.asarray(weights, float)[o])
    half = 0.5 * c[-1]
    i = int(np.searchsorted(c, half * (1.0 - HALF_TOL)))
    if i + 1 < len(v) and abs(c[i] - half) <= HALF_TOL * c[-1]:
        return float(0.5 * (v[i] + v[i + 1]))
    return float(v[i])
