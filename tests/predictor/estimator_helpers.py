"""Workload rows and feature tables for the per-op estimator tests (values as plain arithmetic)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.features import featurize

NAN = float("nan")


def row(
    node: str,
    family: str,
    engine: str,
    flops: float,
    bytes_read: float,
    bytes_written: float,
    dtype: str = "fp32",
    gemm: tuple[float, float, float, float] | None = None,
    op_type: str = "Op",
    weight_bytes: float = 0.0,
) -> dict:
    b, m, n, k = gemm if gemm is not None else (NAN, NAN, NAN, NAN)
    return {
        "node": node,
        "op_type": op_type,
        "family": family,
        "phase": "forward",
        "engine": engine,
        "dtype": dtype,
        "flops": float(flops),
        "bytes_read": float(bytes_read),
        "bytes_written": float(bytes_written),
        "weight_bytes": float(weight_bytes),
        "gemm_batch": b,
        "gemm_m": m,
        "gemm_n": n,
        "gemm_k": k,
        "fused_nodes": node,
        "inner_elems": NAN,
    }


def gemm_row(M: int, N: int, K: int, batch: int = 1, dtype: str = "fp32", elem: int = 4) -> dict:
    """A (batched) GEMM: 2·batch·M·N·K FLOPs, A and B read, C written (``elem`` bytes each)."""
    return row(
        f"gemm{batch}x{M}x{N}x{K}",
        "matmul",
        "matrix",
        2 * batch * M * N * K,
        batch * (M * K + K * N) * elem,
        batch * M * N * elem,
        dtype,
        (batch, M, N, K),
        "MatMul",
    )


def features(rows: list[dict], device: str = "v100-pcie-32gb", config: RunConfig | None = None,
             hw=None) -> pd.DataFrame:
    return featurize(pd.DataFrame(rows), hw if hw is not None else get_device(device),
                     config or RunConfig())


def flat_curves(
    tmp_path: Path, matrix: float = 0.5, vector: float = 0.6, memory: float = 0.8
) -> str:
    """A curves file with constant fractions, so expected times are plain arithmetic."""
    text = ""
    for engine, frac, x in (("matrix", matrix, "log10_flops"), ("vector", vector, "log10_flops"),
                            ("memory", memory, "log10_bytes")):
        text += (f'[[curve]]\nkind = "*"\nengine = "{engine}"\ndtype = "*"\nx = "{x}"\n'
                 f'points = [[0.0, {frac}]]\nbasis = "test"\n\n')
    path = tmp_path / "curves.toml"
    path.write_text(text)
    return str(path)


def approx(a, b, rel: float = 1e-9) -> bool:
    return bool(np.allclose(np.asarray(a, float), np.asarray(b, float), rtol=rel, atol=0))
