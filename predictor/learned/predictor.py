"""``LearnedModel``: the fitted per-family regressors with their intervals and OOD data, and how
they turn a featurized table into per-op times.

Per row: the physical bound ``t_bound`` (``features.roofline_terms``; rows without work take 0 s;
a what-if device's features are its base device's, ``estimators.whatif``);
the model key (``roads``: road/family of the row's runtime and device kind); with a model,
``time = max(t_bound, (t_bound + floor) · 10^ŷ)`` (``model.bounded_time``; ``floor`` the family's
learned floor or, borrowed, the row's ``dispatch_floor_s``: docs/design/road.md) and the family's
conformal interval;
OOD flags (``ood``). ``mode="auto"`` transfers a flagged row's efficiency (``transfer``) and
labels it ``learned (transferred)``; rows without a model take the fallback estimator. Column
``predictor`` names the source of each row's time, ``ood_reason`` why a row was flagged.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.learned.predictor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators.base import base_terms, bound_label
from roofcast.predictor.estimators.roofline import TimeRoofline
from roofcast.predictor.estimators.whatif import efficiency_view
from roofcast.predictor.learned.features import learned_features, roofline_terms
from roofcast.predictor.learned.intervals import BinnedIntervals, EndToEnd, comonotone_sum
from roofcast.predictor.learned.model import FamilyModel, bounded_time
from roofcast.predictor.learned.ood import DEVICE_DISTANCE, DeviceSet, Ranges, model_flag
from roofcast.predictor.learned.roads import model_runtimes, row_roads
from roofcast.predictor.learned.transfer import TRANSFERRED, clip_efficiency, widen

MODES: tuple[str, ...] = ("learned", "auto")
#: the end-to-end calibration applies only when learned rows hold this share of the time (and
#: the graph is not flagged): it was fitted on sums of learned per-op times.
E2E_MIN_LEARNED_SHARE = 0.9


class Explainer(Protocol):
    """What a fallback estimator must offer: ``name`` and ``explain(X) -> DataFrame``."""

    name: str

    def explain(self, X: pd.DataFrame) -> pd.DataFrame: ...


@dataclass
class LearnedModel:
    """Everything a trained learned predictor consists of (saved by ``persistence``)."""

    models: dict[str, FamilyModel]
    intervals: dict[str, BinnedIntervals]
    ranges: dict[str, Ranges]
    devices: dict[str, DeviceSet]
    e2e: dict[str, EndToEnd] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def runtimes(self) -> dict[str, str]:
        """Road -> runtime the model learned (``roads``; legacy models: gpu -> pytorch-eager,
        cpu -> onnxruntime-cpu)."""
        return model_runtimes(self.meta)

    def row_keys(self, X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(model key or '' per row, borrowed-runtime flag, note) — ``roads.row_roads``."""
        roads, borrowed, notes = row_roads(X, self.runtimes())
        keys = np.where(roads != "", roads + "/" + X["family"].astype(str).to_numpy(), "")
        return keys.astype(object), borrowed, notes

    def explain(self, X: pd.DataFrame, mode: str = "learned",
                fallback: Explainer | None = None) -> pd.DataFrame:
        """Per-row times (module docstring); ``fallback``: the analytical estimator *object*
        timing the rows without a (usable) learned model (default ``TimeRoofline()``)."""
        fallback = TimeRoofline() if fallback is None else fallback
        fallback_name = getattr(fallback, "name", type(fallback).__name__)
        if mode not in MODES:
            raise PredictionError(f"learned mode {mode!r} unknown; choose one of {MODES}")
        F = learned_features(efficiency_view(X))
        keys, borrowed, road_notes = self.row_keys(X)
        c, m, bound = roofline_terms(X)
        _, _, overhead = base_terms(X)
        ana = fallback.explain(X)
        ana_t = ana["time_s"].to_numpy(float)
        n = len(X)
        work = bound > 0
        label = np.full(n, f"analytical:{fallback_name}", dtype=object)
        ood = np.zeros(n, dtype=bool)
        reasons = np.where(work, road_notes, "").astype(object)
        y_hat, has_model = self._predict_log(F, keys, work, label, ood, reasons)
        distance = self._device_distance(X, F, has_model, ood, reasons)
        transferred = has_model & ood & (mode == "auto")
        dispatch = (X["dispatch_floor_s"].to_numpy(float) if borrowed.any() else np.zeros(n))
        learned_t, lo_l, hi_l = self._learned_times(
            keys, has_model, transferred, y_hat, (borrowed, dispatch), bound
        )
        lower = ana["lower_s"].to_numpy(float).copy()
        upper = ana["upper_s"].to_numpy(float).copy()
        # a bin with too few calibration residuals has no conformal upper end (inf): the row
        # takes the fallback's serialised upper end (compute + memory + floor), at least its
        # learned time, so an interval is never unbounded
        open_hi = has_model & ~np.isfinite(hi_l)
        hi_l[open_hi] = np.maximum(upper[open_hi], learned_t[open_hi])
        tr = np.flatnonzero(transferred)
        lo_l[tr], hi_l[tr] = widen(learned_t[tr], lo_l[tr], hi_l[tr], bound[tr], distance[tr])
        label[transferred] = [lab.replace("learned:", f"{TRANSFERRED}:", 1)
                              for lab in label[transferred]]
        use = has_model
        time = np.where(use, learned_t, ana_t)
        time = np.where(work | (ana_t > 0), time, 0.0)
        lower = np.where(use, lo_l, lower)
        upper = np.where(use, hi_l, upper)
        device_ood = np.array(["device distance" in r for r in reasons], dtype=bool)
        return pd.DataFrame({
            "time_s": time, "compute_s": c, "memory_s": m, "overhead_s": overhead,
            "bound": bound_label(c, m, np.where(use, np.maximum(time - bound, 0.0), overhead)),
            "lower_s": np.minimum(lower, time), "upper_s": np.maximum(upper, time),
            "estimator": np.full(n, mode, dtype=object), "predictor": label, "ood": ood,
            "ood_reason": reasons, "device_ood": device_ood, "bound_s": bound,
            "learned_s": learned_t, "analytical_s": ana_t,
        }, index=X.index)

    def _predict_log(self, F: pd.DataFrame, keys: np.ndarray, work: np.ndarray,
                     label: np.ndarray, ood: np.ndarray,
                     reasons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log-efficiency prediction, has-a-model flag) per row; labels each predicted row
        and flags (in ``ood``/``reasons``) rows outside their model's training ranges."""
        n = len(F)
        y_hat = np.full(n, np.nan)
        has_model = np.zeros(n, dtype=bool)
        for key in np.unique(keys[work & (keys != "")]):
            rows = np.flatnonzero(work & (keys == key))
            fm = self.models.get(key)
            if fm is None:
                ood[rows] = True
                reasons[rows] = f"no learned model for {key}"
                continue
            has_model[rows] = True
            y_hat[rows] = fm.predict_log(F.iloc[rows])
            label[rows] = f"learned:{key}:{fm.candidate}"
            flag, why = self.ranges[key].outside(F.iloc[rows])
            ood[rows] |= flag
            reasons[rows] = why
        return y_hat, has_model

    def _device_distance(self, X: pd.DataFrame, F: pd.DataFrame, has_model: np.ndarray,
                         ood: np.ndarray, reasons: np.ndarray) -> np.ndarray:
        """Distance of each predicted row's device to the training devices of its kind; rows
        past ``DEVICE_DISTANCE`` are flagged (in ``ood``/``reasons``)."""
        distance = np.zeros(len(X))
        kinds = X["device_kind"].astype(str).to_numpy()
        for kind in np.unique(kinds[has_model]):
            rows = np.flatnonzero(has_model & (kinds == kind))
            ds = self.devices.get(kind)
            if ds is None:
                continue
            dist, near = ds.distance(F.iloc[rows])
            distance[rows] = dist
            far = dist > DEVICE_DISTANCE
            for i, d, nb in zip(rows[far], dist[far], near[far], strict=True):
                reasons[i] = "; ".join(filter(None, [
                    f"device distance {d:.2f} > {DEVICE_DISTANCE} (nearest training device {nb})",
                    reasons[i]]))
            ood[rows] |= far
        return distance

    def _learned_times(self, keys: np.ndarray, has_model: np.ndarray, transferred: np.ndarray,
                       y_hat: np.ndarray, borrowed_floor: tuple[np.ndarray, np.ndarray],
                       bound: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(learned time, lower, upper) per row with a model; ``borrowed_floor`` is (borrowed
        runtime flag, floor of such rows): other rows take their model's own floor."""
        borrowed, dispatch = borrowed_floor
        n = len(keys)
        learned_t = np.full(n, np.nan)
        lo_l, hi_l = np.full(n, np.nan), np.full(n, np.nan)
        for key in np.unique(keys[has_model]):
            rows = np.flatnonzero(has_model & (keys == key))
            fm = self.models[key]
            y = np.where(transferred[rows], clip_efficiency(y_hat[rows], fm.y_range), y_hat[rows])
            floor = np.where(borrowed[rows], dispatch[rows], fm.floor_s)
            learned_t[rows] = bounded_time(bound[rows], y, floor)
            lo_l[rows], hi_l[rows] = self.intervals[key].interval(learned_t[rows], bound[rows])
        return learned_t, lo_l, hi_l


    def summarize(self, explained: pd.DataFrame, kind: str) -> dict[str, Any]:
        """End-to-end prediction, interval and model-level OOD flag for one graph's explained rows
        (see ``intervals`` for how per-op intervals combine)."""
        total = float(explained["time_s"].sum())
        flag, why = model_flag(explained["ood"].to_numpy(bool),
                               explained["analytical_s"].to_numpy(float),
                               explained["device_ood"].to_numpy(bool))
        e2e = self.e2e.get(kind)
        learned = explained["predictor"].str.startswith("learned").to_numpy()
        share = float(explained["time_s"][learned].sum() / total) if total > 0 else 0.0
        if e2e is not None and not flag and share >= E2E_MIN_LEARNED_SHARE:
            pred, lo, hi = e2e.apply(total)
            how = f"e2e conformal ({e2e.runs} held-out runs)"
        else:
            pred = total
            lo, hi = comonotone_sum(explained["lower_s"].to_numpy(float),
                                    explained["upper_s"].to_numpy(float))
            how = "comonotone sum of per-op intervals"
        return {
            "sum_ops_s": total,
            "learned_share": share,
            "e2e_s": pred,
            "e2e_lower_s": lo,
            "e2e_upper_s": hi,
            "interval_method": how,
            "ood": flag,
            "ood_reason": why,
            "ops_learned": int(explained["predictor"].str.startswith("learned").sum()),
            "ops_transferred": int(explained["predictor"].str.startswith(TRANSFERRED).sum()),
            "ops_analytical": int(explained["predictor"].str.startswith("analytical").sum()),
        }
