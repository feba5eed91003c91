"""Which runtime a learned model learned, and which of its models a featurized row may use.

A learned efficiency belongs to a (device kind, runtime, op family). A model's metadata maps
*road* -> runtime (``runtimes``), a road being the first part of a model key ``<road>/<family>``:
``<kind>`` for the kind's primary runtime, ``<kind>.<runtime>`` for others (``training_roads``);
a model saved without it is read as ``LEGACY_RUNTIMES``. At prediction (``row_roads``) a row of
kind ``k`` run by runtime ``R`` that learns from ``S`` uses the road of ``(k, R)``, else that of
``(k, S)`` with its own per-kernel floor (``borrowed``), else no learned model (the analytical
fallback for every device alike, with a note) — never another runtime's efficiency.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from roofcast.defaults import LEGACY_RUNTIME_BY_KIND
from roofcast.predictor.errors import PredictionError

#: runtimes of a model saved without the ``runtimes`` key (what the shipped data measured).
LEGACY_RUNTIMES: Mapping[str, str] = LEGACY_RUNTIME_BY_KIND
#: featurized columns the runtime roads read (added by ``predictor.features.featurize``).
RUNTIME_COLUMNS: tuple[str, ...] = ("runtime", "learned_from")
#: separates the kind from a secondary runtime in a road (``gpu.torch-compile``).
ROAD_SEP = "."


def model_runtimes(meta: Mapping[str, Any]) -> dict[str, str]:
    """Road -> runtime of a model's metadata (``LEGACY_RUNTIMES`` when it has none)."""
    found = meta.get("runtimes")
    return dict(LEGACY_RUNTIMES) if found is None else {str(k): str(v) for k, v in found.items()}


def road_kind(road: str) -> str:
    """The device kind of a road (``gpu.torch-compile`` -> ``gpu``)."""
    return road.split(ROAD_SEP, 1)[0]


def road_of(kind: str, runtime: str, runtimes: Mapping[str, str]) -> str | None:
    """The road that learned ``runtime`` on ``kind`` (None when the model has none)."""
    for road, rt in runtimes.items():
        if rt == runtime and road_kind(road) == kind:
            return road
    return None


def runtime_column(X: pd.DataFrame, column: str) -> np.ndarray:
    """Column ``column`` (``runtime`` / ``learned_from``) of a featurized table as strings, an
    empty value (a table featurized without an execution profile: rows measured as they are)
    read as the device kind's default runtime (``LEGACY_RUNTIMES``, the same table as
    ``predictor.runtimes.default_runtime_name``); ``PredictionError`` when the column is missing
    (a table not built by this version's featurize)."""
    if column not in X.columns:
        raise PredictionError(
            f"feature table lacks column {column!r} (the run's execution profile); the learned "
            "estimators need it to pick the efficiencies of the runtime modelled: build the "
            "table with predictor.features.featurize")
    values = X[column].fillna("").astype(str).to_numpy()
    empty = values == ""
    if empty.any():  # rows featurized without a profile: their kind's default runtime
        kinds = X["device_kind"].astype(str).to_numpy()
        values = values.copy()
        values[empty] = [LEGACY_RUNTIMES.get(k, "") for k in kinds[empty]]
    return values


def row_roads(X: pd.DataFrame, runtimes: Mapping[str, str]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(road or '' per row, borrowed flag per row, note per row) — module docstring."""
    kinds = X["device_kind"].astype(str).to_numpy()
    own_rt = runtime_column(X, "runtime")
    from_rt = runtime_column(X, "learned_from")
    n = len(X)
    roads = np.full(n, "", dtype=object)
    borrowed = np.zeros(n, dtype=bool)
    notes = np.full(n, "", dtype=object)
    combos = pd.DataFrame({"k": kinds, "r": own_rt, "s": from_rt})
    for (k, r, s), idx in combos.groupby(["k", "r", "s"], sort=False).indices.items():
        own = road_of(k, r, runtimes)
        if own is not None:
            roads[idx] = own
            continue
        base = road_of(k, s, runtimes)
        if base is not None:
            roads[idx], borrowed[idx] = base, True
            continue
        learned = sorted(rt for road, rt in runtimes.items() if road_kind(road) == k)
        notes[idx] = (f"no learned efficiencies for runtime {r} (learns from {s}) on {k}: the "
                      f"model learned {', '.join(learned) or 'no runtime'} there; analytical "
                      "for every device alike")
    return roads, borrowed, notes


def training_roads(kinds: np.ndarray, runtimes: np.ndarray,
                   primary: Mapping[str, str]) -> tuple[np.ndarray, dict[str, str]]:
    """(road per training row, road -> runtime): a kind's ``primary`` runtime (its default
    runtime when the data has it, else its most measured one) trains road ``<kind>``, any other
    runtime road ``<kind>.<runtime>`` (module docstring)."""
    kinds = np.asarray(kinds, dtype=str)
    runtimes = np.asarray(runtimes, dtype=str)
    roads = np.where(runtimes == np.array([primary[k] for k in kinds], dtype=str), kinds,
                     np.char.add(np.char.add(kinds, ROAD_SEP), runtimes)).astype(object)
    mapping = {str(road): str(rt) for road, rt in
               pd.DataFrame({"road": roads, "rt": runtimes}).drop_duplicates().to_numpy()}
    return roads, dict(sorted(mapping.items()))


def primary_runtimes(kinds: np.ndarray, runtimes: np.ndarray) -> dict[str, str]:
    """Per kind of the training rows: its default runtime (``runtimes.default_runtime_name``)
    when some rows measured it, else the runtime with the most rows."""
    from roofcast.predictor.runtimes import default_runtime_name

    frame = pd.DataFrame({"k": np.asarray(kinds, dtype=str), "r": np.asarray(runtimes, dtype=str)})
    out = {}
    for k, g in frame.groupby("k"):
        default = default_runtime_name(str(k))
        counts = g["r"].value_counts()
        out[str(k)] = default if default in counts.index else str(counts.index[0])
    return out
