"""Learned-predictor features: computed from the table of ``predictor.features.featurize``.

The learned estimators never re-derive FLOPs, bytes or device figures: they take featurize's
output (workload columns + device columns) and add transforms that make efficiency learnable
and transferable across devices. Every feature is a number (NaN allowed: XGBoost routes missing
values, the linear candidate imputes them). ``FEATURES`` is the ordered list a saved model must
match (``persistence`` refuses a model trained with another list).

Physical bound (the lower bound every learned prediction respects; the models' reference time
adds the harness floor to it, see ``model``)::

    t_bound = max(flops / peak_flops_per_s, bytes_moved / bw_eff)

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.learned.features).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.dtypes import DTYPES
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned.roads import runtime_column

L2_OVER_DRAM = 2.5  # L2 bandwidth / DRAM bandwidth when the device publishes no L2 figure
TILE = 128.0  # output tile edge of the GEMM wave features
TINY = 1e-30
#: lower clip of ``compute_over_memory`` (log10): below it an op is memory bound, and the exact
#: ratio only tells the device's ridge point apart (module docstring).
BALANCE_FLOOR = -0.5

OP_FEATURES: tuple[str, ...] = (
    "lg_intensity", "elem_bytes", "lg_gemm_batch", "lg_gemm_m", "lg_gemm_n", "lg_gemm_k",
    "lg_gemm_min", "n_fused", "is_backward", "write_over_read", "lg_inner",
)
#: what the math and the runtime add: the math dtype's bits and block scaling (``roofcast.dtypes``;
#: the dtype's own peak is in ``lg_t_compute``), the runtime's per-kernel floor (eager dispatch
#: vs CUDA-graph launch), so fp32 eager kernels and tensor-core graph kernels share one model.
RUNTIME_FEATURES: tuple[str, ...] = ("math_bits", "block_scaled", "lg_dispatch_floor",
                                      "runtime_code", "lg_flops_per_out")
#: runtimes whose kernels the training data tells apart (``runtime_code`` = position; another
#: runtime is NaN: the trees' default branch). Same-shape GEMMs differ ~11 % between engines.
RUNTIME_CODES: tuple[str, ...] = ("pytorch-eager", "tensorrt-llm", "vllm", "sglang")
#: sizes and the compute time: out-of-distribution ranges only (module docstring).
SIZE_FEATURES: tuple[str, ...] = (
    "lg_flops", "lg_bytes_read", "lg_bytes_written", "lg_weight_bytes", "lg_t_compute",
)
DEVICE_FEATURES: tuple[str, ...] = (
    "lg_peak", "lg_bw", "lg_l2", "lg_units", "lg_clock", "lg_launch", "lg_smem",
)
RELATIVE_FEATURES: tuple[str, ...] = (
    "lg_t_memory", "lg_t_bound", "lg_bound_over_launch", "compute_over_memory",
    "lg_bytes_over_l2", "lg_waves", "wave_eff", "lg_elems_per_unit", "lg_rows_per_unit",
)
#: model inputs, in order. Raw device figures are *not* inputs: with a handful of training
#: devices a tree uses them to recognise the device, which does not transfer (leave-one-device-
#: out median error on the public GPU kernels: softmax 40% with them, 16% without; other
#: families equal or better). Device figures reach the models through the device-relative
#: features, and define the out-of-distribution device distance (``ood``).
FEATURES: tuple[str, ...] = OP_FEATURES + RUNTIME_FEATURES + RELATIVE_FEATURES
#: every column ``learned_features`` returns: the inputs, then sizes and device figures (OOD).
ALL_COLUMNS: tuple[str, ...] = FEATURES + SIZE_FEATURES + DEVICE_FEATURES
REQUIRED: tuple[str, ...] = (
    "family", "phase", "engine", "flops", "bytes_read", "bytes_written", "weight_bytes",
    "gemm_batch", "gemm_m", "gemm_n", "gemm_k", "inner_elems", "fused_nodes", "peak_flops_per_s",
    "mem_bw_Bps",
    "l2_bytes", "l2_bw_Bps", "units", "clock_Hz", "launch_overhead_s", "smem_per_unit_bytes",
    "elem_bytes", "device", "device_kind", "dtype", "dispatch_floor_s", "runtime", "peak_dtype",
)


def lg(x: np.ndarray) -> np.ndarray:
    """log10 of positive values; NaN stays NaN, non-positive values become log10(TINY)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(x), np.nan, np.log10(np.maximum(x, TINY)))


