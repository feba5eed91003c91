"""The analytical per-op estimators behind one scikit-learn-style interface.

``ESTIMATORS`` maps an analytical estimator's name to its class (the registry of every
estimator, learned ones included, with ``make_estimator``/``as_estimator``, is
``predictor.estimator_registry``). Every estimator takes the table of
``predictor.features.featurize``: ``fit(X, y) -> self`` (a no-op for the analytical ones),
``predict(X) -> seconds``, ``explain(X) -> DataFrame`` (time_s, compute_s, memory_s,
overhead_s, bound, lower_s, upper_s, estimator, plus estimator-specific columns). Formulas: see
each module's docstring.
"""

from __future__ import annotations

from roofcast.predictor.estimators.base import EXPLAIN_COLUMNS, AnalyticalEstimator
from roofcast.predictor.estimators.registry import ESTIMATORS, register
from roofcast.predictor.estimators.roofline import NoOverlap, Roofline, RooflineEff, TimeRoofline
from roofcast.predictor.estimators.traffic import Traffic

register(Roofline, NoOverlap, TimeRoofline, RooflineEff, Traffic)

__all__ = ["ESTIMATORS", "EXPLAIN_COLUMNS", "AnalyticalEstimator"]
