"""Kernel rows of a step: build, time and sum them — the one road of predict, compare, sweep
and advise.

``step_rows`` builds the workload table (one row per kernel) and raises ``NoWorkError`` when no
op does work; ``explain_rows`` featurizes the rows on one or more devices (device-major stack:
device d's copy of row r is row ``d * rows + r``) and runs the estimator's ``explain`` once;
``evaluate`` is the two side by side. ``cell_sums`` sums the timed rows per (cell, device):
``time_s``, ``compute_s``, ``memory_s``, ``overhead_s``, ``lower_s``, ``upper_s`` (seconds), the
kernel count and the time per bound label. Each cell's rows are contiguous, so every sum is one
numpy sum over a contiguous block: a one-device prediction and the same cell of a sweep agree
bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from roofcast.graph_import.types import Graph
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import as_estimator
from roofcast.predictor.features import featurize
from roofcast.predictor.runtimes import ExecutionProfile
from roofcast.predictor.workload import workload_table

#: bound labels of the estimators' ``bound`` column, in the order of ``cell_sums``' split.
BOUNDS: tuple[str, ...] = ("compute", "memory", "overhead")
#: joins a cell's distinct peak fallback notes in a sweep's ``peak_notes``.
NOTE_SEP = " | "
#: explain columns summed per cell (seconds).
SUMMED: tuple[str, ...] = ("time_s", "compute_s", "memory_s", "overhead_s", "lower_s", "upper_s")


class NoWorkError(PredictionError):
    """The model has no op that does work (every node is a free view op)."""

    def __init__(self, model: str):
        super().__init__(f"model {model!r} has no op that does work (every node is a free view "
                         "op); nothing to predict")


def step_rows(graph: Graph, config: RunConfig, profile: ExecutionProfile, **kwargs
              ) -> pd.DataFrame:
    """``workload_table(graph, config, profile, **kwargs)``; ``NoWorkError`` when empty."""
    rows = workload_table(graph, config, profile, **kwargs)
    if rows.empty:
        raise NoWorkError(graph.name)
    return rows


def explain_rows(rows: pd.DataFrame, hw, config: RunConfig, estimator: Any,
                 profile: ExecutionProfile | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(features, explain) of ``rows`` on ``hw`` (one HardwareSpec or a sequence, device-major);
    ``estimator``: a name or an estimator object."""
    feats = featurize(rows, hw, config, profile)
    return feats, as_estimator(estimator).explain(feats)


def evaluate(rows: pd.DataFrame, hw, config: RunConfig, estimator: Any,
             profile: ExecutionProfile | None = None) -> pd.DataFrame:
    """``explain_rows`` as one frame: the features, then the explain columns they lack."""
    feats, expl = explain_rows(rows, hw, config, estimator, profile)
    return pd.concat([feats, expl.drop(columns=[c for c in expl.columns if c in feats.columns])],
                     axis=1)


def cell_sums(timed: pd.DataFrame, cell_rows: Sequence[int], n_dev: int = 1
              ) -> dict[str, np.ndarray]:
    """Per (cell, device) sums of the timed rows, cell-major (entry ``cell * n_dev + d``).

    ``timed``: explain columns (``SUMMED`` and ``bound``) of ``n_dev`` device-major copies of
    the stacked rows; ``cell_rows``: the number of rows of each cell, in stack order. Returns
    the ``SUMMED`` columns, ``kernels`` and ``<bound>_bound_s`` for each of ``BOUNDS``.
    """
    n_rows = int(sum(cell_rows))
    edges = np.concatenate([[0], np.cumsum(cell_rows)]).astype(np.int64)
    bound = timed["bound"].to_numpy()
    columns = {c: timed[c].to_numpy(float).reshape(n_dev, n_rows) for c in SUMMED}
    time = columns["time_s"]
    columns.update({f"{b}_bound_s": np.where(bound == b, time.ravel(), 0.0).reshape(n_dev, n_rows)
                    for b in BOUNDS})
    out = {}
    for name, values in columns.items():
        out[name] = np.stack([values[:, a:b].sum(axis=1) for a, b in pairwise(edges)]
                             ).ravel()
    out["kernels"] = np.repeat(np.asarray(cell_rows, dtype=np.int64), n_dev)
    return out
