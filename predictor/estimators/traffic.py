"""Traffic estimator: DRAM/L2 traffic of a tiled GEMM and wave quantisation (DeLTA-style).

After Lym et al. 2019. For rows with GEMM dims on the matrix engine every feasible kernel
configuration (tile tm x tn, split-K s; a GEMV candidate when ``min(M, N) <= GEMV_MAX_DIM``) is
costed and the fastest taken: tiles ``T = batch·⌈M/tm⌉·⌈N/tn⌉·s``, waves ``W = ⌈T/units⌉``,
compute ``W·2·tm·tn·⌈K/s⌉ / (P/units) / e_c``; L2 traffic = each tile's A and B panels; DRAM
traffic = compulsory bytes plus panel re-reads not covered by the L2 share, plus split-K partial
sums. Time ``max(compute, DRAM/(BW·e_m), L2 bytes/L2 bw) + split-K reduction``, floored by the
launch overhead. Tiles must fit shared memory (GPU) or a core's share of the LLC (CPU); bytes
resident in L2 (``warm_l2``) are served at L2 bandwidth. Rows without GEMM dims use the
``roofline+eff`` terms; ``e_c``/``e_m`` from ``predictor/data/efficiency_curves.toml``.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.estimators.traffic).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.predictor.efficiency import EfficiencyCurves, default_curves
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators.base import (
    AnalyticalEstimator,
    base_terms,
    check_features,
    frame,
    with_overhead,
)
from roofcast.predictor.estimators.roofline import efficiencies

# Output tiles of the cuBLAS/CUTLASS kernel families (e.g. volta_sgemm_32x128, _64x64, _128x128).
TILES: tuple[tuple[int, int], ...] = (
    (256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (128, 32), (32, 128), (64, 64),
    (64, 32), (32, 64), (32, 32),
)
SPLIT_K: tuple[int, ...] = (1, 2, 4, 8, 16)
KSLICE_BYTES = 64  # bytes of K per operand row staged per pipeline step (16 fp32 / 32 fp16)
STAGES = 2  # double buffering
DEFAULT_SMEM_BYTES = 48 * 1024
CPU_KC = 256
PARTIAL_SUM_BYTES = 4
# L2 bandwidth / DRAM bandwidth when a device publishes no L2 figure: microbenchmarks measure
# ~2.2-3x (V100 ~2.2 TB/s vs 0.9 TB/s, Jia et al. 2018; A100 ~4-5 TB/s vs 1.56 TB/s).
DEFAULT_L2_BW_RATIO = 2.5
# cuBLAS switches to GEMV / skinny-GEMM kernels when one output dim is this small
GEMV_MAX_DIM = 8
TIE_BREAK = 0.01  # weight of traffic time in the choice among candidates of equal time
WARM_L2_MODES: tuple[str, ...] = ("none", "activations", "all")
GEMM_COLUMNS = ("gemm_batch", "gemm_m", "gemm_n", "gemm_k")
_CHUNK_ROWS = 20_000


def _cdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.ceil(a / b)


def col(a: np.ndarray) -> np.ndarray:
    """A row vector as a (rows, 1) column for broadcasting against candidates."""
    return a[:, None]


def _feasible(kind: np.ndarray, smem: np.ndarray, l2: np.ndarray, units: np.ndarray,
              elem: np.ndarray, tm: np.ndarray, tn: np.ndarray) -> np.ndarray:
    """(rows, candidates) mask of tiles that fit the unit's shared memory / cache share."""
    smem = np.where(np.isnan(smem), DEFAULT_SMEM_BYTES, smem)[:, None]
    gpu_ok = (tm + tn) * KSLICE_BYTES * STAGES <= smem
    cpu_share = (l2 / units)[:, None]
    cpu_ok = (tm * tn + (tm + tn) * CPU_KC) * elem[:, None] <= cpu_share
    ok = np.where((kind == "cpu")[:, None], cpu_ok, gpu_ok)
    smallest = (tm * tn == (tm * tn).min())
    return ok | smallest


