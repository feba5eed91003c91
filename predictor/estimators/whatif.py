"""What-if devices keep their base device's efficiency; only the bound moves.

A device derived by what-if keys (``h100-sxm:mem_bw_scale=2``) is not a product anyone measured:
an efficiency read from its own figures extrapolates (a learned model sees features outside its
training range and may predict a lower achieved fraction). So every road that learns or looks up
an efficiency takes it from the root catalog device (``hw_catalog.derive.what_if_root``), and the
derived figures set the physical bound: ``t = max(t_bound', (t_bound' + floor') · e_base)``
(learned) or ``F / (P' · e_c,base)`` (curves). More bandwidth or FLOP/s then never predicts a
slower kernel (a device derived in another process is found when its id is inline, ``BASE:k=v``).
``efficiency_view(X)``: the featurized table with every device figure of a
what-if row replaced by its root's (ratio root / derived of each figure, so CPU thread factors
stay); ``efficiency_devices(X)``: the device id each row's efficiency is keyed by.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.derive import what_if_root
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.runtimes import get_runtime

#: device figures of the featurized table and the spec attribute each comes from.
SCALAR_FIGURES: dict[str, str] = {
    "mem_bw_Bps": "mem_bw_Bps", "l2_bytes": "l2_bytes", "l2_bw_Bps": "l2_bw_Bps",
    "units": "units", "clock_Hz": "clock_Hz", "launch_overhead_s": "launch_overhead_s",
    "smem_per_unit_bytes": "shared_mem_per_unit_bytes",
}


def _catalog_device(device_id: str) -> bool:
    """Whether the catalog holds ``device_id`` as the id (not an alias) of a real device."""
    try:
        spec = get_device(device_id)
    except HardwareSpecError:
        return False
    return spec.id == device_id and not spec.is_derived


def _root(device_id: str) -> tuple[HardwareSpec, HardwareSpec] | None:
    """``what_if_root``; an inline id (``BASE:key=value``) derived in another process (a sweep
    worker) is derived here first. A catalog id is the catalog device even when this process
    derived a variant under that id (``derive(..., id="mi300x")`` must not shadow its rows)."""
    if what_if_root(device_id) is None and ":" in device_id:
        try:
            get_device(device_id)
        except HardwareSpecError:
            return None
    elif ":" not in device_id and what_if_root(device_id) and _catalog_device(device_id):
        return None
    return what_if_root(device_id)


def _roots(X: pd.DataFrame) -> dict[str, tuple[HardwareSpec, HardwareSpec]]:
    """Derived device id -> (derived spec, root spec) for the what-if devices of X."""
    found = {d: _root(d) for d in pd.unique(X["device"].astype(str))}
    return {d: pair for d, pair in found.items() if pair is not None}


def efficiency_devices(X: pd.DataFrame) -> np.ndarray:
    """Per row: the device id its efficiency is keyed by (a what-if device's root)."""
    device = X["device"].astype(str).to_numpy()
    roots = _roots(X)
    if not roots:
        return device
    return np.array([roots[d][1].id if d in roots else d for d in device], dtype=object)


def _ratio(root: float | None, derived: float | None) -> float:
    if root is None or derived is None or not derived:
        return np.nan if root is None or derived is None else 1.0
    return float(root) / float(derived)


def _peak_ratio(derived: HardwareSpec, root: HardwareSpec, engine: str, dtype: str) -> float:
    """root / derived peak of the (engine, dtype) the row's peak came from; 1 when either
    device lacks it or it is not finite (free and data-movement rows)."""
    try:
        r = root.peak(engine, dtype).flops_per_s
        d = derived.peak(engine, dtype).flops_per_s
    except HardwareSpecError:
        return 1.0
    return r / d if np.isfinite(r) and np.isfinite(d) and d > 0 else 1.0


def _floor(runtime: str, kind: str, launch_s: float, own_s: float) -> float:
    """The runtime's dispatch floor for a launch overhead of ``launch_s``: the launch overhead
    for a row of no runtime (``featurize`` without a profile), ``own_s`` for an unknown one."""
    if not runtime:
        return launch_s
    try:
        return get_runtime(runtime).dispatch_floor_s(kind, launch_s)
    except PredictionError:
        return own_s


def efficiency_view(X: pd.DataFrame) -> pd.DataFrame:
    """X with every what-if row's device figures (and the dispatch floor they imply) those of
    its root device (module docstring)."""
    roots = _roots(X)
    if not roots:
        return X
    out = X.copy()
    device = X["device"].astype(str).to_numpy()
    for dev_id, (derived, root) in roots.items():
        rows = device == dev_id
        for col, attr in SCALAR_FIGURES.items():
            if col in out.columns:
                f = _ratio(getattr(root, attr), getattr(derived, attr))
                out.loc[rows, col] = X.loc[rows, col].to_numpy(float) * f
        pairs = X.loc[rows, ["peak_engine", "peak_dtype"]].astype(str)
        ratio = {p: _peak_ratio(derived, root, *p) for p in set(map(tuple, pairs.to_numpy()))}
        out.loc[rows, "peak_flops_per_s"] = X.loc[rows, "peak_flops_per_s"].to_numpy(float) * [
            ratio[tuple(p)] for p in pairs.to_numpy()]
        if root.launch_overhead_s != derived.launch_overhead_s:
            sub = X.loc[rows]
            out.loc[rows, "dispatch_floor_s"] = [
                _floor(rt, kind, float(root.launch_overhead_s), own)
                for rt, kind, own in zip(sub["runtime"].astype(str),
                                         sub["device_kind"].astype(str),
                                         sub["dispatch_floor_s"].to_numpy(float), strict=True)]
    return out
