"""``best-measured``: per device kind, the road the accuracy benchmarks measured most accurate.

``roofcast.defaults.GRAPH_ROAD_BY_KIND`` names it (``*``: kinds with no measurement). Rows are
split by ``device_kind``, each part explained by its road and put back in their order; the
``road_part`` column names the road that timed each row. A what-if device keeps its base's kind,
so every part stays monotone (each road passes the invariants). Table and rule:
``benchmarks/road_choice.py``, docs/design/road.md.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from roofcast.defaults import GRAPH_ROAD_BY_KIND
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators.base import AnalyticalEstimator, check_features
from roofcast.predictor.estimators.registry import ESTIMATORS


class ByKind(AnalyticalEstimator):
    """Each device kind's measured-best road (``roads``: kind -> estimator name; None: the
    defaults module's table)."""

    name = "best-measured"

    def __init__(self, roads: Mapping[str, str] | None = None) -> None:
        self.roads = roads

    def road_of(self, kind: str) -> str:
        """The road timing devices of ``kind``."""
        roads = dict(GRAPH_ROAD_BY_KIND if self.roads is None else self.roads)
        return roads.get(kind, roads.get("*", "time-roofline"))

    def road_estimator(self, kind: str) -> AnalyticalEstimator:
        """A new estimator of the road timing devices of ``kind`` (any registered analytical
        estimator but this one)."""
        road = self.road_of(kind)
        roads = [name for name in ESTIMATORS if name != self.name]
        if road not in roads:
            raise PredictionError(f"best-measured road for {kind!r} devices is {road!r}, "
                                  f"not an analytical estimator ({', '.join(roads)})")
        return ESTIMATORS[road]()

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

