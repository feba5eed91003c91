"""``best-measured``: per device kind, the road the accuracy benchmarks measured most accurate.

``roofcast.defaults.GRAPH_ROAD_BY_KIND`` names it (``*``: kinds with no measurement): any
analytical estimator or a learned one (``learned``/``auto``, with a ``TimeRoofline`` fallback as
``make_estimator`` builds them). Rows are split by ``device_kind``, each part explained by its
road and put back in their order; the ``road_part`` column names the road that timed each row.
A part is built once per ``ByKind`` object (a learned model loads once); a learned part whose
model cannot load (``ROOFCAST_LEARNED_MODEL`` naming no model) is its ``TimeRoofline`` fallback,
and the summary's ``fallbacks`` say so. ``summarize`` is the learned part's (its end-to-end
estimate and fallbacks), else only such a note. A what-if device keeps its base's kind, so
every part stays monotone (each road passes the invariants). It sits above both estimator
packages, beside ``estimator_registry``. Table and rule: ``benchmarks/road_choice.py``,
docs/design/road.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from roofcast.defaults import GRAPH_ROAD_BY_KIND
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators import ESTIMATORS
from roofcast.predictor.estimators.base import Params, check_features
from roofcast.predictor.estimators.roofline import TimeRoofline
from roofcast.predictor.learned.estimator import LEARNED_ESTIMATORS


class ByKind(Params):
    """Each device kind's measured-best road (``roads``: kind -> estimator name; None: the
    defaults module's table)."""

    name = "best-measured"

    def __init__(self, roads: Mapping[str, str] | None = None) -> None:
        self.roads = roads

    def road_of(self, kind: str) -> str:
        """The road timing devices of ``kind``."""
        roads = dict(GRAPH_ROAD_BY_KIND if self.roads is None else self.roads)
        return roads.get(kind, roads.get("*", "time-roofline"))

    def road_estimator(self, kind: str) -> Any:
        """The estimator of the road timing devices of ``kind`` (built on first use)."""
        parts = self.__dict__.setdefault("parts_", {})
        road = self.road_of(kind)
        if road not in parts:
            parts[road] = _build(road)
        return parts[road][0]

    def fit(self, X: pd.DataFrame, y: object = None) -> ByKind:
        check_features(X)
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return self.explain(X)["time_s"].to_numpy(float)

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        check_features(X, ("device_kind",))
        kinds = X["device_kind"].astype(str).to_numpy()
        parts, order = [], []
        for kind in pd.unique(kinds):
            rows = np.flatnonzero(kinds == kind)
            parts.append(self.road_estimator(kind).explain(X.iloc[rows]))
            order.append(rows)
        if not parts:
            parts, order = [self.road_estimator("*").explain(X)], [np.arange(len(X))]
        out = pd.concat(parts)
        out = out.iloc[np.argsort(np.concatenate(order), kind="stable")]
        return out.assign(road_part=out["estimator"], estimator=self.name)

    def summarize(self, explained: pd.DataFrame, device_kind: str) -> dict[str, Any]:
        """The learned part's summary of one graph's rows on a ``device_kind`` device."""
        part = self.road_estimator(device_kind)
        note = self.parts_[self.road_of(device_kind)][1]
        if hasattr(part, "summarize"):
            return part.summarize(explained, device_kind)
        return {"fallbacks": (note,)} if note else {}


def _build(road: str) -> tuple[Any, str]:
    """(a new estimator of ``road``, a note when it stands in for one): an analytical one, or a
    learned one on the active model (its fallback when that model cannot load)."""
    if road in ESTIMATORS:
        return ESTIMATORS[road](), ""
    if road in LEARNED_ESTIMATORS:
        est = LEARNED_ESTIMATORS[road](fallback=TimeRoofline())
        try:
            est.model()
        except PredictionError as exc:
            fallback = est.fallback_estimator()
            return fallback, (f"best-measured road {road!r} unavailable ({exc}); used "
                              f"{fallback.name}")
        return est, ""
    raise PredictionError(f"best-measured road {road!r} is not an estimator of another name "
                          f"({', '.join([*ESTIMATORS, *LEARNED_ESTIMATORS])})")
