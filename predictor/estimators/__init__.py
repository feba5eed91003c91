"""Per-op estimators behind one scikit-learn-style interface, passed around as objects.

``ESTIMATORS`` maps an analytical estimator's name to its class, ``ALL_ESTIMATORS`` adds
``learned``/``auto``;
``make_estimator(name, **params)`` builds one (unknown names raise ``PredictionError`` listing
the known ones; ``learned``/``auto`` get a ``TimeRoofline()`` fallback object unless given
another). ``as_estimator(name_or_object)`` is what every pipeline (``predict_graph``, ``sweep``,
``compare_devices``, ``advise``) calls, so an estimator built with parameters (``overhead=``,
``curves_path=``, ``model_dir=``) reaches them. Every estimator takes the table of
``predictor.features.featurize``: ``fit(X, y) -> self`` (a no-op for the analytical ones; the
learned ones train), ``predict(X) -> seconds``, ``explain(X) -> DataFrame`` (time_s, compute_s,
memory_s, overhead_s, bound, lower_s, upper_s, estimator, plus estimator-specific columns).
Formulas: see each module's docstring.
"""

from __future__ import annotations

from typing import Any

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators.base import EXPLAIN_COLUMNS, AnalyticalEstimator
from roofcast.predictor.estimators.roofline import NoOverlap, Roofline, RooflineEff, TimeRoofline
from roofcast.predictor.estimators.traffic import Traffic
from roofcast.predictor.learned.estimator import LEARNED_ESTIMATORS, LearnedEstimator

#: the analytical estimators by name.
ESTIMATORS: dict[str, type[AnalyticalEstimator]] = {
    cls.name: cls for cls in (Roofline, NoOverlap, TimeRoofline, RooflineEff, Traffic)
}
#: every estimator by name: analytical, then learned.
ALL_ESTIMATORS: dict[str, type] = {**ESTIMATORS, **LEARNED_ESTIMATORS}
#: the learned estimators' names (they need a trained model).
LEARNED_NAMES: tuple[str, ...] = tuple(LEARNED_ESTIMATORS)
DEFAULT_ESTIMATOR = TimeRoofline.name


def estimator_names() -> tuple[str, ...]:
    """Every name ``make_estimator`` accepts: analytical, then learned."""
    return tuple(ALL_ESTIMATORS)


def make_estimator(name: str, **params: Any) -> Any:
    """A new estimator by registry name; ``params`` go to its constructor. A learned one
    without a ``fallback`` gets ``TimeRoofline()``."""
    cls = ALL_ESTIMATORS.get(name)
    if cls is None:
        raise PredictionError(
            f"unknown estimator {name!r}; choose one of: {', '.join(estimator_names())}"
        )
    if issubclass(cls, LearnedEstimator) and params.get("fallback") is None:
        params = {**params, "fallback": TimeRoofline()}
    try:
        return cls(**params)
    except TypeError as exc:
        raise PredictionError(f"estimator {name!r} does not take {sorted(params)}: {exc}") from exc


def as_estimator(estimator: Any = DEFAULT_ESTIMATOR) -> Any:
    """An estimator object: ``estimator`` itself when it is one (has ``explain``), else
    ``make_estimator(estimator)``."""
    if hasattr(estimator, "explain"):
        return estimator
    if not isinstance(estimator, str):
        raise PredictionError(f"estimator must be a name ({', '.join(estimator_names())}) or an "
                              f"estimator object, got {type(estimator).__name__}")
    return make_estimator(estimator)


def is_learned(estimator: Any) -> bool:
    """Whether ``estimator`` (name or object) needs a trained model."""
    return isinstance(estimator, LearnedEstimator) or estimator in LEARNED_NAMES


__all__ = ["ALL_ESTIMATORS", "DEFAULT_ESTIMATOR", "ESTIMATORS", "EXPLAIN_COLUMNS",
           "LEARNED_ESTIMATORS", "LEARNED_NAMES", "AnalyticalEstimator", "as_estimator",
           "estimator_names", "is_learned", "make_estimator"]
