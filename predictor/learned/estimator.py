"""The ``learned`` and ``auto`` estimators (scikit-learn contract, like the analytical ones).

``make_estimator("learned")`` / ``make_estimator("auto", model_dir=DIR)``: ``fit`` is a no-op
(the regressors are trained by ``roofcast train`` / ``predictor.learned.training`` and loaded
from ``model_dir``, default the shipped ``predictor/learned/default``); ``predict(X)`` seconds
per row; ``explain(X)`` the analytical explain columns plus ``predictor`` (which predictor
produced each row), ``ood``/``ood_reason``, ``bound_s``, ``learned_s`` and ``analytical_s``
(see ``predictor.learned.predictor``). The model folder: ``model_dir``, else
``$ROOFCAST_LEARNED_MODEL``, else the shipped default. ``learned`` uses the learned time wherever a model
exists; ``auto`` only where the row is in distribution, the analytical ``fallback`` otherwise.
Loaded models are cached per folder and modification time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from roofcast.predictor.learned.predictor import DEFAULT_FALLBACK, LearnedModel

_CACHE: dict[tuple[str, float], LearnedModel] = {}
#: environment variable naming the model folder used when no ``model_dir`` is given.
MODEL_ENV = "ROOFCAST_LEARNED_MODEL"


def model_folder(model_dir: str | Path | None = None) -> Path:
    """``model_dir``, else ``$ROOFCAST_LEARNED_MODEL``, else the active installed model
    (``installed``: ``roofcast train --install`` / ``roofcast models use``), else the shipped
    default model."""
    from roofcast.predictor.learned.installed import active_folder
    from roofcast.predictor.learned.persistence import DEFAULT_DIR

    if model_dir is not None:
        return Path(model_dir)
    env = os.environ.get(MODEL_ENV)
    if env:
        return Path(env)
    return active_folder() or DEFAULT_DIR


def load_cached(model_dir: str | Path | None = None) -> LearnedModel:
    """``persistence.load`` with a cache keyed by folder and metadata mtime."""
    from roofcast.predictor.learned.persistence import METADATA, load

    folder = model_folder(model_dir)
    meta = folder / METADATA
    key = (str(folder.resolve()), meta.stat().st_mtime if meta.is_file() else -1.0)
    if key not in _CACHE:
        _CACHE[key] = load(folder)
    return _CACHE[key]


class LearnedEstimator(BaseEstimator):
    """Per-family efficiency regressors on top of the roofline bound (module docstring)."""

    name = "learned"
    mode = "learned"

    def __init__(self, model_dir: str | None = None, fallback: str = DEFAULT_FALLBACK) -> None:
        self.model_dir = model_dir
        self.fallback = fallback

    def model(self) -> LearnedModel:
        return load_cached(self.model_dir)

    def fit(self, X: pd.DataFrame, y: object = None) -> LearnedEstimator:
        from roofcast.predictor.learned.features import check_featurized

        check_featurized(X)
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return self.explain(X)["time_s"].to_numpy(float)

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        return self.model().explain(X, mode=self.mode, fallback=self.fallback)


class AutoEstimator(LearnedEstimator):
    """Learned where in distribution, the analytical fallback elsewhere."""

    name = "auto"
    mode = "auto"


LEARNED_ESTIMATORS: dict[str, type[LearnedEstimator]] = {
    cls.name: cls for cls in (LearnedEstimator, AutoEstimator)
}


def graph_summary(per_op: pd.DataFrame, device_kind: str,
                  model_dir: str | Path | None = None) -> dict[str, Any]:
    """End-to-end learned prediction, interval and model-level OOD flag of a graph's per-op table
    explained by a learned estimator (``LearnedModel.summarize``)."""
    return load_cached(model_dir).summarize(per_op, device_kind)
