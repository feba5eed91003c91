"""Every estimator by name, and the one way pipelines turn a name or object into an estimator.

``ALL_ESTIMATORS``: the analytical estimators (``predictor.estimators``), ``best-measured``
(``predictor.best_measured``), then the learned ones (``predictor.learned.estimator``);
``make_estimator(name, **params)`` builds one (unknown names raise ``PredictionError`` listing
the known ones; ``learned``/``auto`` get a ``TimeRoofline()`` fallback object unless given
another). ``as_estimator(name_or_object)`` is what every pipeline
(``predict_graph``, ``sweep``, ``compare_devices``, ``advise``) calls, so an estimator built with
parameters (``overhead=``, ``curves_path=``, ``model_dir=``) reaches them.

This module sits above both estimator packages (the learned estimators are built on the
analytical ones), so neither package imports the other's registry: no import circle.
"""

from __future__ import annotations

from typing import Any

from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.predictor.best_measured import ByKind
from roofcast.predictor.engine_tables.estimator import EngineTablesEstimator
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimators import ESTIMATORS, EXPLAIN_COLUMNS, AnalyticalEstimator
from roofcast.predictor.estimators.roofline import TimeRoofline
from roofcast.predictor.learned.correction import installed_estimator
from roofcast.predictor.learned.estimator import LEARNED_ESTIMATORS, LearnedEstimator

#: every estimator by name: analytical, the per-kind default, then learned.
ALL_ESTIMATORS: dict[str, type] = {**ESTIMATORS, ByKind.name: ByKind, **LEARNED_ESTIMATORS,
                                   EngineTablesEstimator.name: EngineTablesEstimator}
#: the learned estimators' names (they need a trained model).
LEARNED_NAMES: tuple[str, ...] = (*LEARNED_ESTIMATORS, EngineTablesEstimator.name)


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


def as_estimator(estimator: Any = GRAPH_ESTIMATOR) -> Any:
    """An estimator object: ``estimator`` itself when it is one (has ``explain``), the learned
    estimator on one installed model for ``learned:NAME`` / ``auto:NAME``, else
    ``make_estimator(estimator)``. Every road (graphs, sweeps, serving, plans) calls this."""
    if hasattr(estimator, "explain"):
        return estimator
    if not isinstance(estimator, str):
        raise PredictionError(f"estimator must be a name ({', '.join(estimator_names())}) or an "
                              f"estimator object, got {type(estimator).__name__}")
    installed = installed_estimator(estimator)
    return installed if installed is not None else make_estimator(estimator)


def is_learned(estimator: Any) -> bool:
    """Whether ``estimator`` (name or object) needs a trained model."""
    return isinstance(estimator, LearnedEstimator) or estimator in LEARNED_NAMES


__all__ = ["ALL_ESTIMATORS", "ESTIMATORS", "EXPLAIN_COLUMNS",
           "LEARNED_ESTIMATORS", "LEARNED_NAMES", "AnalyticalEstimator", "as_estimator",
           "estimator_names", "is_learned", "make_estimator"]
