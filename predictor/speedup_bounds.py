"""Physical bounds on a predicted speedup, and which road (estimator family) timed each device.

Per kernel row r, the device d / baseline b ratios of compute peak ``ρ_c = P_d/P_b``, bandwidth
``ρ_m = BW_d/BW_b`` (and the L2-aware ``ρ_l2``), dispatch floor and launch overhead bound the
row's speedup to ``[l(r), u(r)] = [min ρ(r), max ρ(r)]`` when both devices use the same road and
efficiency. Weighted by the baseline's times ``t_b``:
``S_min = Σ t_b / Σ (t_b / l) <= S <= S_max = Σ t_b / Σ (t_b / u)``; a prediction outside is
flagged (``within_bounds`` False, a note). ``compute_ratio`` / ``bandwidth_ratio``: the speedup
if every row were compute / DRAM bound. ``road`` per device: its time share per estimator
family; ``same_road``: every row timed by the same family as on the baseline.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.speedup_bounds).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.predictor.estimators.base import base_terms, road_source
from roofcast.predictor.learned.features import roofline_terms

BOUND_COLUMNS: tuple[str, ...] = ("compute_ratio", "bandwidth_ratio", "speedup_min",
                                  "speedup_max", "within_bounds", "road", "same_road")
#: relative slack of the ``within_bounds`` check (float rounding only).
TOLERANCE = 1e-6


def _family(labels: pd.Series) -> np.ndarray:
    """``learned`` / ``learned (transferred)`` / ``analytical:<name>`` of ``predictor`` labels
    (an analytical estimator's rows have no ``predictor`` column: its own name)."""
    return road_source(labels)


def _road(family: np.ndarray, time: np.ndarray) -> str:
    total = float(time.sum())
    shares = pd.Series(time).groupby(family).sum().sort_values(ascending=False)
    return " + ".join(f"{name} {100 * t / total:.0f}%" if total > 0 else name
                      for name, t in shares.items())


def speedup_bounds(feats: pd.DataFrame, explained: pd.DataFrame, device_ids: list[str],
                   base_id: str) -> pd.DataFrame:
    """One row per device (index: device id) with ``BOUND_COLUMNS`` but ``within_bounds``
    (module docstring). ``feats``: the featurized workload, device-major (``featurize`` of one
    workload on ``device_ids``); ``explained``: the estimator's explain of ``feats``."""
    n = len(feats) // len(device_ids)
    shape = (len(device_ids), n)
    c, m_dram, _ = base_terms(feats)
    _, m_eff, _ = roofline_terms(feats)
    peak = feats["peak_flops_per_s"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_peak = np.where(np.isfinite(peak) & (peak > 0), 1.0 / peak, np.nan)
    floors = [feats[col].to_numpy(float) for col in ("dispatch_floor_s", "launch_overhead_s")]
    # per-row "time per unit of work" of each term: the ratio baseline / device is the speedup
    terms = [np.asarray(t, float).reshape(shape) for t in (inv_peak, m_dram, m_eff, *floors)]
    time = explained["time_s"].to_numpy(float).reshape(shape)
    if "predictor" in explained.columns:
        family = _family(explained["predictor"]).reshape(shape)
    else:
        family = np.asarray(explained["estimator"].astype(str)).reshape(shape)
    coarse = np.where(pd.Series(family.ravel()).str.startswith("learned"), "learned",
                      family.ravel()).reshape(shape)
    b = device_ids.index(base_id)
    t_b = time[b]
    c_b = np.asarray(c, float).reshape(shape)[b]
    m_b = np.asarray(m_dram, float).reshape(shape)[b]
    out = {}
    for d, dev in enumerate(device_ids):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.stack([t[b] / t[d] for t in terms])
        ratios = np.where(np.isfinite(ratios) & (ratios > 0), ratios, np.nan)
        lo, hi = np.nanmin(ratios, axis=0), np.nanmax(ratios, axis=0)
        out[dev] = {
            "compute_ratio": _harmonic(c_b if (c_b > 0).any() else t_b, ratios[0]),
            "bandwidth_ratio": _harmonic(m_b if (m_b > 0).any() else t_b, ratios[1]),
            "speedup_min": _harmonic(t_b, lo),
            "speedup_max": _harmonic(t_b, hi),
            "road": _road(family[d], time[d]),
            "same_road": bool((coarse[d] == coarse[b]).all()),
        }
    return pd.DataFrame.from_dict(out, orient="index")


def _harmonic(weight: np.ndarray, ratio: np.ndarray) -> float:
    """``Σ w / Σ (w / ρ)`` over the rows with a weight > 0 and a ratio (NaN when none)."""
    use = (weight > 0) & np.isfinite(ratio)
    if not use.any():
        return float("nan")
    return float(weight[use].sum() / (weight[use] / ratio[use]).sum())


def within(speedup: pd.Series, lo: pd.Series, hi: pd.Series) -> pd.Series:
    """``lo·(1 - TOLERANCE) <= speedup <= hi·(1 + TOLERANCE)`` per device."""
    return (speedup >= lo * (1 - TOLERANCE)) & (speedup <= hi * (1 + TOLERANCE))
