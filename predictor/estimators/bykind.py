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
from roofcast.predictor.estimators.roofline import NoOverlap, Roofline, RooflineEff, TimeRoofline
from roofcast.predictor.estimators.traffic import Traffic


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

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:
        check_features(X, ("device_kind",))
        kinds = X["device_kind"].astype(str).to_numpy()
        parts, order = [], []
        for kind in pd.unique(kinds):
            road = self.road_of(kind)
            if road not in ESTIMATORS or road == self.name:
                raise PredictionError(f"best-measured road for {kind!r} devices is {road!r}, "
                                      f"not an analytical estimator ({', '.join(ESTIMATORS)})")
            rows = np.flatnonzero(kinds == kind)
            parts.append(ESTIMATORS[road]().explain(X.iloc[rows]))
            order.append(rows)
        if not parts:
            parts, order = [ESTIMATORS[self.road_of("*")]().explain(X)], [np.arange(len(X))]
        out = pd.concat(parts)
        out = out.iloc[np.argsort(np.concatenate(order), kind="stable")]
        return out.assign(road_part=out["estimator"], estimator=self.name)


#: the roads a kind may name (the analytical estimators but this one).
ESTIMATORS: dict[str, type[AnalyticalEstimator]] = {
    cls.name: cls for cls in (Roofline, NoOverlap, TimeRoofline, RooflineEff, Traffic)}