def check_featurized(X: pd.DataFrame) -> None:
    """PredictionError when X is not a featurize() table."""
    if not isinstance(X, pd.DataFrame):
        raise PredictionError(
            "learned estimators take the DataFrame of predictor.features.featurize"
        )
    missing = [c for c in REQUIRED if c not in X.columns]
    if missing:
        raise PredictionError(
            f"feature table lacks columns {missing}; build it with predictor.features.featurize")


def roofline_terms(X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute_s, memory_s, t_bound) with the L2-aware bandwidth of the module docstring."""
    flops = X["flops"].to_numpy(float)
    peak = X["peak_flops_per_s"].to_numpy(float)
    moved = X["bytes_read"].to_numpy(float) + X["bytes_written"].to_numpy(float)
    bw = X["mem_bw_Bps"].to_numpy(float)
    l2bw = X["l2_bw_Bps"].to_numpy(float)
    l2bw = np.where(np.isnan(l2bw), L2_OVER_DRAM * bw, np.maximum(l2bw, bw))
    bw_eff = np.where(moved <= X["l2_bytes"].to_numpy(float), l2bw, bw)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(flops > 0, flops / peak, 0.0)
    compute = np.where(np.isfinite(compute), compute, 0.0)
    memory = moved / bw_eff
    return compute, memory, np.maximum(compute, memory)


def learned_features(X: pd.DataFrame) -> pd.DataFrame:
    """``ALL_COLUMNS`` (the ``FEATURES`` inputs, then the device figures) for every row of a
    featurized table."""
    check_featurized(X)
    units = np.maximum(X["units"].to_numpy(float), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = {**_work_features(X), **_runtime_features(X), **_device_features(X, units),
             **_time_features(X, units)}
    out = pd.DataFrame(f, index=X.index)
    return out[list(ALL_COLUMNS)]


def _work_features(X: pd.DataFrame) -> dict[str, np.ndarray]:
    """Features of the op's work: FLOPs, bytes, GEMM dims, fusion, phase."""
    flops = X["flops"].to_numpy(float)
    br = X["bytes_read"].to_numpy(float)
    bw_ = X["bytes_written"].to_numpy(float)
    moved = br + bw_
    b, m, n, k = (X[c].to_numpy(float) for c in ("gemm_batch", "gemm_m", "gemm_n", "gemm_k"))
    return {
        "lg_flops": lg(flops + 1.0),
        "lg_bytes_read": lg(br + 1.0),
        "lg_bytes_written": lg(bw_ + 1.0),
        "lg_weight_bytes": lg(X["weight_bytes"].to_numpy(float) + 1.0),
        "lg_intensity": lg(np.where(moved > 0, flops / np.where(moved > 0, moved, 1), 0) + 1e-3),
        "elem_bytes": X["elem_bytes"].to_numpy(float),
        "lg_gemm_batch": lg(b),
        "lg_gemm_m": lg(m),
        "lg_gemm_n": lg(n),
        "lg_gemm_k": lg(k),
        "lg_gemm_min": lg(np.fmin(np.fmin(m, n), k)),
        "n_fused": X["fused_nodes"].astype(str).str.count(r"\+").to_numpy(float) + 1.0,
        "is_backward": (X["phase"].astype(str).to_numpy() == "backward").astype(float),
        "write_over_read": np.where(br > 0, bw_ / np.where(br > 0, br, 1), np.nan),
        "lg_inner": lg(X["inner_elems"].to_numpy(float)),
    }


