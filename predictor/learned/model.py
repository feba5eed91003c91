"""Per-family efficiency regressors and their candidates.

Target (per row, log10): ``y = log10(measured_s / t_ref)`` with the reference time
``t_ref = t_bound + floor_s``: ``t_bound`` the physical lower bound of
``features.roofline_terms`` and ``floor_s`` the per-kernel time floor of the *measurement
harness* (``harness_floor``: framework dispatch, host launch, timer granularity — PyTorch eager
adds ~25-55 us per kernel in the NeuSight data, which no device spec describes). ``y`` is the
inverse achieved fraction of that reference. A prediction is
``t = max(t_bound, t_ref · 10^ŷ)``: never faster than the physical bound (``bounded_time``).
Rows with ``t_bound = 0`` (no work) are not trained on and predict 0. A row measured under
another runtime's floor (CUDA-graph kernels learning with the eager road) carries it in column
``ROW_FLOOR`` of its features: its reference uses that floor, the others the harness floor.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.learned.model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned.features import FEATURES
from roofcast.predictor.learned.stats import weighted_median

CANDIDATES: tuple[str, ...] = ("xgboost", "ridge", "median")
XGB_PARAMS: dict[str, Any] = {
    "n_estimators": 150, "max_depth": 5, "learning_rate": 0.1, "subsample": 0.8,
    "colsample_bytree": 0.8, "min_child_weight": 3.0, "reg_lambda": 1.0,
    "tree_method": "hist", "max_bin": 128, "n_jobs": 2, "random_state": 0,
}
RIDGE_ALPHA = 1.0
#: a ridge feature whose training spread is below this fraction of its size is a constant.
MIN_RELATIVE_SCALE = 1e-6
#: low quantile of ``measured - t_bound`` per group that estimates the group's harness floor.
FLOOR_QUANTILE = 0.01
#: optional column of the feature table: a row's own per-kernel floor (s), NaN for the harness's.
ROW_FLOOR = "row_floor_s"


def harness_floor(meas_s: np.ndarray, t_bound: np.ndarray, groups: np.ndarray) -> float:
    """Per-kernel floor (s) of the measurement harness: median over ``groups`` (devices or
    models) of each group's ``FLOOR_QUANTILE`` quantile of ``max(measured - t_bound, 0)``."""
    excess = np.maximum(np.asarray(meas_s, float) - np.asarray(t_bound, float), 0.0)
    groups = np.asarray(groups)
    per_group = [float(np.quantile(excess[groups == g], FLOOR_QUANTILE)) for g in np.unique(groups)]
    return float(np.median(per_group)) if per_group else 0.0


def row_floors(F: pd.DataFrame, harness_s: float) -> np.ndarray | float:
    """Per-row floor: ``ROW_FLOOR`` where F has it (not NaN), else ``harness_s``."""
    if ROW_FLOOR not in F.columns:
        return harness_s
    own = F[ROW_FLOOR].to_numpy(float)
    return np.where(np.isnan(own), harness_s, own)


def reference_time(t_bound: np.ndarray, floor_s: float | np.ndarray) -> np.ndarray:
    """``t_bound + floor_s`` where there is work (``t_bound > 0``), else 0."""
    t_bound = np.asarray(t_bound, dtype=float)
    return np.where(t_bound > 0, t_bound + floor_s, 0.0)


def bounded_time(t_bound: np.ndarray, y_hat: np.ndarray, floor_s: float = 0.0) -> np.ndarray:
    """``max(t_bound, (t_bound + floor_s) · 10^y_hat)`` (0 where t_bound is 0): never below the
    physical bound. With ``floor_s = 0`` this is ``t_bound · 10^max(y_hat, 0)``."""
    t_bound = np.asarray(t_bound, dtype=float)
    ref = reference_time(t_bound, floor_s)
    return np.where(t_bound > 0, np.maximum(t_bound, ref * 10.0 ** np.asarray(y_hat, float)), 0.0)


