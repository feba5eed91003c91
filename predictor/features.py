"""``featurize(workload, devices, config, profile=...)``: the workload table joined with device
figures and the execution profile's — the one feature table of every prediction and of training.

Vectorised over devices (``D`` devices: the ``R`` rows ``D`` times, device-major). Adds per row:
``peak_flops_per_s`` (``hw.peak`` of the row's engine and dtype, ``inf`` for free ops; TF32 for
fp32 rows of the profile's ``tf32_families`` on a TF32 matrix unit), ``peak_engine``/
``peak_dtype``/``peak_note``, ``runtime``, ``learned_from``, ``dispatch_floor_s``, ``mem_bw_Bps``,
``l2_bytes``, ``l2_bw_Bps``, ``units``, ``clock_Hz``, ``launch_overhead_s``,
``smem_per_unit_bytes``, ``device``, ``device_kind``, ``elem_bytes``,
``intensity_flop_per_byte`` and ``ridge_flop_per_byte`` (= peak / bandwidth).
CPU threads (``config.threads``): compute ``peak x min(t, units) / units`` (or the calibrated
GEMM curve), bandwidth ``bw x min(1, t / t_sat)`` with ``t_sat`` calibrated or
``ceil(units / 4)``, ``units`` = ``min(t, units)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from roofcast.graph_import.workload_schema import check_workload
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.precision import STORAGE_BYTES, peak_dtype
from roofcast.predictor.runtimes import ExecutionProfile, get_runtime

FEATURE_COLUMNS: tuple[str, ...] = (
    "peak_flops_per_s", "peak_engine", "peak_dtype", "peak_note", "mem_bw_Bps", "l2_bytes",
    "l2_bw_Bps", "units", "clock_Hz", "launch_overhead_s", "smem_per_unit_bytes", "device",
    "device_kind", "elem_bytes", "intensity_flop_per_byte", "ridge_flop_per_byte", "runtime",
    "learned_from", "dispatch_floor_s",
)
#: the columns looked up per (device, engine, dtype) pair.
PAIR_COLUMNS: tuple[str, ...] = ("peak_flops_per_s", "peak_engine", "peak_dtype", "peak_note")
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


def as_devices(devices: HardwareSpec | Sequence[HardwareSpec]) -> list[HardwareSpec]:
    """``devices`` as a list of HardwareSpec (one spec is the one-element case)."""
    specs = [devices] if isinstance(devices, HardwareSpec) else list(devices)
    if not specs:
        raise PredictionError("no devices to featurize; give at least one device")
    bad = [type(d).__name__ for d in specs if not isinstance(d, HardwareSpec)]
    if bad:
        raise PredictionError(f"featurize takes HardwareSpec objects, got {bad}; resolve ids "
                              "with hw_catalog.catalog.get_device first")
    return specs


def _pair_columns(hw: HardwareSpec, pairs: Sequence[tuple[str, str, bool]],
                  compute_f: float) -> dict[str, list]:
    """Peak columns of ``hw`` for each (engine, dtype, runs-as-TF32) triple (``hw.peak`` once
    per triple); a TF32 row uses the device's TF32 matrix peak when it has one."""
    cols: dict[str, list] = {c: [] for c in PAIR_COLUMNS}
    for eng, dt, tf32 in pairs:
        wanted = peak_dtype(eng, dt)
        if tf32 and hw.peak_flops_or_none(eng, "tf32") is not None:
            wanted = "tf32"
        try:
            look = hw.peak(eng, wanted)
        except HardwareSpecError as exc:  # the device cannot run this dtype at all
            raise PredictionError(f"device {hw.id!r}: {exc}") from exc
        cols["peak_flops_per_s"].append(look.flops_per_s * compute_f)
        cols["peak_engine"].append(look.engine_used)
        cols["peak_dtype"].append(look.dtype_used)
        cols["peak_note"].append(look.note if eng not in ("data", "free") else "")
    return cols


def _device_scalars(hw: HardwareSpec, bw_f: float, units: int) -> dict[str, object]:
    """The device columns that do not depend on the row."""
    smem = hw.shared_mem_per_unit_bytes
    return {
        "mem_bw_Bps": float(hw.mem_bw_Bps) * bw_f, "l2_bytes": float(hw.l2_bytes),
        "l2_bw_Bps": float(hw.l2_bw_Bps) if hw.l2_bw_Bps else np.nan, "units": float(units),
        "clock_Hz": float(hw.clock_Hz), "launch_overhead_s": float(hw.launch_overhead_s),
        "smem_per_unit_bytes": float(smem) if smem else np.nan, "device": hw.id,
        "device_kind": hw.kind,
    }


def _tf32_rows(workload: pd.DataFrame, profile: ExecutionProfile | None) -> np.ndarray:
    """Rows whose fp32 math the runtime runs as TF32 (on a device with TF32 matrix units)."""
    if profile is None or not profile.tf32_families:
        return np.zeros(len(workload), dtype=bool)
    return ((workload["dtype"].astype(str).to_numpy() == "fp32")
            & (workload["engine"].astype(str).to_numpy() == "matrix")
            & workload["family"].astype(str).isin(profile.tf32_families).to_numpy())


