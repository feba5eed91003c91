"""Per-family efficiency regressors and their candidates.

Target (per row, log10): ``y = log10(measured_s / t_bound)`` with ``t_bound`` the physical lower
bound of ``features.roofline_terms`` — the *inverse achieved fraction of the roofline bound*.
A prediction is ``t = t_bound · 10^max(ŷ, 0)``: never faster than the bound (``bounded_time``).
Rows with ``t_bound = 0`` (no work) are not trained on and predict 0.

Candidates (``CANDIDATES``), chosen per family by grouped cross-validation (``training``):

* ``xgboost``: ``xgboost.XGBRegressor`` (hist, depth ``XGB_PARAMS['max_depth']``, small
  ensemble, ``n_jobs=2``); saved with ``booster.save_model`` (UBJ);
* ``ridge``: scikit-learn ``Ridge`` on standardised features with NaN imputed by the training
  median plus a missing-value indicator per feature that had NaNs; saved as JSON numbers
  (coefficients, means, scales, imputation values);
* ``median``: the training median of y (a constant efficiency per family).

scikit-learn's HistGradientBoostingRegressor is *not* a candidate: it can only be saved with
pickle, which this project never writes or loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from predictor.errors import PredictionError
from predictor.learned.features import FEATURES

CANDIDATES: tuple[str, ...] = ("xgboost", "ridge", "median")
XGB_PARAMS: dict[str, Any] = {
    "n_estimators": 150, "max_depth": 5, "learning_rate": 0.1, "subsample": 0.8,
    "colsample_bytree": 0.8, "min_child_weight": 3.0, "reg_lambda": 1.0,
    "tree_method": "hist", "max_bin": 128, "n_jobs": 2, "random_state": 0,
}
RIDGE_ALPHA = 1.0


def bounded_time(t_bound: np.ndarray, y_hat: np.ndarray) -> np.ndarray:
    """``t_bound · 10^max(y_hat, 0)`` (0 where t_bound is 0): never below the bound."""
    t_bound = np.asarray(t_bound, dtype=float)
    return np.where(t_bound > 0, t_bound * 10.0 ** np.maximum(np.asarray(y_hat, float), 0.0), 0.0)


@dataclass
class FamilyModel:
    """One fitted regressor of y (module docstring) for one model key."""

    key: str
    candidate: str
    features: tuple[str, ...] = FEATURES
    booster: Any = None  # xgboost.Booster for "xgboost"
    linear: dict[str, Any] = field(default_factory=dict)  # ridge / median parameters

    # ------------------------------------------------------------------ fit / predict
    @classmethod
    def fit(cls, key: str, candidate: str, F: pd.DataFrame, y: np.ndarray,
            xgb_params: dict[str, Any] | None = None,
            weight: np.ndarray | None = None) -> FamilyModel:
        """Fit ``candidate`` on (F, y); ``weight``: optional per-row sample weights."""
        if candidate not in CANDIDATES:
            raise PredictionError(f"unknown candidate {candidate!r}; choose one of {CANDIDATES}")
        F = F[list(FEATURES)]
        y = np.asarray(y, dtype=float)
        if candidate == "xgboost":
            import xgboost as xgb

            reg = xgb.XGBRegressor(**{**XGB_PARAMS, **(xgb_params or {})})
            reg.fit(F.to_numpy(float), y, sample_weight=weight)
            booster = reg.get_booster()
            booster.feature_names = list(FEATURES)
            return cls(key, candidate, booster=booster)
        if candidate == "ridge":
            return cls(key, candidate, linear=_fit_ridge(F.to_numpy(float), y, weight))
        return cls(key, candidate, linear={"constant": _weighted_median(y, weight)})

    def predict_log(self, F: pd.DataFrame) -> np.ndarray:
        """ŷ (log10 of measured / bound) for the rows of F (columns ``FEATURES``)."""
        A = F[list(self.features)].to_numpy(float)
        if len(A) == 0:
            return np.zeros(0)
        if self.candidate == "xgboost":
            import xgboost as xgb

            return self.booster.predict(xgb.DMatrix(A, feature_names=list(self.features)))
        if self.candidate == "ridge":
            return _predict_ridge(self.linear, A)
        return np.full(len(A), float(self.linear["constant"]))

    # ------------------------------------------------------------------ persistence
    def save(self, folder: Path) -> dict[str, Any]:
        """Write the booster (xgboost) as UBJ; return the JSON-able description."""
        desc: dict[str, Any] = {"key": self.key, "candidate": self.candidate}
        if self.candidate == "xgboost":
            name = self.key.replace("/", "__") + ".ubj"
            self.booster.save_model(str(folder / name))
            desc["file"] = name
        else:
            desc["linear"] = self.linear
        return desc

    @classmethod
    def load(cls, folder: Path, desc: dict[str, Any], features: tuple[str, ...]) -> FamilyModel:
        candidate = desc.get("candidate")
        if candidate not in CANDIDATES:
            raise PredictionError(f"model {desc.get('key')!r}: unknown candidate {candidate!r}")
        if candidate == "xgboost":
            import xgboost as xgb

            path = folder / str(desc["file"])
            if not path.is_file():
                raise PredictionError(f"model file {path} is missing; retrain with `roofcast train`")
            booster = xgb.Booster()
            try:
                booster.load_model(str(path))
            except xgb.core.XGBoostError as exc:
                raise PredictionError(f"cannot read model file {path}: {exc}") from exc
            if list(booster.feature_names or []) != list(features):
                raise PredictionError(
                    f"model file {path} was trained on features {booster.feature_names}, which "
                    "differ from its metadata; retrain with `roofcast train`")
            return cls(desc["key"], candidate, features, booster=booster)
        return cls(desc["key"], candidate, features, linear=dict(desc["linear"]))


def _weighted_median(y: np.ndarray, weight: np.ndarray | None) -> float:
    if weight is None:
        return float(np.median(y))
    o = np.argsort(y)
    c = np.cumsum(np.asarray(weight, float)[o])
    return float(y[o][np.searchsorted(c, 0.5 * c[-1])])


def _fit_ridge(A: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None) -> dict[str, Any]:
    from sklearn.linear_model import Ridge

    Z, params = _ridge_design(A, None)
    reg = Ridge(alpha=RIDGE_ALPHA).fit(Z, y, sample_weight=weight)
    params.update(coef=[float(c) for c in reg.coef_], intercept=float(reg.intercept_))
    return params


def _ridge_design(A: np.ndarray, params: dict[str, Any] | None) -> tuple[np.ndarray, dict]:
    """Impute NaN by the training median (+ indicators), standardise: (design, parameters)."""
    nan = np.isnan(A)
    if params is None:
        with np.errstate(all="ignore"):
            med = np.nanmedian(np.where(nan.all(axis=0), 0.0, A), axis=0)
        med = np.where(np.isnan(med), 0.0, med)
        indicators = [int(j) for j in np.flatnonzero(nan.any(axis=0))]
        filled = np.where(nan, med, A)
        Z = np.hstack([filled, nan[:, indicators].astype(float)])
        mean, scale = Z.mean(axis=0), Z.std(axis=0)
        scale = np.where(scale > 1e-12, scale, 1.0)
        params = {"impute": [float(v) for v in med], "indicators": indicators,
                  "mean": [float(v) for v in mean], "scale": [float(v) for v in scale]}
    med = np.asarray(params["impute"], float)
    filled = np.where(nan, med, A)
    Z = np.hstack([filled, nan[:, params["indicators"]].astype(float)])
    Z = (Z - np.asarray(params["mean"])) / np.asarray(params["scale"])
    return Z, params


def _predict_ridge(params: dict[str, Any], A: np.ndarray) -> np.ndarray:
    Z, _ = _ridge_design(A, params)
    return Z @ np.asarray(params["coef"], float) + float(params["intercept"])