@dataclass
class FamilyModel:
    """One fitted regressor of y (module docstring) for one model key."""

    key: str
    candidate: str
    features: tuple[str, ...] = FEATURES
    booster: Any = None  # xgboost.Booster for "xgboost"
    linear: dict[str, Any] = field(default_factory=dict)  # ridge / median parameters
    floor_s: float = 0.0  # harness floor of the reference time (module docstring)
    #: (min, max) of the in-sample ŷ over the training rows: the efficiency range a transferred
    #: prediction is clipped to (``transfer``); None for a model saved before it was recorded.
    y_range: tuple[float, float] | None = None

    # ------------------------------------------------------------------ fit / predict
    @classmethod
    def fit(cls, key: str, candidate: str, F: pd.DataFrame, meas_s: np.ndarray,
            t_bound: np.ndarray, groups: np.ndarray, xgb_params: dict[str, Any] | None = None,
            weight: np.ndarray | None = None,
            features: tuple[str, ...] = FEATURES) -> FamilyModel:
        """Fit ``candidate`` on the rows of F with measured seconds ``meas_s`` and physical bounds
        ``t_bound`` (> 0): the floor from ``groups`` (``harness_floor``), then y of the module
        docstring; ``weight``: optional per-row sample weights; ``features``: the input columns
        (an experiment's extra ones; saved models use ``FEATURES``)."""
        if candidate not in CANDIDATES:
            raise PredictionError(f"unknown candidate {candidate!r}; choose one of {CANDIDATES}")
        own = F[ROW_FLOOR].to_numpy(float) if ROW_FLOOR in F.columns else np.full(len(F), np.nan)
        harness = np.isnan(own)
        floor = harness_floor(np.asarray(meas_s, float)[harness], np.asarray(t_bound)[harness],
                              np.asarray(groups)[harness])
        y = np.log10(np.asarray(meas_s, float)
                     / reference_time(t_bound, np.where(harness, floor, own)))
        F = F[list(features)]
        if candidate == "xgboost":
            import xgboost as xgb

            reg = xgb.XGBRegressor(**{**XGB_PARAMS, **(xgb_params or {})})
            reg.fit(F.to_numpy(float), y, sample_weight=weight)
            booster = reg.get_booster()
            booster.feature_names = list(features)
            fm = cls(key, candidate, features, booster=booster, floor_s=floor)
        elif candidate == "ridge":
            fm = cls(key, candidate, features, linear=_fit_ridge(F.to_numpy(float), y, weight),
                     floor_s=floor)
        else:
            fm = cls(key, candidate, features,
                     linear={"constant": weighted_median(y, weight)}, floor_s=floor)
        seen = fm.predict_log(F)
        fm.y_range = (float(seen.min()), float(seen.max()))
        return fm

    def predict_time(self, F: pd.DataFrame, t_bound: np.ndarray,
                     floor_s: float | np.ndarray | None = None) -> np.ndarray:
        """Predicted seconds (``bounded_time``) for the rows of F with physical bounds t_bound;
        ``floor_s``: per-kernel floor replacing the learned one (None: ``row_floors``)."""
        floor = row_floors(F, self.floor_s) if floor_s is None else floor_s
        return bounded_time(t_bound, self.predict_log(F), floor)

    def predict_log(self, F: pd.DataFrame) -> np.ndarray:
        """ŷ (log10 of measured / bound) for the rows of F (columns ``FEATURES``)."""
        A = F[list(self.features)].to_numpy(float)
        if len(A) == 0:
            return np.zeros(0)
        if self.candidate == "xgboost":
            from roofcast.predictor.learned.trees import predict_booster

            return predict_booster(self.booster, A, self.features)
        if self.candidate == "ridge":
            return _predict_ridge(self.linear, A)
        return np.full(len(A), float(self.linear["constant"]))

    # ------------------------------------------------------------------ persistence
    def save(self, folder: Path) -> dict[str, Any]:
        """Write the booster (xgboost) as UBJ; return the JSON-able description."""
        desc: dict[str, Any] = {"key": self.key, "candidate": self.candidate,
                                "floor_s": float(self.floor_s)}
        if self.y_range is not None:
            desc["y_range"] = [float(v) for v in self.y_range]
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
            from roofcast.predictor.learned.trees import load_booster

            path = folder / str(desc["file"])
            if not path.is_file():
                raise PredictionError(
                    f"model file {path} is missing; retrain with `roofcast train`"
                )
            booster = load_booster(path)
            if list(booster.feature_names or []) != list(features):
                raise PredictionError(
                    f"model file {path} was trained on features {booster.feature_names}, which "
                    "differ from its metadata; retrain with `roofcast train`")
            return cls(desc["key"], candidate, features, booster=booster,
                       floor_s=float(desc["floor_s"]), y_range=_y_range(desc))
        return cls(desc["key"], candidate, features, linear=dict(desc["linear"]),
                   floor_s=float(desc["floor_s"]), y_range=_y_range(desc))


def _y_range(desc: dict[str, Any]) -> tuple[float, float] | None:
    y = desc.get("y_range")
    return None if y is None else (float(y[0]), float(y[1]))


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
        mean = Z.mean(axis=0)
        scale = _usable_scale(Z.std(axis=0), mean)  # saved as used (the schema refuses ~0)
        params = {"impute": [float(v) for v in med], "indicators": indicators,
                  "mean": [float(v) for v in mean], "scale": [float(v) for v in scale]}
    med = np.asarray(params["impute"], float)
    filled = np.where(nan, med, A)
    Z = np.hstack([filled, nan[:, params["indicators"]].astype(float)])
    mean = np.asarray(params["mean"], float)
    Z = (Z - mean) / _usable_scale(np.asarray(params["scale"], float), mean)
    return Z, params


def _usable_scale(scale: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """A column's standard deviation, or 1 where the column is constant up to float noise
    (``scale <= MIN_RELATIVE_SCALE · max(1, |mean|)``): standardising float noise (a ratio that
    is 1 ± 1e-9 in training) turns any real deviation at prediction time into a huge z and the
    ridge prediction into ~10^900000. Applied when predicting too, so saved models are safe."""
    return np.where(scale > MIN_RELATIVE_SCALE * np.maximum(1.0, np.abs(mean)), scale, 1.0)


def _predict_ridge(params: dict[str, Any], A: np.ndarray) -> np.ndarray:
    Z, _ = _ridge_design(A, params)
    return Z @ np.asarray(params["coef"], float) + float(params["intercept"])
