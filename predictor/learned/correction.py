"""The learned models as one ``predictor.fitted`` correction (kind ``learned``).

``LearnedCorrection(model)``: ``fit(rows)`` trains on featurized rows (``features.featurize``)
with the measured seconds in column ``measured_s`` (``LearnedEstimator.fit``); ``predict`` the
learned seconds per row (analytical ``TimeRoofline`` where no learned model applies);
``save``/``load``: a model folder (``persistence``); ``estimator(mode)``: a ``learned``/``auto``
estimator holding this model, usable on every road (graphs, sweeps, LLM serving).
``installed_estimator("learned:NAME")`` (or ``auto:NAME``): that estimator on installed model
``NAME`` (``installed``; ``default``: the shipped one), None for any other estimator.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.fitted import FittedMetadata
from roofcast.predictor.learned.persistence import fitted_metadata, load, save
from roofcast.predictor.learned.predictor import LearnedModel

TARGET = "measured_s"
#: between a learned mode and an installed model's name (``learned:NAME``).
SEPARATOR = ":"


class LearnedCorrection:
    """A trained ``LearnedModel`` behind the fitted-correction contract (module docstring)."""

    kind: ClassVar[str] = "learned"
    suffixes: ClassVar[tuple[str, ...]] = (".ubj",)

    def __init__(self, model: LearnedModel | None = None) -> None:
        self._model = model

    @property
    def model(self) -> LearnedModel:
        if self._model is None:
            raise PredictionError("this learned correction is not fitted: call fit(rows) or load")
        return self._model

    @property
    def metadata(self) -> FittedMetadata:
        return fitted_metadata(self.model)

    def fit(self, rows: pd.DataFrame, **train_options: Any) -> LearnedCorrection:
        from roofcast.predictor.learned.estimator import LearnedEstimator

        if TARGET not in rows:
            raise PredictionError(f"learned fit rows need the measured seconds in {TARGET!r}")
        est = LearnedEstimator().fit(rows.drop(columns=[TARGET]), rows[TARGET], **train_options)
        self._model = est.model_
        self._model.meta.setdefault("fitted_on", date.today().isoformat())
        return self

    def predict(self, features: pd.DataFrame) -> np.ndarray:
        return self.estimator().predict(features)

    def estimator(self, mode: str = "learned") -> Any:
        """A ``learned``/``auto`` estimator object holding this model."""
        est = _learned_estimator(mode)
        est.model_ = self.model
        return est

    def save(self, folder: str | Path) -> Path:
        return save(self.model, folder)

    @classmethod
    def load(cls, folder: str | Path) -> LearnedCorrection:
        return cls(load(folder))


def _learned_estimator(mode: str, model_dir: Path | None = None) -> Any:
    from roofcast.predictor.estimators.roofline import TimeRoofline
    from roofcast.predictor.learned.estimator import LEARNED_ESTIMATORS

    if mode not in LEARNED_ESTIMATORS:
        raise PredictionError(f"learned mode {mode!r} unknown; choose one of "
                              f"{', '.join(LEARNED_ESTIMATORS)}")
    return LEARNED_ESTIMATORS[mode](model_dir=model_dir, fallback=TimeRoofline())


def installed_estimator(spec: Any) -> Any:
    """``learned:NAME`` / ``auto:NAME`` -> that estimator on installed model ``NAME`` (module
    docstring); None for anything else (another name, an estimator object)."""
    if not isinstance(spec, str) or SEPARATOR not in spec:
        return None
    from roofcast.predictor.learned.installed import folder_of
    from roofcast.predictor.learned.persistence import DEFAULT_DIR

    mode, name = spec.split(SEPARATOR, 1)
    folder = folder_of(name)
    est = _learned_estimator(mode, folder)
    if folder.resolve() != DEFAULT_DIR.resolve():  # a user model layers on the shipped one
        est.base_dir = DEFAULT_DIR
    return est
