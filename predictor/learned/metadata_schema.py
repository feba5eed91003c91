"""A learned model folder's metadata, checked before any of it is used.

A folder may come from someone else, be edited by hand, or be damaged; nothing in it is trusted.
``read_metadata`` (``fitted.read_json``): ``metadata.json`` must be a regular file inside the
folder (no FIFO, no symlink out; ``hw_catalog.confined``) of at most ``MAX_METADATA_BYTES``,
strict UTF-8 JSON
(no NaN/Infinity) holding an object. ``check_metadata``: the schema of what ``load`` uses —
types, finite numbers in sane ranges (log10 quantities within ``LOG10_LIMIT`` decades, others
within ``PARAM_LIMIT``), consistent lengths, booster ``file`` a plain ``.ubj`` name of a regular
file inside the folder. Every problem raises ``PredictionError`` ("model folder X: metadata
field Y ...; retrain with `roofcast train`"). Field-by-field schema: ``docs/design/fitted.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofcast.hw_catalog.confined import confined_file
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.fitted import MAX_METADATA_BYTES as MAX_METADATA_BYTES  # re-exported
from roofcast.predictor.fitted import read_json
from roofcast.predictor.learned.model import CANDIDATES
from roofcast.predictor.learned.ood import DEVICE_VECTOR

MAX_MODEL_FILE_BYTES = 256 * 2**20
"""Largest booster file accepted (the shipped ones are ~0.4 MB)."""
MAX_FLOOR_S = 1.0
"""Largest per-kernel harness floor (s); the shipped ones are 0-0.3 ms."""
LOG10_LIMIT = 12.0
"""Bound on log10 quantities (decades): quantiles, bin edges, constants, factors."""
PARAM_LIMIT = 1e9
"""Bound on other numbers: ridge parameters, training ranges, device vectors."""
MIN_RIDGE_SCALE = 1e-12
"""Smallest standardisation scale (training replaces smaller ones by 1)."""
KEY_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
ROAD_PATTERN = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_.-]+)?$")
RUNTIME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
RETRAIN = "retrain with `roofcast train`"


class _SchemaError(Exception):
    """One schema violation: the field (dotted path) and what is wrong with it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(field, problem)
        self.field, self.problem = field, problem


def read_metadata(path: Path) -> dict[str, Any]:
    """The parsed ``metadata.json`` at ``path`` (``fitted.read_json``); ``PredictionError``
    saying to retrain else."""
    try:
        return read_json(path, "model metadata file")
    except PredictionError as exc:
        raise PredictionError(f"model {exc}; {RETRAIN}") from None


def check_metadata(meta: Mapping[str, Any], folder: Path) -> None:
    """Raise ``PredictionError`` for the first schema violation of ``meta`` (module docstring)."""
    try:
        n_features = len(_features(meta.get("features"), "features"))
        models = _obj(meta.get("models"), "models", nonempty=True)
        for key, desc in models.items():
            _model(key, desc, n_features, folder, f"models[{key!r}]")
        for key, d in _obj(meta.get("intervals"), "intervals").items():
            _intervals(key, d, f"intervals[{key!r}]")
        for key, d in _obj(meta.get("ranges"), "ranges").items():
            _ranges(key, d, f"ranges[{key!r}]")
        for kind, d in _obj(meta.get("devices"), "devices").items():
            _devices(d, f"devices[{kind!r}]")
        for kind, d in _obj(meta.get("e2e", {}), "e2e").items():
            _e2e(d, f"e2e[{kind!r}]")
        if "runtimes" in meta:
            _runtimes(_obj(meta["runtimes"], "runtimes", nonempty=True), models)
    except _SchemaError as bad:
        raise PredictionError(f"model folder {folder}: metadata field {bad.field} {bad.problem}; "
                              f"{RETRAIN}") from None


# ---------------------------------------------------------------------------- sections
def _features(x: Any, field: str) -> list[str]:
    names = _list(x, field, nonempty=True)
    for i, name in enumerate(names):
        _str(name, f"{field}[{i}]")
    if len(set(names)) != len(names):
        raise _SchemaError(field, "names a feature twice")
    return names


