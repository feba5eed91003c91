"""The ``learned`` and ``auto`` estimators (scikit-learn contract, like the analytical ones).

``fit(X, y)`` trains a model on featurized rows and measured seconds
(``predictor.learned.training.train``); without it the saved model of ``model_dir`` (else
``$ROOFCAST_LEARNED_MODEL``, else the installed one) loads on first use. ``predict(X)`` gives
seconds per row, ``explain(X)`` adds ``predictor``, ``ood``/``ood_reason`` and the bound. Every
device of a comparison takes the same road per row: learned where a model exists for the row's
(runtime, device kind, family), else the ``fallback`` estimator object (default
``TimeRoofline()``). ``learned`` extrapolates out of distribution; ``auto`` transfers the
efficiency there (``transfer``) and labels the row ``learned (transferred)``. An installed user
model layers on the shipped one (``layered``; ``base_dir``); ``summarize`` names the fallbacks.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.learned.estimator).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators.base import Params
from roofcast.predictor.estimators.roofline import TimeRoofline
from roofcast.predictor.learned.features import check_featurized
from roofcast.predictor.learned.layered import fallback_notes, layer
from roofcast.predictor.learned.persistence import load
from roofcast.predictor.learned.predictor import LearnedModel

#: environment variable naming the model folder used when no ``model_dir`` is given.
MODEL_ENV = "ROOFCAST_LEARNED_MODEL"
#: columns ``fit`` adds when X lacks them: CV group (default: the device), run id, end-to-end time
FIT_DEFAULTS: tuple[str, ...] = ("_group", "_run", "_e2e_s")


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


class LearnedEstimator(Params):
    """Per-family efficiency regressors on top of the roofline bound (module docstring).

    ``model_dir``: folder of a saved model (None: ``model_folder()``); ``fallback``: the
    analytical estimator object for rows without a usable learned time (None: TimeRoofline()).
    """

    name = "learned"
    mode = "learned"

    def __init__(self, model_dir: str | Path | None = None, fallback: Any = None,
                 base_dir: str | Path | None = None) -> None:
        self.model_dir = model_dir
        self.fallback = fallback
        self.base_dir = base_dir

    def fallback_estimator(self) -> Any:
        """The fallback estimator object (``TimeRoofline()`` when none was given)."""
        if self.fallback is None:
            return TimeRoofline()
        if not hasattr(self.fallback, "explain"):
            raise PredictionError(
                f"fallback must be an estimator object (e.g. make_estimator('roofline')), got "
                f"{self.fallback!r}")
        return self.fallback

    def model(self) -> LearnedModel:
        """The fitted model: the one ``fit`` trained, else the saved one (loaded once), layered
        on the base model (``layered``) when it is an installed user model."""
        if getattr(self, "model_", None) is None:
            folder = model_folder(self.model_dir)
            base = self.base_folder(folder)
            own = load(folder)
            self.model_ = own if base is None else layer(load(base), own, folder.name)
        return self.model_

    def base_folder(self, folder: Path) -> Path | None:
        """The base a model in ``folder`` layers on: ``base_dir``; else, for the active
        installed model (no ``model_dir``, no ``$ROOFCAST_LEARNED_MODEL``), the shipped one."""
        from roofcast.predictor.learned.persistence import DEFAULT_DIR

        if self.base_dir is not None:
            return Path(self.base_dir)
        if self.model_dir is not None or os.environ.get(MODEL_ENV):
            return None
        return None if folder.resolve() == DEFAULT_DIR.resolve() else DEFAULT_DIR

    def fit(self, X: pd.DataFrame, y: Any, groups: Any = None,
            **train_options: Any) -> LearnedEstimator:
        """Train on featurized rows ``X`` (``predictor.features.featurize``) with measured
        seconds ``y`` per row. ``groups``: cross-validation group per row (default: the
        device); ``train_options`` go to ``training.train`` (``quick=True``, ``alpha``, ...).
        The training result (validation tables, notes) is kept in ``training_``."""
        from roofcast.predictor.learned.data import TrainingSet
        from roofcast.predictor.learned.training import train

        check_featurized(X)
        y_s = np.asarray(y, dtype=float)
        if y_s.shape != (len(X),):
            raise PredictionError(f"y must hold one measured time (s) per row of X: {len(X)} "
                                  f"rows, y has shape {y_s.shape}")
        if not np.isfinite(y_s).all() or (y_s <= 0).any():
            raise PredictionError("measured times y must be finite and > 0 seconds")
        rows = X.reset_index(drop=True)
        if groups is not None:
            rows = rows.assign(_group=np.asarray(groups).astype(str))
        defaults = {"_group": rows["device"].astype(str), "_run": "",
                    "_e2e_s": np.nan}
        rows = rows.assign(**{c: v for c, v in defaults.items() if c not in rows.columns})
        digest = hashlib.sha256(pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes()
                                + y_s.tobytes()).hexdigest()
        result = train(TrainingSet(rows, y_s, "fit(X, y)", digest), **train_options)
        self.model_ = result.model
        self.training_ = result
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return self.explain(X)["time_s"].to_numpy(float)

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        return self.model().explain(X, mode=self.mode, fallback=self.fallback_estimator())

    def summarize(self, explained: pd.DataFrame, device_kind: str) -> dict[str, Any]:
        """End-to-end prediction, interval and model-level OOD flag of one graph's rows
        explained by this estimator (``LearnedModel.summarize``)."""
        model = self.model()
        return {**model.summarize(explained, device_kind),
                "fallbacks": fallback_notes(explained, getattr(model, "layer", ""))}


class AutoEstimator(LearnedEstimator):
    """One road for every device: learned where a model exists, its efficiency transferred
    (bounded, wider interval) out of distribution; the analytical fallback where none exists."""

    name = "auto"
    mode = "auto"


LEARNED_ESTIMATORS: dict[str, type[LearnedEstimator]] = {
    cls.name: cls for cls in (LearnedEstimator, AutoEstimator)
}


def graph_summary(per_op: pd.DataFrame, device_kind: str,
                  model_dir: str | Path | None = None) -> dict[str, Any]:
    """``LearnedEstimator(model_dir).summarize``: the saved model's end-to-end prediction,
    interval and OOD flag of a graph's per-op table explained by a learned estimator."""
    return LearnedEstimator(model_dir).summarize(per_op, device_kind)
