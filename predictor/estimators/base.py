"""Shared machinery of the analytical estimators (scikit-learn contract, no-op ``fit``).

Every estimator consumes the table of ``predictor.features.featurize`` and returns, per row,
seconds. Common terms (vectorised):

* ``compute_s = flops / peak_flops_per_s`` (0 for data/free ops, whose peak is ``inf``);
* ``memory_s = (bytes_read + bytes_written) / mem_bw_Bps`` (unfused, compulsory DRAM traffic);
* ``overhead_s = dispatch_floor_s`` per kernel — the execution profile's per-kernel floor on
  that device (``featurize``), ``launch_overhead_s`` (the device's own) in a table without it —
  0 for ``free`` ops and for rows that neither compute nor move bytes: no kernel is launched.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.estimators.base).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError

EXPLAIN_COLUMNS: tuple[str, ...] = (
    "time_s", "compute_s", "memory_s", "overhead_s", "bound", "lower_s", "upper_s", "estimator",
)
OVERHEAD_MODES: tuple[str, ...] = ("floor", "additive")
REQUIRED_COLUMNS: tuple[str, ...] = (
    "flops", "bytes_read", "bytes_written", "engine", "peak_flops_per_s", "mem_bw_Bps",
    "launch_overhead_s",
)


def check_features(X: pd.DataFrame, extra: tuple[str, ...] = ()) -> None:
    """Raise PredictionError when X is not a featurized table."""
    if not isinstance(X, pd.DataFrame):
        raise PredictionError("estimators take the DataFrame of predictor.features.featurize")
    missing = [c for c in (*REQUIRED_COLUMNS, *extra) if c not in X.columns]
    if missing:
        raise PredictionError(
            f"feature table lacks columns {missing}; build it with predictor.features.featurize"
        )


def overhead_column(X: pd.DataFrame) -> str:
    """``dispatch_floor_s`` when the table has it (the runtime's floor), else
    ``launch_overhead_s``."""
    return "dispatch_floor_s" if "dispatch_floor_s" in X.columns else "launch_overhead_s"


def base_terms(X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute_s, memory_s, overhead_s) arrays of the plain roofline terms."""
    flops = X["flops"].to_numpy(float)
    peak = X["peak_flops_per_s"].to_numpy(float)
    moved = X["bytes_read"].to_numpy(float) + X["bytes_written"].to_numpy(float)
    bw = X["mem_bw_Bps"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(flops > 0, flops / peak, 0.0)
    memory = moved / bw
    launches = (X["engine"].astype(str).to_numpy() != "free") & ((flops > 0) | (moved > 0))
    overhead = np.where(launches, X[overhead_column(X)].to_numpy(float), 0.0)
    return compute, memory, overhead


def with_overhead(core: np.ndarray, overhead: np.ndarray, mode: str) -> np.ndarray:
    """Kernel time ``core`` combined with launch overhead per ``mode`` (module docstring)."""
    if mode not in OVERHEAD_MODES:
        raise PredictionError(f"overhead mode {mode!r} unknown; choose one of {OVERHEAD_MODES}")
    return np.maximum(core, overhead) if mode == "floor" else core + overhead


def bound_label(compute: np.ndarray, memory: np.ndarray, overhead: np.ndarray) -> np.ndarray:
    """'compute' | 'memory' | 'overhead': the largest term.

    Ties: compute over memory over overhead.
    """
    label = np.where(compute >= memory, "compute", "memory").astype(object)
    label[overhead > np.maximum(compute, memory)] = "overhead"
    return label


def road_source(labels: pd.Series) -> np.ndarray:
    """The road of each ``predictor`` label of a learned explain: ``learned``, ``learned@NAME``
    (a user layer, ``learned.layered``), ``learned (transferred)[@NAME]`` or
    ``analytical:<estimator>``."""
    text = labels.astype(str)
    parts = text.str.split(":")
    layer = parts.str[1].fillna("").str.extract(r"(@[^:]*)$", expand=False).fillna("")
    return np.where(text.str.startswith("analytical:"), text, parts.str[0] + layer)


def road_mix(explained: pd.DataFrame, name: str) -> str:
    """The road that timed a table's kernels: ``name`` (an analytical estimator), else each
    ``road_source`` (a composite road: each part's estimator) with its share of the time,
    largest first ("auto: learned 90% + ...", "best-measured: roofline+eff 100%")."""
    if explained.empty:
        return name
    if "predictor" in explained.columns:
        source = road_source(explained["predictor"])
    elif "road_part" in explained.columns:
        source = explained["road_part"].astype(str).to_numpy()  # a composite road's parts
    else:
        return name
    time = explained["time_s"].to_numpy(float)
    total = float(time.sum())
    shares = pd.Series(time).groupby(source).sum()
    shares = shares.sort_values(ascending=False)
    return f"{name}: " + " + ".join(f"{src} {100 * t / total:.0f}%" if total > 0 else src
                                    for src, t in shares.items())


def frame(X: pd.DataFrame, name: str, time: np.ndarray, compute: np.ndarray,
          memory: np.ndarray, overhead: np.ndarray, lower: np.ndarray, upper: np.ndarray,
          bound: np.ndarray | None = None, **extra: np.ndarray) -> pd.DataFrame:
    """Assemble an explain() table (see module docstring for the interval convention)."""
    lower = np.minimum(lower, time)
    upper = np.maximum(upper, time)
    data = {
        "time_s": time, "compute_s": compute, "memory_s": memory, "overhead_s": overhead,
        "bound": bound if bound is not None else bound_label(compute, memory, overhead),
        "lower_s": lower, "upper_s": upper, "estimator": np.full(len(time), name, dtype=object),
        **extra,
    }
    return pd.DataFrame(data, index=X.index)


class Params:
    """scikit-learn's parameter protocol without importing scikit-learn (which costs over a
    second at start-up): constructors store their arguments under their own names, and
    ``get_params`` / ``set_params`` / ``repr`` read them from the constructor's signature, so
    ``sklearn.base.clone`` and grid searches still work."""

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values() if p.name != "self"
                      and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters (with ``deep``, also ``name__param`` of nested estimators)."""
        out: dict[str, Any] = {}
        for name in self._param_names():
            value = getattr(self, name)
            out[name] = value
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update({f"{name}__{k}": v for k, v in value.get_params().items()})
        return out

    def set_params(self, **params: Any) -> Params:
        """Set constructor parameters (``name__param`` reaches a nested estimator)."""
        names = self._param_names()
        for key, value in params.items():
            head, _, rest = key.partition("__")
            if head not in names:
                raise PredictionError(f"{type(self).__name__} has no parameter {head!r}; "
                                      f"its parameters: {', '.join(names) or '(none)'}")
            if rest:
                getattr(self, head).set_params(**{rest: value})
            else:
                setattr(self, head, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__)
                    .parameters.values()}
        shown = [f"{k}={v!r}" for k, v in self.get_params(deep=False).items()
                 if defaults.get(k, inspect.Parameter.empty) is not v
                 and defaults.get(k) != v]
        return f"{type(self).__name__}({', '.join(shown)})"


class AnalyticalEstimator(Params):
    """Base: ``fit`` is a no-op returning self; ``predict`` = ``explain(X)['time_s']``."""

    name = "analytical"

    def fit(self, X: pd.DataFrame, y: object = None) -> AnalyticalEstimator:
        check_features(X)
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return self.explain(X)["time_s"].to_numpy(float)

    def explain(self, X: pd.DataFrame) -> pd.DataFrame:  # pragma: no cover - abstract
        raise NotImplementedError
