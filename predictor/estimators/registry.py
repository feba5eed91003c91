"""The analytical estimators by name: one table, filled once, read by every lookup.

``register(*classes)`` enters each class under its ``name`` (the package ``predictor.estimators``
registers them all, in the order names are listed); ``predictor.estimator_registry`` adds
``best-measured`` (``predictor.best_measured``) and the learned estimators on top.
"""

from __future__ import annotations

from roofcast.predictor.estimators.base import AnalyticalEstimator

#: the analytical estimators by name, in registration order.
ESTIMATORS: dict[str, type[AnalyticalEstimator]] = {}


def register(*classes: type[AnalyticalEstimator]) -> None:
    """Enter each class under its ``name``; a second class under a taken name is an error."""
    for cls in classes:
        taken = ESTIMATORS.setdefault(cls.name, cls)
        if taken is not cls:
            raise ValueError(f"estimator name {cls.name!r} is taken by {taken.__name__}")
