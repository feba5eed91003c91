"""``featurize(workload, hw, config)``: the workload table joined with one device's figures.

Output = the workload columns (``predictor.workload_schema``) plus, per row:

* ``peak_flops_per_s``: ``hw.peak(engine, peak_dtype(engine, dtype)).flops_per_s`` (``inf`` for
  ``data``/``free`` ops, so compute time is 0), times the CPU thread factor below;
  ``peak_engine``/``peak_dtype`` the unit actually used; ``peak_note`` the device's fallback note
  ("" when the exact unit exists).
* ``mem_bw_Bps`` (after CPU thread scaling), ``l2_bytes``, ``l2_bw_Bps`` (NaN if unpublished),
  ``units`` (effective: CPU threads), ``clock_Hz``, ``launch_overhead_s``,
  ``smem_per_unit_bytes`` (NaN if unpublished), ``device`` (id), ``device_kind``,
  ``elem_bytes`` (storage bytes of the row's dtype), ``intensity_flop_per_byte`` and
  ``ridge_flop_per_byte`` (= peak / bandwidth).

CPU thread scaling (``hw.kind == "cpu"`` and ``config.threads`` set; GPUs ignore threads):

* compute: ``peak × min(threads, units) / units`` — each core brings its own SIMD/matrix units
  (a ``local`` calibration that measured GEMM FLOP/s at that thread count gives the measured
  fraction instead: its peak is the best over thread counts, and one thread on a shared machine
  often reaches far more than 1/N of it);
* bandwidth: ``bw × min(1, threads / t_sat)`` — DRAM bandwidth saturates before all cores are
  busy. ``t_sat`` comes from the device's ``calibration`` table key ``bw_saturation_threads``
  when the local calibration measured it, else the default ``ceil(units / 4)``: STREAM on
  multi-channel servers and desktops typically saturates with about a quarter of the cores
  (e.g. 2 of 8 desktop cores; ~8-14 of 56 server cores per socket).
* ``units`` becomes ``min(threads, units)`` (used for wave quantisation).

Every column is computed with numpy over all rows; ``hw.peak`` is called once per distinct
(engine, dtype) pair.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from roofcast.graph_import.workload_schema import check_workload
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.precision import STORAGE_BYTES, peak_dtype

FEATURE_COLUMNS: tuple[str, ...] = (
    "peak_flops_per_s", "peak_engine", "peak_dtype", "peak_note", "mem_bw_Bps", "l2_bytes",
    "l2_bw_Bps", "units", "clock_Hz", "launch_overhead_s", "smem_per_unit_bytes", "device",
    "device_kind", "elem_bytes", "intensity_flop_per_byte", "ridge_flop_per_byte",
)
BW_SATURATION_FRACTION_OF_UNITS = 0.25


def bw_saturation_threads(hw: HardwareSpec) -> float:
    """Threads at which a CPU's DRAM bandwidth saturates (calibrated, else ceil(units / 4))."""
    cal = hw.calibration.get("bw_saturation_threads") if hw.calibration else None
    if isinstance(cal, int | float) and cal > 0:
        return float(cal)
    return float(max(1, math.ceil(hw.units * BW_SATURATION_FRACTION_OF_UNITS)))


def calibrated_gemm_fraction(hw: HardwareSpec, threads: int) -> float | None:
    """Measured fp32 GEMM FLOP/s at ``threads`` / the best over all thread counts, from the
    local calibration's ``gemm.fp32`` curve (None when that thread count was not measured)."""
    try:
        g = hw.calibration["gemm"]["fp32"]
        curve = dict(zip((int(t) for t in g["threads"]), (float(v) for v in g["GFLOPs"]),
                         strict=True))
    except (KeyError, TypeError, ValueError):
        return None
    if threads not in curve or not curve or max(curve.values()) <= 0:
        return None
    return curve[threads] / max(curve.values())


def thread_factors(hw: HardwareSpec, threads: int | None) -> tuple[float, float, int]:
    """(compute factor, bandwidth factor, effective units) for ``threads`` on ``hw``.

    Compute factor: the calibrated GEMM curve's fraction at ``threads`` when the local
    calibration measured it (``calibrated_gemm_fraction``), else ``min(threads, units) / units``.
    """
    if hw.kind != "cpu" or threads is None:
        return 1.0, 1.0, int(hw.units)
    used = min(threads, int(hw.units))
    measured = calibrated_gemm_fraction(hw, used) if hw.calibration else None
    compute_f = measured if measured is not None else used / hw.units
    return compute_f, min(1.0, threads / bw_saturation_threads(hw)), used


def featurize(workload: pd.DataFrame, hw: HardwareSpec, config: RunConfig) -> pd.DataFrame:
    """Workload rows + device columns (see module docstring); the input is not modified."""
    check_workload(workload)
    out = workload.copy()
    n = len(out)
    compute_f, bw_f, units = thread_factors(hw, config.threads)

    engines = out["engine"].astype(str).to_numpy()
    dtypes = out["dtype"].astype(str).to_numpy()
    bad = sorted(set(dtypes) - set(STORAGE_BYTES))
    if bad:
        raise PredictionError(f"workload dtype values {bad} are not precisions {tuple(STORAGE_BYTES)}")
    peak = np.empty(n, dtype=float)
    p_eng = np.empty(n, dtype=object)
    p_dt = np.empty(n, dtype=object)
    p_note = np.empty(n, dtype=object)
    for eng, dt in sorted(set(zip(engines, dtypes, strict=True))):
        mask = (engines == eng) & (dtypes == dt)
        try:
            look = hw.peak(eng, peak_dtype(eng, dt))
        except HardwareSpecError as exc:  # the device cannot run this dtype at all
            raise PredictionError(f"device {hw.id!r}: {exc}") from exc
        peak[mask] = look.flops_per_s * compute_f
        p_eng[mask] = look.engine_used
        p_dt[mask] = look.dtype_used
        p_note[mask] = look.note if eng not in ("data", "free") else ""
    out["peak_flops_per_s"] = peak
    out["peak_engine"] = p_eng
    out["peak_dtype"] = p_dt
    out["peak_note"] = p_note
    out["mem_bw_Bps"] = float(hw.mem_bw_Bps) * bw_f
    out["l2_bytes"] = float(hw.l2_bytes)
    out["l2_bw_Bps"] = float(hw.l2_bw_Bps) if hw.l2_bw_Bps else np.nan
    out["units"] = float(units)
    out["clock_Hz"] = float(hw.clock_Hz)
    out["launch_overhead_s"] = float(hw.launch_overhead_s)
    smem = hw.shared_mem_per_unit_bytes
    out["smem_per_unit_bytes"] = float(smem) if smem else np.nan
    out["device"] = hw.id
    out["device_kind"] = hw.kind
    out["elem_bytes"] = pd.Series(dtypes, index=out.index).map(STORAGE_BYTES).astype(float)
    moved = out["bytes_read"].to_numpy(float) + out["bytes_written"].to_numpy(float)
    flops = out["flops"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["intensity_flop_per_byte"] = np.where(moved > 0, flops / np.where(moved > 0, moved, 1), 0.0)
    out["ridge_flop_per_byte"] = peak / out["mem_bw_Bps"].to_numpy(float)
    return out
