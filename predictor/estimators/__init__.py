"""Analytical per-op estimators behind one scikit-learn-style interface.

``ESTIMATORS`` maps a name to its class; ``make_estimator(name)`` builds one (unknown names raise
``PredictionError`` listing the known ones). Every estimator takes the table of
``predictor.features.featurize``: ``fit(X) -> self`` (no-op), ``predict(X) -> seconds``,
``explain(X) -> DataFrame`` (time_s, compute_s, memory_s, overhead_s, bound, lower_s, upper_s,
estimator, plus estimator-specific columns). Formulas: see each module's docstring.
"""

from __future__ import annotations

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators.base import EXPLAIN_COLUMNS, AnalyticalEstimator
from roofcast.predictor.estimators.roofline import NoOverlap, Roofline, RooflineEff, TimeRoofline
from roofcast.predictor.estimators.traffic import Traffic

ESTIMATORS: dict[str, type[AnalyticalEstimator]] = {
    cls.name: cls for cls in (Roofline, NoOverlap, TimeRoofline, RooflineEff, Traffic)
}


#: learned estimators (``predictor.learned.estimator``), imported on first use.
LEARNED_NAMES: tuple[str, ...] = ("learned", "auto")


def estimator_names() -> tuple[str, ...]:
    """Every name ``make_estimator`` accepts: analytical, then learned."""
    return (*ESTIMATORS, *LEARNED_NAMES)


def make_estimator(name: str, **params: object) -> AnalyticalEstimator:
    """A new estimator by registry name (``ESTIMATORS``, or ``learned``/``auto``)."""
    cls = ESTIMATORS.get(name)
    if cls is None and name in LEARNED_NAMES:
        from roofcast.predictor.learned.estimator import LEARNED_ESTIMATORS

        cls = LEARNED_ESTIMATORS[name]
    if cls is None:
        raise PredictionError(
            f"unknown estimator {name!r}; choose one of: {', '.join(estimator_names())}"
        )
    return cls(**params)


__all__ = ["ESTIMATORS", "EXPLAIN_COLUMNS", "LEARNED_NAMES", "AnalyticalEstimator",
           "estimator_names", "make_estimator"]
