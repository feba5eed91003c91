"""The ``engine-tables`` road: an engine's own measured kernel time where it has one.

``explain(X)`` is the ``auto`` kernel model's (``AutoEstimator``) with every row the engine
tables time (``store.EngineTables.times``: same device, engine and engine version as the row's
runtime profile) replaced by the table's seconds, interval ``t x (1 -+ TABLE_BAND)``, labelled
``engine table``. A device without tables anchored on one that has them (``anchor``: a what-if
device's root, or a sibling of the same architecture) takes ``t_table(anchor) x t_model(device)
/ t_model(anchor)``, the model's interval relative to its time, labelled ``engine table x model
ratio (anchor)``: every what-if key still acts through the ratio. Rows no table times (other
kernels, engines or versions, shapes off the grid) keep the ``auto`` time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.predictor.config import RunConfig
from roofcast.predictor.engine_tables.anchor import anchor_of
from roofcast.predictor.engine_tables.store import DATA_DIR, EngineTables, load
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.features import FEATURE_COLUMNS, featurize
from roofcast.predictor.learned.estimator import AutoEstimator, LearnedEstimator
from roofcast.predictor.runtimes import get_runtime

#: relative half-width of a table time's interval: the 90th percentile of the tables'
#: interpolation error at held-out grid lines (benchmarks/engine_tables_interp.py).
TABLE_BAND = 0.15
LABEL, RATIO_LABEL = "engine table", "engine table x model ratio"


def runtime_versions(X: pd.DataFrame) -> dict[str, str]:
    """Runtime -> engine version its profile names, for the runtimes of ``X`` that serve."""
    out = {}
    for name in X["runtime"].astype(str).unique():
        try:
            serving = get_runtime(name).serving if name else None
        except PredictionError:
            serving = None
        if serving is not None and serving.version:
            out[name] = serving.version
    return out


class EngineTablesEstimator(AutoEstimator):
    """``auto`` with the engines' measured kernel tables where they apply (module docstring).
    ``tables_dir``: a folder of ``build``'s files (None: the shipped tables)."""

    name = "engine-tables"
    mode = "auto"

    def __init__(self, model_dir: str | Path | None = None, fallback=None,
                 base_dir: str | Path | None = None,
                 tables_dir: str | Path | None = None) -> None:
        super().__init__(model_dir, fallback, base_dir)
        self.tables_dir = tables_dir

    def tables(self) -> EngineTables | None:
        return load(Path(self.tables_dir) if self.tables_dir is not None else DATA_DIR)

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        out = super().explain(X)
        tables = self.tables()
        if tables is None or "runtime" not in X or "op_type" not in X:
            return out
        versions = runtime_versions(X)
        t = tables.times(X, versions)
        hit = np.isfinite(t)
        _set(out, hit, t, t * (1 - TABLE_BAND), t * (1 + TABLE_BAND), LABEL)
        self._anchored(X, out, tables, versions, hit)
        return out

    def _anchored(self, X: pd.DataFrame, out: pd.DataFrame, tables: EngineTables,
                  versions: dict[str, str], hit: np.ndarray) -> None:
        """Devices without tables, anchored on a table device (``anchor.anchor_of``: a what-if
        device's root, else a sibling): the anchor's table x the model's device ratio."""
        devices = X["device"].astype(str).to_numpy(object)
        runtimes = X["runtime"].astype(str).to_numpy(object)
        known = tables.meta["devices"]
        workload = [c for c in X.columns if c not in FEATURE_COLUMNS]
        for dev, runtime in sorted(set(zip(devices, runtimes, strict=True))):
            anchor = anchor_of(dev, known) if runtime in versions else None
            if anchor is None:
                continue
            pos = np.flatnonzero((devices == dev) & (runtimes == runtime) & ~hit)
            root_X = featurize(X.iloc[pos][workload], [anchor], RunConfig(runtime=runtime))
            measured = tables.times(root_X, versions)
            model = LearnedEstimator.explain(self, root_X)["time_s"].to_numpy(float)
            ok = np.isfinite(measured) & (model > 0)
            rows = np.zeros(len(out), bool)
            rows[pos[ok]] = True
            scale = np.ones(len(out))
            scale[pos[ok]] = measured[ok] / model[ok]
            _set(out, rows, *(out[c].to_numpy(float) * scale
                              for c in ("time_s", "lower_s", "upper_s")),
                 f"{RATIO_LABEL} ({anchor.id})")


def _set(out: pd.DataFrame, rows: np.ndarray, time: np.ndarray, lower: np.ndarray,
         upper: np.ndarray, label: str) -> None:
    """Rows ``rows`` of ``out`` take ``time`` (and its interval) under ``label``, in place."""
    if not rows.any():
        return
    for c, v in (("time_s", time), ("lower_s", lower), ("upper_s", upper)):
        out[c] = np.where(rows, v, out[c].to_numpy(float))
    for c, v in (("predictor", label), ("ood_reason", "")):
        if c in out:
            out[c] = np.where(rows, v, out[c].to_numpy(object))
    for c in ("ood", "device_ood"):
        if c in out:
            out[c] = np.where(rows, False, out[c].to_numpy(bool))
