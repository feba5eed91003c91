"""The predictor's workload rows: the contract columns plus the ones graph timing needs.

``COLUMNS`` = ``graph_import.workload_schema.WORKLOAD_COLUMN_NAMES`` + ``EXTRA_COLUMNS``:
``key`` unique row id ``"<phase>:<kernel>:<node>"``; ``kernel`` (``forward``, ``grad_input``,
``grad_weight``, ``grad``, ``sgd_momentum``, ``adam``); ``domain``; ``grad_of`` ('+'-joined
graph nodes whose backward must finish before an update row may run; '' otherwise).
Shared by the forward rows (``predictor.workload``), fused groups (``predictor.fusion``) and
training rows (``predictor.training``).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from roofcast.graph_import.workload_schema import WORKLOAD_COLUMN_NAMES

#: Columns the predictor adds beyond the contract, in order.
EXTRA_COLUMNS: tuple[str, ...] = ("key", "kernel", "domain", "grad_of")
COLUMNS: tuple[str, ...] = WORKLOAD_COLUMN_NAMES + EXTRA_COLUMNS
GEMM_COLUMNS: tuple[str, ...] = ("gemm_batch", "gemm_m", "gemm_n", "gemm_k")


def frame(cols: Mapping[str, list]) -> pd.DataFrame:
    """A workload DataFrame with ``COLUMNS`` in order and float numeric columns."""
    df = pd.DataFrame({c: cols[c] for c in COLUMNS})
    for c in ("flops", "bytes_read", "bytes_written", "weight_bytes", *GEMM_COLUMNS,
              "inner_elems"):
        df[c] = df[c].astype(float)
    return df