def resident_bytes(X: pd.DataFrame, mode: str) -> np.ndarray:
    """Bytes of each row served from a warm L2 (module docstring)."""
    if mode not in WARM_L2_MODES:
        raise PredictionError(f"warm_l2 mode {mode!r} unknown; choose one of {WARM_L2_MODES}")
    moved = X["bytes_read"].to_numpy(float) + X["bytes_written"].to_numpy(float)
    l2 = X["l2_bytes"].to_numpy(float)
    if mode == "none":
        return np.zeros(len(X))
    if mode == "all":
        return np.where(moved <= l2, moved, 0.0)
    acts = np.maximum(moved - X["weight_bytes"].to_numpy(float), 0.0)
    return np.where(acts <= l2, acts, 0.0)


def l2_bandwidth(X: pd.DataFrame) -> np.ndarray:
    """Published L2 bandwidth, else ``DEFAULT_L2_BW_RATIO`` x DRAM bandwidth."""
    bw = X["mem_bw_Bps"].to_numpy(float)
    l2bw = X["l2_bw_Bps"].to_numpy(float)
    return np.where(np.isnan(l2bw), DEFAULT_L2_BW_RATIO * bw, l2bw)


def gemm_traffic(X: pd.DataFrame, e_c: np.ndarray, e_m_curve, resident: np.ndarray,
                 tiles: tuple[tuple[int, int], ...] = TILES,
                 split_k: tuple[int, ...] = SPLIT_K) -> dict[str, np.ndarray]:
    """Best-candidate terms for GEMM rows of X (all rows of X must have GEMM dims)."""
    cols = _gemm_columns(X)
    tiled = _tiled_terms(cols, e_c, e_m_curve, resident, tiles, split_k)
    gemv = _gemv_terms(cols, e_c, e_m_curve, resident)
    c = _candidates(tiled, gemv)
    # near-ties (compute-bound candidates) go to the one moving the least data
    best = np.argmin(c["t"] + TIE_BREAK * (c["dram_s"] + c["l2_s"]), axis=1)

    def pick(a: np.ndarray) -> np.ndarray:
        return np.take_along_axis(np.broadcast_to(a, c["t"].shape), best[:, None], 1)[:, 0]

    return {
        "compute_s": pick(c["compute"]), "dram_s": pick(c["dram_s"] + c["partial_s"]),
        "l2_s": pick(c["l2_s"]), "dram_bytes": pick(c["dram"]),
        "l2_traffic_bytes": pick(c["l2_traffic"]), "tile_m": pick(c["tm"]),
        "tile_n": pick(c["tn"]), "split_k": pick(c["s"]), "waves": pick(c["waves"]),
        "wave_efficiency": pick(c["wave_eff"]), "eff_memory": pick(c["e_m"]),
    }


def _gemm_columns(X: pd.DataFrame) -> dict[str, np.ndarray]:
    """The columns of X the GEMM candidates read, as arrays."""
    bt, M, N, K = (X[c].to_numpy(float) for c in GEMM_COLUMNS)
    return {
        "bt": bt, "M": M, "N": N, "K": K,
        "units": X["units"].to_numpy(float),
        "peak": X["peak_flops_per_s"].to_numpy(float),
        "bw": X["mem_bw_Bps"].to_numpy(float),
        "l2": X["l2_bytes"].to_numpy(float),
        "l2bw": l2_bandwidth(X),
        "elem": X["elem_bytes"].to_numpy(float),
        "compulsory": X["bytes_read"].to_numpy(float) + X["bytes_written"].to_numpy(float),
        "kind": X["device_kind"].astype(str).to_numpy(),
        "smem": X["smem_per_unit_bytes"].to_numpy(float),
    }


