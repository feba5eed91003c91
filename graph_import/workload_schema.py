"""Column contract of the workload table: one row per kernel execution.

Produced by ``predictor.workload.workload_table(graph, config)`` (graph level) and by
``training_data.public_kernels`` (public kernel measurements); consumed by
``predictor.features.featurize`` and the estimators. It lives below both packages so the data
side never imports the predictor. Units are SI: FLOPs (1 multiply-add = 2
FLOPs), bytes, seconds.

Columns (``WORKLOAD_COLUMNS``, name -> meaning):
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roofcast.graph_import.errors import WorkloadSchemaError

if TYPE_CHECKING:  # pandas only where a table is checked or made: the cost registry
    import pandas as pd  # reads FAMILIES from here, and `roofcast inspect` needs no pandas

FAMILIES: tuple[str, ...] = (
    "matmul", "conv", "elementwise", "normalization", "softmax", "reduction", "pooling",
    "data_movement", "recurrent", "attention", "quantization", "moe", "other",
)
PHASES: tuple[str, ...] = ("forward", "backward", "update")
ENGINES: tuple[str, ...] = ("matrix", "vector", "data", "free")

WORKLOAD_COLUMNS: dict[str, str] = {
    "node": "str: node name (or a kernel id for public data)",
    "op_type": "str: ONNX op type (or the kernel's name, e.g. 'MatMul', 'Conv')",
    "family": f"str: one of {'|'.join(FAMILIES)}",
    "phase": f"str: one of {'|'.join(PHASES)}",
    "engine": f"str: one of {'|'.join(ENGINES)} (graph_import.types.Engine values)",
    "dtype": "str: compute precision of the row (predictor.config.PRECISIONS), e.g. 'fp16'",
    "flops": "float: FLOPs of the kernel (1 MAC = 2 FLOPs)",
    "bytes_read": "float: bytes read by an unfused kernel, after precision rescale (incl. weights)",
    "bytes_written": "float: bytes written, after precision rescale",
    "weight_bytes": "float: part of bytes_read that is weights, after precision rescale",
    "gemm_batch": "float: batch of independent GEMMs (conv: groups); NaN when not GEMM-like",
    "gemm_m": "float: GEMM M (conv implicit GEMM: N*Ho*Wo); NaN when not GEMM-like",
    "gemm_n": "float: GEMM N (conv: C_out/groups); NaN when not GEMM-like",
    "gemm_k": "float: GEMM K (conv: C_in/groups*R*S); NaN when not GEMM-like",
    "fused_nodes": "str: '+'-joined node names of a fused group, else the node name",
    "inner_elems": "float: elements per row of a row-wise op (softmax/normalization: the "
                   "normalised axes; reductions: elements folded per output) or the window R*S "
                   "of a conv (graph_import.costs.inner_dims); NaN otherwise",
}
WORKLOAD_COLUMN_NAMES: tuple[str, ...] = tuple(WORKLOAD_COLUMNS)
_NUMERIC = ("flops", "bytes_read", "bytes_written", "weight_bytes",
            "gemm_batch", "gemm_m", "gemm_n", "gemm_k", "inner_elems")
_NAN_ALLOWED = ("gemm_batch", "gemm_m", "gemm_n", "gemm_k", "inner_elems")

__doc__ += "\n".join(f"    {k}: {v}" for k, v in WORKLOAD_COLUMNS.items()) + "\n"


def check_workload(df: pd.DataFrame) -> None:
    """Raise ``WorkloadSchemaError`` if ``df`` lacks a contract column or has bad values.

    Checks: every column present; numeric columns non-negative (NaN allowed only in gemm_* and
    inner_elems); family/phase/engine values from their vocabularies.
    """
    import pandas as pd

    missing = [c for c in WORKLOAD_COLUMN_NAMES if c not in df.columns]
    if missing:
        raise WorkloadSchemaError(f"workload table lacks columns {missing}; see "
                                  "graph_import/workload_schema.py")
    for col in _NUMERIC:
        vals = pd.to_numeric(df[col], errors="coerce")
        if col not in _NAN_ALLOWED and vals.isna().any():
            raise WorkloadSchemaError(f"workload column {col!r} has missing/non-numeric values")
        if (vals < 0).any():
            raise WorkloadSchemaError(f"workload column {col!r} has negative values")
    for col, vocab in (("family", FAMILIES), ("phase", PHASES), ("engine", ENGINES)):
        bad = sorted(set(df[col].astype(str)) - set(vocab))
        if bad:
            raise WorkloadSchemaError(f"workload column {col!r} has unknown values {bad}; "
                                      f"allowed: {vocab}")


def empty_workload() -> pd.DataFrame:
    """An empty table with the contract columns (for graphs with no costed ops)."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype=float if c in _NUMERIC else object)
                         for c in WORKLOAD_COLUMN_NAMES})