def _runtime_features(X: pd.DataFrame) -> dict[str, np.ndarray]:
    """Bits of the dtype the math runs in (``peak_dtype``: fp8 for nvfp4 on a device without fp4
    units), block scaling (NaN for a dtype the table lacks), the runtime's floor and
    code, FLOPs per output element (GEMM: 2k; attention: ~4 x attended keys)."""
    dtypes = X["dtype"].astype(str)
    unit = X["peak_dtype"].astype(str).where(X["peak_dtype"].astype(str).isin(list(DTYPES)),
                                             dtypes)
    return {
        "math_bits": unit.map(lambda d: DTYPES[d].bits if d in DTYPES else np.nan)
        .to_numpy(float),
        "block_scaled": dtypes.map(lambda d: float(DTYPES[d].block > 1) if d in DTYPES
                                   else np.nan).to_numpy(float),
        "lg_dispatch_floor": lg(X["dispatch_floor_s"].to_numpy(float)),
        "runtime_code": pd.Series(runtime_column(X, "runtime")).map(
            {r: float(i) for i, r in enumerate(RUNTIME_CODES)}).to_numpy(float),
        "lg_flops_per_out": lg(X["flops"].to_numpy(float) * X["elem_bytes"].to_numpy(float)
                               / np.maximum(X["bytes_written"].to_numpy(float), 1.0) + 1.0),
    }


def _device_features(X: pd.DataFrame, units: np.ndarray) -> dict[str, np.ndarray]:
    """Features of the device: peak, bandwidth, caches, units, clock, launch overhead."""
    peak = X["peak_flops_per_s"].to_numpy(float)
    return {
        "lg_peak": np.where(np.isfinite(peak), lg(peak), np.nan),
        "lg_bw": lg(X["mem_bw_Bps"].to_numpy(float)),
        "lg_l2": lg(X["l2_bytes"].to_numpy(float)),
        "lg_units": lg(units),
        "lg_clock": lg(X["clock_Hz"].to_numpy(float)),
        "lg_launch": lg(X["launch_overhead_s"].to_numpy(float)),
        "lg_smem": lg(X["smem_per_unit_bytes"].to_numpy(float)),
    }


def _time_features(X: pd.DataFrame, units: np.ndarray) -> dict[str, np.ndarray]:
    """Features of the op on the device: roofline terms, waves of tiles, work per unit."""
    br = X["bytes_read"].to_numpy(float)
    bw_ = X["bytes_written"].to_numpy(float)
    moved = br + bw_
    elem = X["elem_bytes"].to_numpy(float)
    b, m, n = (X[c].to_numpy(float) for c in ("gemm_batch", "gemm_m", "gemm_n"))
    launch = X["launch_overhead_s"].to_numpy(float)
    compute, memory, bound = roofline_terms(X)
    tiles = b * np.ceil(m / TILE) * np.ceil(n / TILE)
    waves = tiles / units
    wave_eff = tiles / (np.ceil(waves) * units)
    elems_out = bw_ / elem
    rows = (br - X["weight_bytes"].to_numpy(float)) / elem / X["inner_elems"].to_numpy(float)
    return {
        "lg_t_compute": np.where(compute > 0, lg(compute), np.nan),
        "lg_t_memory": lg(memory),
        "lg_t_bound": lg(bound),
        "lg_bound_over_launch": lg(bound / np.maximum(launch, 1e-9)),
        "compute_over_memory": np.where(
            compute > 0, np.maximum(lg(compute) - lg(memory), BALANCE_FLOOR), np.nan
        ),
        "lg_bytes_over_l2": lg(moved / np.maximum(X["l2_bytes"].to_numpy(float), 1.0)),
        "lg_waves": np.where(tiles > 0, lg(waves), np.nan),
        "wave_eff": np.where(tiles > 0, wave_eff, np.nan),
        "lg_elems_per_unit": lg(elems_out / units + 1.0),
        "lg_rows_per_unit": np.where(rows > 0, lg(rows / units), np.nan),
    }


def model_key(kind: str, family: str) -> str:
    """Key of a per-family model: ``'<device kind>/<family>'`` (e.g. ``gpu/matmul``)."""
    return f"{kind}/{family}"


def model_keys(X: pd.DataFrame) -> np.ndarray:
    """``model_key`` of every row."""
    return (X["device_kind"].astype(str) + "/" + X["family"].astype(str)).to_numpy()
