"""Synthetic training sets for the learned-predictor tests.

Measured time = roofline bound x 10^(inefficiency) x noise, with a known inefficiency
``0.2 + 0.6 · max(0, 9 - log10 FLOPs) / 4`` for GEMMs (small GEMMs far from peak) and
``0.3 + 0.2 · (more than 1 MB moved)`` for elementwise ops, and log-normal noise of ``NOISE``
decades. The truth depends on the op and the device only through the roofline bound, so it
transfers across devices (what leave-one-device-out can learn).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.features import featurize
from roofcast.predictor.learned.data import TrainingSet
from roofcast.predictor.learned.features import roofline_terms

DEVICES = ("v100-pcie-32gb", "t4", "p100-pcie-16gb", "a100-40gb-pcie")
NOISE = 0.03


def workload(rng: np.random.Generator, n_gemm: int, n_vec: int) -> pd.DataFrame:
    rows = []
    for i in range(n_gemm):
        m, n, k = (int(2 ** rng.uniform(4, 12)) for _ in range(3))
        rows.append({"node": f"g{i}", "op_type": "MatMul", "family": "matmul", "phase": "forward",
                     "engine": "matrix", "dtype": "fp32", "flops": 2.0 * m * n * k,
                     "bytes_read": 4.0 * (m * k + k * n), "bytes_written": 4.0 * m * n,
                     "weight_bytes": 4.0 * k * n, "gemm_batch": 1.0, "gemm_m": float(m),
                     "gemm_n": float(n), "gemm_k": float(k), "fused_nodes": f"g{i}",
                     "inner_elems": np.nan})
    for i in range(n_vec):
        e = int(2 ** rng.uniform(10, 24))
        rows.append({"node": f"v{i}", "op_type": "Add", "family": "elementwise",
                     "phase": "forward", "engine": "vector", "dtype": "fp32", "flops": float(e),
                     "bytes_read": 8.0 * e, "bytes_written": 4.0 * e, "weight_bytes": 0.0,
                     "gemm_batch": np.nan, "gemm_m": np.nan, "gemm_n": np.nan, "gemm_k": np.nan,
                     "fused_nodes": f"v{i}", "inner_elems": np.nan})
    return pd.DataFrame(rows)


def true_inefficiency(X: pd.DataFrame) -> np.ndarray:
    """log10(measured / bound) without noise (module docstring)."""
    lf = np.log10(X["flops"].to_numpy(float))
    gemm = X["family"].to_numpy() == "matmul"
    big = ((X["bytes_read"] + X["bytes_written"]).to_numpy(float) > 1e6).astype(float)
    return np.where(gemm, 0.2 + 0.6 * np.maximum(0.0, 9.0 - lf) / 4.0, 0.3 + 0.2 * big)


def synthetic_set(seed: int = 0, n_gemm: int = 120, n_vec: int = 80,
                  devices: tuple[str, ...] = DEVICES) -> TrainingSet:
    rng = np.random.default_rng(seed)
    parts = []
    for dev in devices:
        w = workload(rng, n_gemm, n_vec)
        w["_group"] = f"device:{dev}"
        w["_run"] = ""
        w["_e2e_s"] = np.nan
        parts.append(featurize(w, get_device(dev), RunConfig()))
    X = pd.concat(parts, ignore_index=True)
    _, _, bound = roofline_terms(X)
    y = bound * 10.0 ** (true_inefficiency(X) + rng.normal(0.0, NOISE, len(X)))
    return TrainingSet(X, y, "synthetic", f"synthetic-{seed}")


def measurement_csv_file(path: Path) -> Path:
    """Tidy measurement rows (``training_data.schema`` columns) of a small synthetic set of
    GEMMs and adds on three GPUs, written as a CSV at ``path`` (returned)."""
    ts = synthetic_set(n_gemm=40, n_vec=40, devices=("v100-pcie-32gb", "t4", "p100-pcie-16gb"))
    X = ts.X
    pd.DataFrame({
        "op_type": X["op_type"], "family": X["family"], "node": X["node"] + "_" + X["device"],
        "dtype": X["dtype"], "flops": X["flops"], "bytes_read": X["bytes_read"],
        "bytes_written": X["bytes_written"], "weight_bytes": X["weight_bytes"],
        "gemm_batch": X["gemm_batch"], "gemm_m": X["gemm_m"], "gemm_n": X["gemm_n"],
        "gemm_k": X["gemm_k"], "device_id": X["device"], "latency_s": ts.y_s,
        "source": "test:synthetic",
    }).to_csv(path, index=False)
    return path
