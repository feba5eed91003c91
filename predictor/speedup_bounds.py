"""Physical bounds on a predicted speedup, and which road (estimator family) timed each device.

A device cannot beat its baseline by more than its hardware allows. Per kernel row ``r`` of
the workload, featurized on device ``d`` and on the baseline ``b`` at the run's precision and
engines (``predictor.features``: the peak of the row's engine and dtype, the bandwidths, the
per-kernel floors), the ratios are

    ρ_c(r) = c_b / c_d                       (compute: FLOPs / peak of the row's unit)
    ρ_m(r) = m_b / m_d,  ρ_l2(r) = ...       (DRAM bytes / mem_bw; L2-aware bytes / bw_eff)
    ρ_f(r) = f_b / f_d,  ρ_L(r) = L_b / L_d  (runtime dispatch floor; device launch overhead)

and every estimator of roofcast times a row as ``E · g(c, m, f)`` with ``g`` a max or a sum of
those terms (homogeneous, monotone) and ``E`` an efficiency. With the same efficiency on both
devices (same road, same kernel) the row's speedup ``t_b / t_d`` lies in
``[l(r), u(r)] = [min ρ(r), max ρ(r)]`` over the ratios above (a floor ratio is 1 when both
devices have the same floor, so ``l <= 1 <= u`` then: a launch-bound row speeds up by nothing).
Summed over rows with the baseline's own predicted times ``t_b(r)`` as weights, the model's
speedup ``S = Σ t_b / Σ t_d`` is bounded by

    S_min = Σ t_b / Σ (t_b / l(r))    <=   S   <=    S_max = Σ t_b / Σ (t_b / u(r))

(weighted harmonic means: every row of the device takes at least ``t_b / u`` and at most
``t_b / l``). A prediction outside ``[S_min, S_max]`` means the estimator gave the device a
better (or worse) efficiency than the baseline for the same kernels — a learned model
extrapolating, or two roads mixed — and is flagged (``within_bounds`` False, and a note).
Reported beside it, time-weighted over the rows: ``compute_ratio = Σ c_b / Σ c_d`` (the speedup
if every row were compute bound at peak) and ``bandwidth_ratio = Σ m_b / Σ m_d`` (DRAM). With
``inter_op`` the bounds are those of the sequential sums (a critical path is a sum over a
subset of rows, bounded alike in practice but not proven).

``road`` per device: the share of its time per estimator family (``learned``, ``learned
(transferred)``, ``analytical:<name>``); ``same_road``: every row of the device is timed by
the same family (learned or analytical) as on the baseline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.predictor.estimators.base import base_terms
from roofcast.predictor.learned.features import roofline_terms

BOUND_COLUMNS: tuple[str, ...] = ("compute_ratio", "bandwidth_ratio", "speedup_min",
                                  "speedup_max", "within_bounds", "road", "same_road")
#: relative slack of the ``within_bounds`` check (float rounding only).
TOLERANCE = 1e-6


def _family(labels: pd.Series) -> np.ndarray:
    """``learned`` / ``learned (transferred)`` / ``analytical:<name>`` of ``predictor`` labels
    (an analytical estimator's rows have no ``predictor`` column: its own name)."""
    text = labels.astype(str)
    return np.where(text.str.startswith("analytical:"), text, text.str.split(":").str[0])


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
    floors = [feats[col].to_numpy(float) for col in ("dispatch_floor_s", "launch_overhead_s")]
    terms = [np.asarray(t, float).reshape(shape) for t in (c, m_dram, m_eff, *floors)]
    time = explained["time_s"].to_numpy(float).reshape(shape)
    if "predictor" in explained.columns:
        family = _family(explained["predictor"]).reshape(shape)
    else:
        family = np.asarray(explained["estimator"].astype(str)).reshape(shape)
    coarse = np.where(pd.Series(family.ravel()).str.startswith("learned"), "learned",
                      family.ravel()).reshape(shape)
    b = device_ids.index(base_id)
    t_b = time[b]
    rows = t_b > 0
    out = {}
    for d, dev in enumerate(device_ids):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.stack([np.where(t[d] > 0, t[b] / t[d], np.nan) for t in terms])
        ratios[0] = np.where(terms[0][b] > 0, ratios[0], np.nan)  # rows without FLOPs
        hi = np.nanmax(np.where(np.isfinite(ratios), ratios, np.nan), axis=0)
        lo = np.nanmin(np.where(np.isfinite(ratios), ratios, np.nan), axis=0)
        use = rows & np.isfinite(hi) & np.isfinite(lo)
        w = t_b[use]
        c_b, c_d = terms[0][b].sum(), terms[0][d].sum()
        out[dev] = {
            "compute_ratio": c_b / c_d if c_d > 0 else np.nan,
            "bandwidth_ratio": terms[1][b].sum() / terms[1][d].sum(),
            "speedup_min": w.sum() / (w / lo[use]).sum() if use.any() else np.nan,
            "speedup_max": w.sum() / (w / hi[use]).sum() if use.any() else np.nan,
            "road": _road(family[d], time[d]),
            "same_road": bool((coarse[d] == coarse[b]).all()),
        }
    return pd.DataFrame.from_dict(out, orient="index")


def within(speedup: pd.Series, lo: pd.Series, hi: pd.Series) -> pd.Series:
    """``lo·(1 - TOLERANCE) <= speedup <= hi·(1 + TOLERANCE)`` per device."""
    return (speedup >= lo * (1 - TOLERANCE)) & (speedup <= hi * (1 + TOLERANCE))
