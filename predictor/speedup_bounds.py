"""Physical bounds on a predicted speedup, and which road (estimator family) timed each device.

A device cannot beat its baseline by more than its hardware allows. Per kernel row ``r`` of
the workload, featurized on device ``d`` and on the baseline ``b`` at the run's precision and
engines (``predictor.features``: the peak of the row's engine and dtype, the bandwidths, the
per-kernel floors), the ratios are

    ρ_c(r) = P_d / P_b                       (peak FLOP/s of the row's engine and dtype)
    ρ_m(r) = BW_d / BW_b,  ρ_l2(r)           (DRAM bandwidth; the L2-aware bandwidth of the
                                              row's bytes, ``learned.features.roofline_terms``)
    ρ_f(r) = f_b / f_d,  ρ_L(r) = L_b / L_d  (runtime dispatch floor; device launch overhead)

and every estimator of roofcast times a row as ``E · g(c, m, f)`` with ``g`` a max or a sum of
its compute, memory and floor terms (each the row's work over one of those rates) and ``E`` an
efficiency. With the same efficiency and work on both devices (same road, same kernel) the
row's speedup ``t_b / t_d`` lies in ``[l(r), u(r)] = [min ρ(r), max ρ(r)]`` (a floor ratio is 1
when both devices have the same floor, so ``l <= 1 <= u`` then: a launch-bound row speeds up
by nothing). Weighted by the baseline's own predicted times ``t_b(r)``, the model's speedup
``S = Σ t_b / Σ t_d`` is bounded by

    S_min = Σ t_b / Σ (t_b / l(r))    <=   S   <=    S_max = Σ t_b / Σ (t_b / u(r))

(weighted harmonic means: every row of the device takes at least ``t_b / u`` and at most
``t_b / l``). A prediction outside ``[S_min, S_max]`` means the estimator gave the device a
better (or worse) efficiency than the baseline for the same kernels — a learned model
extrapolating, or two roads mixed — and is flagged (``within_bounds`` False, and a note).
Reported beside it, weighted the same way by the baseline's compute and DRAM times
``c_b = FLOPs / P_b``, ``m_b = bytes / BW_b``: ``compute_ratio = Σ c_b / Σ (c_b / ρ_c)`` (the
speedup if every row were compute bound at peak) and ``bandwidth_ratio = Σ m_b / Σ (m_b / ρ_m)``
(if every row were DRAM bound); rows without FLOPs (a toy GEMM) fall back to ``t_b`` weights. Estimators whose memory traffic depends on
the cache sizes (``traffic``) can legitimately exceed ``S_max`` on a device with a larger L2;
that is flagged too, for a reader to judge. With
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
