"""Out-of-distribution flags: where a learned prediction is extrapolation.

Per row, with the reason kept as text: **family** (no learned model for the row's device kind
and op family), **range** (a feature outside its model's training range widened by
``RANGE_MARGIN`` x range + ``RANGE_SLACK``, or NaN where every training row had it) and
**device** (``d = sqrt(mean_j ((x_j − t_j) / s_j)²)`` to the nearest training device vector
``t`` of the kind, ``s_j`` the features' spread, at least ``MIN_DEVICE_SCALE`` decades; flagged
when ``d > DEVICE_DISTANCE``). A whole model is flagged when its device is, or when flagged rows
hold more than ``MODEL_SHARE`` of the analytical time.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.learned.ood).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from roofcast.predictor.learned.features import FEATURES, SIZE_FEATURES

RANGE_FEATURES: tuple[str, ...] = FEATURES + SIZE_FEATURES
DEVICE_VECTOR: tuple[str, ...] = ("lg_peak", "lg_bw", "lg_l2", "lg_units", "lg_clock", "lg_launch")
RANGE_MARGIN = 0.10
RANGE_SLACK = 0.05
MIN_DEVICE_SCALE = 0.15
DEVICE_DISTANCE = 2.0
MODEL_SHARE = 0.10
_MISSING = -99.0  # stands for NaN while grouping equal device vectors


@dataclass(frozen=True)
class Ranges:
    """Training ranges of one model key: feature -> (min, max); ``always`` the features that no
    training row lacked (NaN there is out of distribution)."""

    bounds: dict[str, tuple[float, float]]
    always: frozenset[str] = frozenset()

    @classmethod
    def fit(cls, F: pd.DataFrame) -> Ranges:
        out, always = {}, set()
        for c in RANGE_FEATURES:
            v = F[c].to_numpy(float)
            ok = np.isfinite(v)
            if ok.any():
                out[c] = (float(v[ok].min()), float(v[ok].max()))
                if ok.all():
                    always.add(c)
        return cls(out, frozenset(always))

    def outside(self, F: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(flag per row, reason text per row)."""
        n = len(F)
        flag = np.zeros(n, dtype=bool)
        reasons = [[] for _ in range(n)]
        for c, (lo, hi) in self.bounds.items():
            if c not in F.columns:
                continue
            pad = RANGE_MARGIN * (hi - lo) + RANGE_SLACK
            v = F[c].to_numpy(float)
            bad = np.isfinite(v) & ((v < lo - pad) | (v > hi + pad))
            for i in np.flatnonzero(bad):
                reasons[i].append(f"{c}={v[i]:.3g} outside [{lo:.3g}, {hi:.3g}]")
            flag |= bad
            if c in self.always:
                gone = ~np.isfinite(v)
                for i in np.flatnonzero(gone):
                    reasons[i].append(f"{c} missing (every training row had it)")
                flag |= gone
        return flag, np.array(["; ".join(r) for r in reasons], dtype=object)

    def to_json(self) -> dict:
        """feature -> [min, max, always present (bool)]."""
        return {k: [lo, hi, k in self.always] for k, (lo, hi) in self.bounds.items()}

    @classmethod
    def from_json(cls, d: dict) -> Ranges:
        return cls({k: (float(v[0]), float(v[1])) for k, v in d.items()},
                   frozenset(k for k, v in d.items() if len(v) > 2 and bool(v[2])))


@dataclass(frozen=True)
class DeviceSet:
    """Training device vectors of one device kind, with their ids."""

    vectors: tuple[tuple[float, ...], ...]
    ids: tuple[str, ...]

    @classmethod
    def fit(cls, F: pd.DataFrame, devices: np.ndarray) -> DeviceSet:
        V = F[list(DEVICE_VECTOR)].copy()
        V["_id"] = devices
        V = V.dropna().drop_duplicates().round(6)
        return cls(tuple(tuple(float(x) for x in r) for r in V[list(DEVICE_VECTOR)].to_numpy()),
                   tuple(str(i) for i in V["_id"]))

    def scales(self) -> np.ndarray:
        V = np.asarray(self.vectors, float)
        s = V.std(axis=0) if len(V) > 1 else np.zeros(len(DEVICE_VECTOR))
        return np.maximum(s, MIN_DEVICE_SCALE)

    def distance(self, F: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(distance to the nearest training vector, its device id) per row. A feature the row
        lacks (NaN: a data-movement row uses no compute unit, so it has no peak) is left out of
        the mean; a row lacking every feature is infinitely far."""
        V = np.asarray(self.vectors, float)
        X = F[list(DEVICE_VECTOR)].to_numpy(float)
        if len(V) == 0:
            return np.full(len(X), np.inf), np.full(len(X), "", dtype=object)
        uniq, inv = np.unique(np.nan_to_num(X, nan=_MISSING), axis=0, return_inverse=True)
        uniq = np.where(uniq == _MISSING, np.nan, uniq)
        present = np.isfinite(uniq)
        z = (uniq[:, None, :] - V[None, :, :]) / self.scales()
        n = present.sum(axis=1)[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.sqrt(np.where(present[:, None, :], z ** 2, 0.0).sum(axis=2) / n)
        d = np.where(n > 0, d, np.inf)
        best = d.argmin(axis=1)
        dist = d[np.arange(len(uniq)), best]
        return dist[inv.ravel()], np.asarray(self.ids, dtype=object)[best][inv.ravel()]

    def to_json(self) -> dict:
        return {"features": list(DEVICE_VECTOR), "vectors": [list(v) for v in self.vectors],
                "ids": list(self.ids)}

    @classmethod
    def from_json(cls, d: dict) -> DeviceSet:
        return cls(tuple(tuple(float(x) for x in v) for v in d["vectors"]),
                   tuple(str(i) for i in d["ids"]))


def model_flag(
    ood: np.ndarray, analytical_s: np.ndarray, device_ood: np.ndarray
) -> tuple[bool, str]:
    """Whole-graph flag (module docstring) and its reason ('' when in distribution)."""
    total = float(np.sum(analytical_s))
    share = (
        float(np.sum(np.asarray(analytical_s)[np.asarray(ood, bool)]) / total) if total > 0 else 0.0
    )
    reasons = []
    if np.any(device_ood):
        reasons.append("device unlike the training devices")
    if share > MODEL_SHARE:
        reasons.append(f"{100 * share:.0f}% of the analytical time is in out-of-distribution ops")
    return bool(reasons), "; ".join(reasons)