def featurize(workload: pd.DataFrame, devices: HardwareSpec | Sequence[HardwareSpec],
              config: RunConfig, profile: ExecutionProfile | None = None) -> pd.DataFrame:
    """Workload rows + device columns (module docstring) for every device, device-major.

    ``devices``: one HardwareSpec or a sequence of them. The result has ``len(devices) x
    len(workload)`` rows: device ``d``'s copy of workload row ``r`` is row ``d * len(workload)
    + r``. With one device the workload's index is kept; with several the index is a range.
    The input is not modified. ``profile``: the execution profile the rows were mapped for
    (None: ``config.runtime``'s profile when the config names one, else no profile — rows
    measured as they are).
    """
    check_workload(workload)
    specs = as_devices(devices)
    profile = _profile_for(specs, config, profile)
    n, n_dev = len(workload), len(specs)
    dtypes = workload["dtype"].astype(str).to_numpy()
    bad = sorted(set(dtypes) - set(STORAGE_BYTES))
    if bad:
        raise PredictionError(f"workload dtype values {bad} are not precisions "
                              f"{tuple(STORAGE_BYTES)}")
    data = _device_columns(workload, specs, config, profile, dtypes)
    data["runtime"] = np.full(n * n_dev, "" if profile is None else profile.name, dtype=object)
    data["learned_from"] = np.full(n * n_dev, "" if profile is None else profile.learned_from,
                                   dtype=object)
    elem = pd.Series(dtypes).map(STORAGE_BYTES).to_numpy(float)
    moved = workload["bytes_read"].to_numpy(float) + workload["bytes_written"].to_numpy(float)
    flops = workload["flops"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(moved > 0, flops / np.where(moved > 0, moved, 1), 0.0)
    data["elem_bytes"] = np.tile(elem, n_dev)
    data["intensity_flop_per_byte"] = np.tile(intensity, n_dev)
    data["ridge_flop_per_byte"] = data["peak_flops_per_s"] / data["mem_bw_Bps"]
    rows = workload.copy() if n_dev == 1 else pd.concat([workload] * n_dev, ignore_index=True)
    new = [c for c in FEATURE_COLUMNS if c not in workload.columns]
    return pd.concat([rows.drop(columns=[c for c in FEATURE_COLUMNS if c in rows.columns]),
                      pd.DataFrame({c: data[c] for c in FEATURE_COLUMNS}, index=rows.index)],
                     axis=1)[[*workload.columns, *new]]


def _profile_for(specs: list[HardwareSpec], config: RunConfig,
                 profile: ExecutionProfile | None) -> ExecutionProfile | None:
    """``profile``, else ``config.runtime``'s (None without one); refused where it does not
    run on a device's kind."""
    if profile is None and config.runtime is not None:
        profile = get_runtime(config.runtime)
    bad_kind = [hw.id for hw in specs if profile is not None and not profile.runs_on(hw.kind)]
    if bad_kind:
        raise PredictionError(f"runtime {profile.name!r} does not run on {', '.join(bad_kind)} "
                              f"(it runs on {', '.join(profile.device_kinds)} devices)")
    return profile


def _device_columns(workload: pd.DataFrame, specs: list[HardwareSpec], config: RunConfig,
                    profile: ExecutionProfile | None, dtypes: np.ndarray
                    ) -> dict[str, np.ndarray]:
    """The per-(engine, dtype, tf32) pair columns and per-device scalar columns, one block of
    ``len(workload)`` values per device."""
    n, n_dev = len(workload), len(specs)
    engines = workload["engine"].astype(str).to_numpy()
    tf32 = _tf32_rows(workload, profile)
    pairs = sorted(set(zip(engines, dtypes, tf32, strict=True)))
    pair_index = {p: i for i, p in enumerate(pairs)}
    pidx = np.fromiter((pair_index[p] for p in zip(engines, dtypes, tf32, strict=True)),
                       dtype=np.int64, count=n)
    data: dict[str, np.ndarray] = {}
    per_pair: dict[str, list] = {c: [] for c in PAIR_COLUMNS}
    scalars: dict[str, list] = {}
    for hw in specs:
        compute_f, bw_f, units = thread_factors(hw, config.threads)
        for c, values in _pair_columns(hw, pairs, compute_f).items():
            per_pair[c].append(values)
        for c, value in _device_scalars(hw, bw_f, units).items():
            scalars.setdefault(c, []).append(value)
        scalars.setdefault("dispatch_floor_s", []).append(
            float(hw.launch_overhead_s) if profile is None
            else profile.dispatch_floor_s(hw.kind, float(hw.launch_overhead_s)))
    for c, table in per_pair.items():
        arr = np.array(table, dtype=float if c == "peak_flops_per_s" else object)
        data[c] = arr.reshape(n_dev, len(pairs))[:, pidx].reshape(-1)
    for c, values in scalars.items():
        data[c] = np.repeat(np.array(values, dtype=object if c in ("device", "device_kind")
                                     else float), n)
    return data