def _tiled_terms(x: dict[str, np.ndarray], e_c: np.ndarray, e_m_curve, resident: np.ndarray,
                 tiles: tuple[tuple[int, int], ...],
                 split_k: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Terms of every (tile, split-K) candidate: one column per candidate, one row per GEMM."""
    bt, M, N, K, units, l2 = x["bt"], x["M"], x["N"], x["K"], x["units"], x["l2"]
    elem, bw = x["elem"], x["bw"]
    cand = np.array([(tm, tn, s) for tm, tn in tiles for s in split_k], dtype=float)
    tm, tn, s = (cand[:, i][None, :] for i in range(3))
    gm, gn, ks = _cdiv(col(M), tm), _cdiv(col(N), tn), _cdiv(col(K), s)
    n_tiles = col(bt) * gm * gn * s
    waves = _cdiv(n_tiles, col(units))
    tile_flops = 2.0 * tm * tn * ks
    compute = waves * tile_flops / col(x["peak"] / units) / col(e_c)
    useful = 2.0 * col(bt * M * N * K)
    wave_eff = useful / (waves * col(units) * tile_flops)

    a_per, b_per, c_per = col(M * K * elem), col(K * N * elem), col(M * N * elem)
    per_gemm_tiles = gm * gn * s
    conc = np.clip(col(units) / per_gemm_tiles, 1.0, col(bt))
    share = col(l2) / conc / 2.0
    fit_a = np.minimum(1.0, share / a_per)
    fit_b = np.minimum(1.0, share / b_per)
    ra = 1.0 + (np.maximum(1.0, _cdiv(gn, col(units))) - 1.0) * (1.0 - fit_a)
    rb_raw = np.minimum(gm, np.maximum(1.0, _cdiv(per_gemm_tiles, col(units))))
    rb = 1.0 + (rb_raw - 1.0) * (1.0 - fit_b)
    partial = (s - 1.0) * 2.0 * col(bt * M * N) * PARTIAL_SUM_BYTES
    dram = (col(x["compulsory"] - resident)
            + col(bt) * (a_per * (ra - 1.0) + b_per * (rb - 1.0)) + partial)
    l2_traffic = col(bt) * (a_per * gn + b_per * gm + c_per) + partial
    e_m = e_m_curve(dram)
    dram_s = dram / (col(bw) * e_m)
    l2_s = l2_traffic / col(x["l2bw"])
    # split-K partial sums are reduced after the main loop (a second pass), so that traffic
    # is serialised rather than overlapped with the tiles' compute
    partial_s = partial / (col(bw) * e_m)
    t = np.maximum(np.maximum(compute, dram_s), l2_s) + partial_s
    t = np.where(_feasible(x["kind"], x["smem"], l2, units, elem, tm, tn), t, np.inf)
    return {"t": t, "compute": compute, "dram_s": dram_s, "partial_s": partial_s, "l2_s": l2_s,
            "dram": dram, "l2_traffic": l2_traffic, "tm": tm, "tn": tn, "s": s, "waves": waves,
            "wave_eff": wave_eff, "e_m": e_m}


def _gemv_terms(x: dict[str, np.ndarray], e_c: np.ndarray, e_m_curve,
                resident: np.ndarray) -> dict[str, np.ndarray]:
    """Terms of the GEMV-class kernel for skinny problems: streams the operands once, no
    output tiles (one column; infinite time where a dim is over GEMV_MAX_DIM)."""
    M, N, compulsory = x["M"], x["N"], x["compulsory"]
    useful = 2.0 * col(x["bt"] * M * N * x["K"])
    g_dram = col(compulsory - resident)
    g_e_m = e_m_curve(g_dram)
    g_compute = useful / col(x["peak"]) / col(e_c)
    g_dram_s = g_dram / (col(x["bw"]) * g_e_m)
    g_l2_s = col(compulsory) / col(x["l2bw"])
    g_t = np.where(col(np.minimum(M, N) <= GEMV_MAX_DIM),
                   np.maximum(np.maximum(g_compute, g_dram_s), g_l2_s), np.inf)
    zero, one = np.zeros_like(g_t), np.ones_like(g_t)
    return {"t": g_t, "compute": g_compute, "dram_s": g_dram_s, "partial_s": zero,
            "l2_s": g_l2_s, "dram": g_dram, "l2_traffic": col(compulsory), "tm": zero,
            "tn": zero, "s": zero, "waves": one, "wave_eff": one, "e_m": g_e_m}


def _candidates(tiled: dict[str, np.ndarray],
                gemv: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each term with the GEMV column appended after the tiled candidates' columns."""
    shape = tiled["t"].shape
    return {k: np.concatenate([np.broadcast_to(tiled[k], shape), gemv[k]], axis=1)
            for k in tiled}


class Traffic(AnalyticalEstimator):
    """Tiled-GEMM DRAM/L2 traffic + wave quantisation + efficiency curves + launch floor."""

    name = "traffic"

    def __init__(self, curves_path: str | None = None,
                 tiles: tuple[tuple[int, int], ...] | None = None,
                 split_k: tuple[int, ...] | None = None, warm_l2: str = "activations",
                 overhead: str = "floor") -> None:
        self.curves_path = curves_path
        self.tiles = tiles
        self.split_k = split_k
        self.warm_l2 = warm_l2
        self.overhead = overhead

    def _curves(self) -> EfficiencyCurves:
        return EfficiencyCurves.load(self.curves_path) if self.curves_path else default_curves()

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        check_features(X, ("device", "device_kind", "peak_dtype", "units", "l2_bytes", "l2_bw_Bps",
                           "elem_bytes", "smem_per_unit_bytes", *GEMM_COLUMNS))
        curves = self._curves()
        c0, m0, lo = base_terms(X)
        ec, em = efficiencies(X, curves)
        n = len(X)
        resident = resident_bytes(X, self.warm_l2)
        moved = X["bytes_read"].to_numpy(float) + X["bytes_written"].to_numpy(float)
        l2bw = l2_bandwidth(X)
        compute = c0 / ec
        memory = (moved - resident) / (X["mem_bw_Bps"].to_numpy(float) * em) + resident / l2bw
        extra = {k: np.full(n, np.nan) for k in (
            "l2_s", "l2_traffic_bytes", "tile_m", "tile_n", "split_k", "waves", "wave_efficiency")}
        extra["dram_bytes"] = moved - resident
        extra["eff_compute"] = ec
        extra["eff_memory"] = em
        dims = X[list(GEMM_COLUMNS)].to_numpy(float)
        is_gemm = (X["engine"].astype(str).to_numpy() == "matrix") & np.all(dims > 0, axis=1)
        idx = np.flatnonzero(is_gemm)
        device = X["device"].astype(str).to_numpy()
        kind = X["device_kind"].astype(str).to_numpy()
        dtype = X["peak_dtype"].astype(str).to_numpy()
        for start in range(0, len(idx), _CHUNK_ROWS):
            rows = idx[start:start + _CHUNK_ROWS]
            sub = X.iloc[rows]
            dv, k_r, d_r = device[rows][:, None], kind[rows][:, None], dtype[rows][:, None]

            def e_m_curve(nbytes: np.ndarray, dv=dv, k_r=k_r, d_r=d_r) -> np.ndarray:
                return curves.fraction(dv, k_r, "memory", d_r, nbytes)

            res = gemm_traffic(sub, ec[rows], e_m_curve, resident[rows], self.tiles or TILES,
                               self.split_k or SPLIT_K)
            compute[rows] = res["compute_s"]
            memory[rows] = np.maximum(res["dram_s"], res["l2_s"])
            for key in ("l2_s", "l2_traffic_bytes", "tile_m", "tile_n", "split_k", "waves",
                        "wave_efficiency", "dram_bytes", "eff_memory"):
                extra[key][rows] = res[key]
        t = with_overhead(np.maximum(compute, memory), lo, self.overhead)
        return frame(X, self.name, t, compute, memory, lo, np.maximum(c0, m0),
                     compute + memory + lo, **extra)