def _model(key: str, desc: Any, n_features: int, folder: Path, field: str) -> None:
    _model_key(key, field)
    desc = _obj(desc, field)
    if desc.get("key") != key:
        raise _SchemaError(f"{field}.key",
                           f"must equal the model key {key!r}, got {desc.get('key')!r}")
    candidate = desc.get("candidate")
    if candidate not in CANDIDATES:
        raise _SchemaError(f"{field}.candidate", f"must be one of {', '.join(CANDIDATES)}, "
                                         f"got {candidate!r}")
    _number(desc.get("floor_s"), f"{field}.floor_s", 0.0, MAX_FLOOR_S)
    if "y_range" in desc:
        lo, hi = _numbers(desc["y_range"], f"{field}.y_range", LOG10_LIMIT, length=2)
        if lo > hi:
            raise _SchemaError(f"{field}.y_range", f"has min {lo!r} above max {hi!r}")
    if candidate == "xgboost":
        model_file(folder, desc.get("file"), f"{field}.file")
    elif candidate == "ridge":
        _ridge(_obj(desc.get("linear"), f"{field}.linear"), n_features, f"{field}.linear")
    else:
        linear = _obj(desc.get("linear"), f"{field}.linear")
        _number(linear.get("constant"), f"{field}.linear.constant", -LOG10_LIMIT, LOG10_LIMIT)


def _ridge(linear: Mapping[str, Any], n_features: int, field: str) -> None:
    _numbers(linear.get("impute"), f"{field}.impute", PARAM_LIMIT, length=n_features)
    indicators = _list(linear.get("indicators"), f"{field}.indicators")
    for i, j in enumerate(indicators):
        _int(j, f"{field}.indicators[{i}]", 0, n_features - 1)
    if indicators != sorted(set(indicators)):
        raise _SchemaError(f"{field}.indicators", "must be distinct and ascending")
    width = n_features + len(indicators)
    _numbers(linear.get("mean"), f"{field}.mean", PARAM_LIMIT, length=width)
    _numbers(linear.get("coef"), f"{field}.coef", PARAM_LIMIT, length=width)
    scale = _numbers(linear.get("scale"), f"{field}.scale", PARAM_LIMIT, length=width)
    if any(s < MIN_RIDGE_SCALE for s in scale):
        raise _SchemaError(f"{field}.scale", f"must be >= {MIN_RIDGE_SCALE:g} (it divides)")
    _number(linear.get("intercept"), f"{field}.intercept", -LOG10_LIMIT, LOG10_LIMIT)


def _intervals(key: str, d: Any, field: str) -> None:
    _model_key(key, field)
    d = _obj(d, field)
    edges = _numbers(d.get("edges"), f"{field}.edges", LOG10_LIMIT)
    if edges != sorted(edges):
        raise _SchemaError(f"{field}.edges", "must be ascending")
    bins = len(edges) + 1
    q_lo = _numbers(d.get("q_lo"), f"{field}.q_lo", LOG10_LIMIT, length=bins, null=-math.inf)
    q_hi = _numbers(d.get("q_hi"), f"{field}.q_hi", LOG10_LIMIT, length=bins, null=math.inf)
    _ordered(q_lo, q_hi, field)
    if "alpha" in d:
        _alpha(d["alpha"], f"{field}.alpha")


def _ranges(key: str, d: Any, field: str) -> None:
    _model_key(key, field)
    for name, v in _obj(d, field).items():
        f = f"{field}[{name!r}]"
        v = _list(v, f)
        if len(v) not in (2, 3):
            raise _SchemaError(f, f"must be [min, max] or [min, max, always], got {len(v)} items")
        lo, hi = _numbers(v[:2], f, PARAM_LIMIT)
        if lo > hi:
            raise _SchemaError(f, f"has min {lo!r} above max {hi!r}")
        if len(v) == 3 and not isinstance(v[2], bool):
            raise _SchemaError(f, f"third item must be true or false, got {v[2]!r}")


def _runtimes(runtimes: Mapping[str, Any], models: Mapping[str, Any]) -> None:
    for road, name in runtimes.items():
        if not ROAD_PATTERN.match(road):
            raise _SchemaError(f"runtimes[{road!r}]", "is not a road (a device kind, or "
                                                     "'kind.runtime')")
        if not isinstance(name, str) or not RUNTIME_PATTERN.match(name):
            raise _SchemaError(f"runtimes[{road!r}]", f"must be a runtime name (1-64 letters, "
                                                     f"digits, '-', '_', '.'), got {_short(name)}")
    pairs = [(road.split(".", 1)[0], name) for road, name in runtimes.items()]
    if len(set(pairs)) != len(pairs):
        raise _SchemaError("runtimes", "names one runtime twice for a device kind")
    for key in models:
        if key.split("/", 1)[0] not in runtimes:
            raise _SchemaError("runtimes", f"has no runtime for model {key!r} (road "
                                           f"{key.split('/', 1)[0]!r})")


