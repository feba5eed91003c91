"""Fit the step model's per-fabric-kind parameters to measured curves.

Least squares on log(model / measured) over the curves' sizes from ``FIT_MIN_BYTES`` to
``FIT_MAX_BYTES`` (the engines' custom all-reduce from its smallest size: small messages are
what it is for), all fabric kinds (and ``nic``) at once, each measured row evaluated on its
catalog system laid out as the curve was measured (``measured.measured_layout``); a row no
modelled algorithm runs on (a custom all-reduce off a full NVLink mesh) is left out.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from roofcast.predictor.collectives.aic import CUSTOM_ALL_REDUCE
from roofcast.predictor.collectives.measured import PROBE_CURVE, measured_layout, probed_nic
from roofcast.predictor.collectives.model import custom_all_reduce_s, model_time_s
from roofcast.predictor.collectives.params import FabricParams

FIT_MIN_BYTES = 64 * 1024
FIT_MAX_BYTES = 8 * 1024**3
KINDS = ("nvswitch", "nvlink-pairs", "nic")
#: the NIC's ``eff_max``: every cross-node curve is probed (its NIC bandwidth inferred from its
#: own send/recv, ``measured.probed_nic``), so ``eff_max`` cancels out of every fitted row; it is
#: held at the value the Vidur/Azure fit of 2026-11-24 landed on, so catalog-NIC systems keep
#: their cross-node figures.
NIC_EFF_MAX = 0.5110575019583399
#: smallest size fitted per collective where it differs from ``FIT_MIN_BYTES``.
FIT_MIN_BYTES_OF: dict[str, float] = {CUSTOM_ALL_REDUCE: 0.0}


def _custom_row_s(collective: str, size: float, n: int, system, params, *,
                  ranks_per_node: int) -> float:
    t = custom_all_reduce_s(size, n, system, params)
    return float("nan") if t is None else t


#: curve collective -> its timer (``model_time_s``'s signature) where not ``model_time_s``.
ROW_TIMERS = {CUSTOM_ALL_REDUCE: _custom_row_s}


def _unpack(x: np.ndarray, kinds: tuple[str, ...]) -> dict[str, FabricParams]:
    """Three parameters per kind for collective kernels, and one gain shared by every kind for
    point-to-point transfers (``kind/p2p``: eff_max x gain, capped at 1), so a kind whose
    send/recv curves are all held out still gets a p2p figure learnt on the other kinds; likewise
    a gain for in-switch (NVLS) reduction (``kind/nvls``) and, for the engines' own all-reduce
    kernels (``kind/custom``), a step overhead of their own and a gain."""
    out = {}
    custom_us, custom_gain, gain, nvls_gain = (float(v) for v in x[-4:])
    for i, k in enumerate(kinds):
        eff_max = NIC_EFF_MAX if k == "nic" else float(x[3 * i + 1])
        p = FabricParams(float(x[3 * i]), eff_max, float(np.exp(x[3 * i + 2])))
        out[k] = p
        out[f"{k}/p2p"] = FabricParams(p.step_overhead_us, min(1.0, p.eff_max * gain),
                                       p.half_size_bytes)
        out[f"{k}/nvls"] = FabricParams(p.step_overhead_us, min(1.0, p.eff_max * nvls_gain),
                                        p.half_size_bytes)
        out[f"{k}/custom"] = FabricParams(custom_us, min(1.0, p.eff_max * custom_gain),
                                          p.half_size_bytes)
    return out


Probes = Mapping[str, tuple[float, float]]
"""curve system -> (size_bytes, time_s) of its network probe (``measured.probe_points``)"""


def predict_rows(rows: pd.DataFrame, params: Mapping[str, FabricParams],
                 probes: Probes | None = None) -> np.ndarray:
    """Model times of measured rows, each on its measured layout; a system in ``probes`` gets
    the NIC its probe implies under ``params`` (``measured.probed_nic``)."""
    probes = probes or {}
    nics = {s: probed_nic(s, probe, params["nic/p2p"]) for s, probe in probes.items()}
    out = []
    for r in rows.itertuples(index=False):
        sysm = measured_layout(r.system, r.n_ranks, r.ranks_per_node, nics.get(r.system))
        timer = ROW_TIMERS.get(r.collective, model_time_s)
        out.append(timer(r.collective, r.size_bytes, r.n_ranks, sysm, params,
                         ranks_per_node=r.ranks_per_node))
    return np.array(out)


# Curves left out of the fit, with why (they stay in the benchmark's table).
EXCLUDED_CURVES: dict[tuple[str, str, int, int], str] = {
    ("a40_pairwise_nvlink", "send_recv", 2, 2): "4 GB/s at 64 MiB, below PCIe 4.0 x16: the "
    "measured pair did not use its NVLink bridge, so the catalog system's fabric does not "
    "describe it",
}


def is_probe(curves: pd.DataFrame, probes: Probes) -> pd.Series:
    """Rows of the probe curves of the systems in ``probes``."""
    collective, n, per_node = PROBE_CURVE
    return (curves.system.isin(list(probes)) & (curves.collective == collective)
            & (curves.n_ranks == n) & (curves.ranks_per_node == per_node))


def fit_rows(curves: pd.DataFrame, probes: Probes | None = None) -> pd.DataFrame:
    """Rows the fit uses: sizes in range, not excluded, not a probe curve."""
    keys = list(zip(curves.system, curves.collective, curves.n_ranks, curves.ranks_per_node,
                    strict=False))
    excluded = pd.Series([k in EXCLUDED_CURVES for k in keys], index=curves.index)
    low = curves.collective.map(FIT_MIN_BYTES_OF).fillna(FIT_MIN_BYTES)
    in_range = (curves.size_bytes >= low) & (curves.size_bytes <= FIT_MAX_BYTES)
    return curves[in_range & ~excluded & ~is_probe(curves, probes or {})]


def fit_params(curves: pd.DataFrame, probes: Probes | None = None) -> dict[str, FabricParams]:
    """Least-squares parameters over ``fit_rows``; systems in ``probes`` on their probed NICs
    (only those of systems present in ``curves`` are used)."""
    probes = {s: p for s, p in (probes or {}).items() if s in set(curves.system)}
    x0 = np.append(np.tile([5.0, 0.7, np.log(1e6)], len(KINDS)), [3.0, 1.2, 1.2, 1.0])
    lo = np.append(np.tile([0.0, 0.01, np.log(1e3)], len(KINDS)), [0.0, 0.3, 0.5, 0.3])
    hi = np.append(np.tile([200.0, 1.0, np.log(1e10)], len(KINDS)), [200.0, 3.0, 3.0, 3.0])
    rows = fit_rows(curves, probes)
    rows = rows[np.isfinite(predict_rows(rows, _unpack(x0, KINDS), probes))]
    measured = np.log(rows.time_s.to_numpy(float))

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(predict_rows(rows, _unpack(x, KINDS), probes)) - measured

    res = least_squares(resid, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1, diff_step=1e-3)
    return _unpack(res.x, KINDS)
