"""Fit the step model's per-fabric-kind parameters to measured curves.

Least squares on log(model / measured) over the curves' sizes from ``FIT_MIN_BYTES`` to
``FIT_MAX_BYTES``, all fabric kinds (and ``nic``) at once, each measured row evaluated on its
catalog system laid out as the curve was measured (``measured.measured_layout``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from roofcast.predictor.collectives.measured import PROBE_CURVE, measured_layout, probed_nic
from roofcast.predictor.collectives.model import model_time_s
from roofcast.predictor.collectives.params import FabricParams

FIT_MIN_BYTES = 64 * 1024
FIT_MAX_BYTES = 8 * 1024**3
KINDS = ("nvswitch", "nvlink-pairs", "nic")


def _unpack(x: np.ndarray, kinds: tuple[str, ...]) -> dict[str, FabricParams]:
    """Three parameters per kind for collective kernels, and one gain shared by every kind for
    point-to-point transfers (``kind/p2p``: eff_max x gain, capped at 1), so a kind whose
    send/recv curves are all held out still gets a p2p figure learnt on the other kinds; likewise
    a gain for in-switch (NVLS) reduction (``kind/nvls``)."""
    out = {}
    gain, nvls_gain = float(x[-2]), float(x[-1])
    for i, k in enumerate(kinds):
        p = FabricParams(float(x[3 * i]), float(x[3 * i + 1]), float(np.exp(x[3 * i + 2])))
        out[k] = p
        out[f"{k}/p2p"] = FabricParams(p.step_overhead_us, min(1.0, p.eff_max * gain),
                                       p.half_size_bytes)
        out[f"{k}/nvls"] = FabricParams(p.step_overhead_us, min(1.0, p.eff_max * nvls_gain),
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
        out.append(model_time_s(r.collective, r.size_bytes, r.n_ranks, sysm, params,
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
    in_range = (curves.size_bytes >= FIT_MIN_BYTES) & (curves.size_bytes <= FIT_MAX_BYTES)
    return curves[in_range & ~excluded & ~is_probe(curves, probes or {})]


def fit_params(curves: pd.DataFrame, probes: Probes | None = None) -> dict[str, FabricParams]:
    """Least-squares parameters over ``fit_rows``; systems in ``probes`` on their probed NICs
    (only those of systems present in ``curves`` are used)."""
    probes = {s: p for s, p in (probes or {}).items() if s in set(curves.system)}
    rows = fit_rows(curves, probes)
    measured = np.log(rows.time_s.to_numpy(float))
    x0 = np.append(np.tile([5.0, 0.7, np.log(1e6)], len(KINDS)), [1.2, 1.0])
    lo = np.append(np.tile([0.0, 0.01, np.log(1e3)], len(KINDS)), [0.5, 0.3])
    hi = np.append(np.tile([200.0, 1.0, np.log(1e10)], len(KINDS)), [3.0, 3.0])

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(predict_rows(rows, _unpack(x, KINDS), probes)) - measured

    res = least_squares(resid, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1, diff_step=1e-3)
    return _unpack(res.x, KINDS)