def _devices(d: Any, field: str) -> None:
    d = _obj(d, field)
    if d.get("features") != list(DEVICE_VECTOR):
        raise _SchemaError(f"{field}.features", f"must be {list(DEVICE_VECTOR)}, got "
                                        f"{_short(d.get('features'))}")
    vectors = _list(d.get("vectors"), f"{field}.vectors")
    for i, v in enumerate(vectors):
        _numbers(v, f"{field}.vectors[{i}]", PARAM_LIMIT, length=len(DEVICE_VECTOR))
    ids = _list(d.get("ids"), f"{field}.ids")
    if len(ids) != len(vectors):
        raise _SchemaError(f"{field}.ids", f"must have one id per vector ({len(vectors)}), "
                                   f"got {len(ids)}")
    for i, dev in enumerate(ids):
        _str(dev, f"{field}.ids[{i}]")


def _e2e(d: Any, field: str) -> None:
    d = _obj(d, field)
    _number(d.get("log_factor"), f"{field}.log_factor", -LOG10_LIMIT, LOG10_LIMIT)
    q_lo = _number(d.get("q_lo"), f"{field}.q_lo", -LOG10_LIMIT, LOG10_LIMIT, null=-math.inf)
    q_hi = _number(d.get("q_hi"), f"{field}.q_hi", -LOG10_LIMIT, LOG10_LIMIT, null=math.inf)
    _ordered([q_lo], [q_hi], field)
    _int(d.get("runs"), f"{field}.runs", 1, 10**9)
    if "alpha" in d:
        _alpha(d["alpha"], f"{field}.alpha")


def model_file(folder: Path, name: Any, field: str = "file") -> Path:
    """The booster file ``name`` of ``folder``: a plain ``.ubj`` file name naming a regular
    file inside the folder (module docstring)."""
    if not isinstance(name, str) or not name:
        raise _SchemaError(field, f"must be a file name, got {_short(name)}")
    if ("/" in name or "\\" in name or "\x00" in name or name in (".", "..")
            or not name.endswith(".ubj")):
        raise _SchemaError(field, f"must be a plain file name ending in .ubj inside the model "
                          f"folder (no folders, no '..'), got {name!r}")
    path = folder / name
    try:
        return confined_file(path, folder, max_bytes=MAX_MODEL_FILE_BYTES, what="model file",
                             error=PredictionError)
    except PredictionError as exc:
        raise _SchemaError(field, f"{name!r}: {exc}") from None


# ---------------------------------------------------------------------------- primitives
def _short(x: Any) -> str:
    if x is None:
        return "nothing (missing or null)"
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _obj(x: Any, field: str, nonempty: bool = False) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise _SchemaError(field, f"must be an object, got {_short(x)}")
    if nonempty and not x:
        raise _SchemaError(field, "must not be empty")
    return x


def _list(x: Any, field: str, nonempty: bool = False) -> list[Any]:
    if not isinstance(x, list):
        raise _SchemaError(field, f"must be a list, got {_short(x)}")
    if nonempty and not x:
        raise _SchemaError(field, "must not be empty")
    return x


def _str(x: Any, field: str) -> str:
    if not isinstance(x, str) or not x:
        raise _SchemaError(field, f"must be a non-empty string, got {_short(x)}")
    return x


def _model_key(key: str, field: str) -> None:
    if not KEY_PATTERN.match(key):
        raise _SchemaError(field, "is not a model key of the form 'kind/family'")


def _number(x: Any, field: str, lo: float, hi: float, null: float | None = None) -> float:
    """A finite number in [lo, hi]; ``null`` (when given) is what a JSON null stands for."""
    if x is None and null is not None:
        return null
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise _SchemaError(field, f"must be a number, got {_short(x)}")
    try:
        value = float(x)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value) or not lo <= value <= hi:
        raise _SchemaError(field, f"must be a finite number in [{lo:g}, {hi:g}], got {_short(x)}")
    return value


def _numbers(x: Any, field: str, limit: float, length: int | None = None,
             null: float | None = None) -> list[float]:
    items = _list(x, field)
    if length is not None and len(items) != length:
        raise _SchemaError(field, f"must have {length} numbers, got {len(items)}")
    return [_number(v, f"{field}[{i}]", -limit, limit, null) for i, v in enumerate(items)]


def _int(x: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= hi:
        raise _SchemaError(field, f"must be an integer in [{lo}, {hi}], got {_short(x)}")
    return x


def _alpha(x: Any, field: str) -> None:
    if _number(x, field, 0.0, 1.0) >= 1.0:
        raise _SchemaError(field, f"must be below 1, got {x!r}")


def _ordered(lo: list[float], hi: list[float], field: str) -> None:
    for i, (a, b) in enumerate(zip(lo, hi, strict=True)):
        if a > b:
            raise _SchemaError(f"{field}.q_lo[{i}]", f"{a!r} is above q_hi {b!r}")
