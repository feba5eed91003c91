"""XGBoost tree ensembles read from their UBJ files and evaluated in numpy, without xgboost.

Importing xgboost costs ~0.5-2 s (it pulls scipy and scikit-learn); a prediction only walks
trees. ``load_booster`` reads a saved booster (``read_ubj``) into a ``TreeEnsemble`` when it is
a plain one (gbtree, numerical splits, one target, an identity-link objective), else into an
``xgboost.Booster``. The ensemble predicts as XGBoost's CPU predictor does, bit for bit:
``margin = float32(base_score) + Σ_tree leaf`` summed in float32 in tree order, a row going
left when ``x < split`` (float32) and to the default side when ``x`` is missing (NaN).
``predict_booster`` evaluates either kind.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from roofcast.predictor.errors import PredictionError

#: objectives whose prediction is the raw margin (no link function).
IDENTITY_OBJECTIVES = ("reg:squarederror", "reg:absoluteerror", "reg:pseudohubererror")
#: rows above which xgboost's C++ predictor beats the numpy walk, its import included.
NUMPY_MAX_ROWS = 4096
#: nesting deeper than this is not an XGBoost model.
MAX_DEPTH = 32
_SCALARS = {"i": ">i1", "U": ">u1", "I": ">i2", "l": ">i4", "L": ">i8", "d": ">f4", "D": ">f8"}


@dataclass(frozen=True, eq=False)
class TreeEnsemble:
    """A plain XGBoost regression ensemble: trees concatenated, node ids global."""

    feature_names: tuple[str, ...]
    base_margin: np.float32
    roots: np.ndarray  # int64, first node of each tree
    left: np.ndarray  # int64, -1 at a leaf
    right: np.ndarray
    feature: np.ndarray  # int64 split feature (0 at a leaf)
    split: np.ndarray  # float32 split value; the leaf value at a leaf
    default_left: np.ndarray  # bool
    depth: int  # longest root-to-leaf path (edges)
    raw: bytes = field(repr=False)  # the file's bytes, written back by ``save_model``
    cache: dict = field(default_factory=dict, repr=False)  # the xgboost.Booster, once made

    def predict_array(self, A: np.ndarray) -> np.ndarray:
        """float32 predictions for the rows of A (columns ``feature_names``; NaN: missing)."""
        X = np.asarray(A, dtype=np.float32)
        rows = np.arange(len(X))[:, None]
        node = np.broadcast_to(self.roots, (len(X), len(self.roots))).copy()
        for _ in range(self.depth):
            inner = self.left[node] >= 0
            x = X[rows, self.feature[node]]
            go_left = np.where(np.isnan(x), self.default_left[node], x < self.split[node])
            node = np.where(inner, np.where(go_left, self.left[node], self.right[node]), node)
        leaf = self.split[node]
        out = np.full(len(X), self.base_margin, dtype=np.float32)
        for t in range(leaf.shape[1]):  # float32, in tree order, as XGBoost accumulates
            out += leaf[:, t]
        return out

    def save_model(self, path: str) -> None:
        Path(path).write_bytes(self.raw)

    def xgboost(self) -> Any:
        """The same model as an ``xgboost.Booster`` (made once)."""
        if "booster" not in self.cache:
            import xgboost as xgb

            self.cache["booster"] = xgb.Booster(model_file=bytearray(self.raw))
        return self.cache["booster"]


def load_booster(path: Path) -> Any:
    """The booster in ``path``: a ``TreeEnsemble`` when ``plain_ensemble`` can read it, else an
    ``xgboost.Booster``. Raises ``PredictionError`` when neither can."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PredictionError(f"cannot read model file {path}: {exc}") from exc
    ensemble = plain_ensemble(raw)
    if ensemble is not None:
        return ensemble
    import xgboost as xgb

    booster = xgb.Booster()
    try:
        booster.load_model(str(path))  # from the file: xgboost aborts on some bytes
    except xgb.core.XGBoostError as exc:
        raise PredictionError(f"cannot read model file {path}: {exc}") from exc
    return booster


def predict_booster(booster: Any, A: np.ndarray, features: tuple[str, ...]) -> np.ndarray:
    """Predictions of ``booster`` (``TreeEnsemble`` or ``xgboost.Booster``) for the rows of A.
    An ensemble walks its trees in numpy unless xgboost is faster (over ``NUMPY_MAX_ROWS``
    rows) or a feature is infinite (xgboost refuses it, as it always did)."""
    if isinstance(booster, TreeEnsemble):
        if len(A) <= NUMPY_MAX_ROWS and not np.isinf(A).any():
            return booster.predict_array(A)
        booster = booster.xgboost()
    import xgboost as xgb

    return booster.predict(xgb.DMatrix(A, feature_names=list(features)))


def feature_names(raw: bytes) -> tuple[str, ...] | None:
    """The feature names a UBJ booster was saved with, read from the head of the file (XGBoost
    writes ``learner.feature_names`` before the trees); None when it cannot tell."""
    try:
        return _UBJReader(raw).feature_names()
    except (ValueError, KeyError, TypeError, IndexError, struct.error, RecursionError):
        return None


def plain_ensemble(raw: bytes) -> TreeEnsemble | None:
    """``raw`` (a UBJ booster) as a ``TreeEnsemble``, or None when it is anything else or
    malformed (xgboost then reads it, or says what is wrong)."""
    try:
        doc = read_ubj(raw)
        return _ensemble(doc["learner"], raw)
    except (ValueError, KeyError, TypeError, IndexError, struct.error, RecursionError):
        return None


def _ensemble(learner: dict, raw: bytes) -> TreeEnsemble | None:
    params = learner["learner_model_param"]
    booster = learner["gradient_booster"]
    if (learner["objective"]["name"] not in IDENTITY_OBJECTIVES or booster["name"] != "gbtree"
            or params.get("num_target", "1") != "1" or params.get("num_class", "0") != "0"
            or booster["model"]["gbtree_model_param"]["num_parallel_tree"] != "1"
            or "best_iteration" in learner.get("attributes", {})):
        return None
    n_feature = int(params["num_feature"])
    names = tuple(learner.get("feature_names") or ())
    trees = booster["model"]["trees"]
    if not trees or any(int(g) != 0 for g in booster["model"]["tree_info"]):
        return None
    columns = [_tree_columns(t) for t in trees]
    if any(c is None for c in columns):
        return None
    sizes = np.array([len(c[0]) for c in columns])
    left, right, feature, split, default_left = (
        np.concatenate([c[i] for c in columns]).astype(t)
        for i, t in enumerate((np.int64, np.int64, np.int64, np.float32, bool)))
    roots = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    shift, end = np.repeat(roots, sizes), np.repeat(roots + sizes, sizes)
    ids, leaf = np.arange(len(left)), left < 0
    inner_ok = ((left > 0) & (left + shift < end) & (left + shift > ids) & (right > 0)
                & (right + shift < end) & (right + shift > ids) & (feature >= 0)
                & (feature < n_feature))
    if (inner_ok == leaf).any() or (right[leaf] >= 0).any():
        return None  # a child before its parent or outside its tree, or a bad feature
    left, right = np.where(leaf, -1, left + shift), np.where(leaf, -1, right + shift)
    base = np.float32(str(params["base_score"]).strip("[]"))
    return TreeEnsemble(names, base, roots, left, right, np.where(leaf, 0, feature), split,
                        default_left, _depth(roots, left, right), raw)


def _tree_columns(tree: dict) -> tuple | None:
    """(left, right, feature, split, default_left) of one tree (local node ids, as read), or
    None unless it is a tree of numerical splits with one value per leaf."""
    n = int(tree["tree_param"]["num_nodes"])
    if tree["tree_param"].get("size_leaf_vector", "1") not in ("0", "1") or n < 1:
        return None
    cols = tuple(tree[k] for k in ("left_children", "right_children", "split_indices",
                                   "split_conditions", "default_left"))
    split_type = tree.get("split_type", ())
    if (any(not isinstance(c, np.ndarray) or len(c) != n for c in cols)
            or len(split_type) not in (0, n) or np.any(split_type)):
        return None
    return cols


def _depth(roots: np.ndarray, left: np.ndarray, right: np.ndarray) -> int:
    """Edges on the longest root-to-leaf path (children come after their parent: it ends)."""
    depth, frontier = 0, roots
    while (inner := frontier[left[frontier] >= 0]).size:
        frontier, depth = np.concatenate([left[inner], right[inner]]), depth + 1
    return depth


def read_ubj(data: bytes) -> Any:
    """The value UBJSON ``data`` holds (the subset XGBoost writes): objects, arrays (typed and
    counted arrays as numpy arrays), strings, numbers, booleans, null. Raises ValueError."""
    value, end = _UBJReader(bytes(data)).value(0, 0)
    if end != len(data):
        raise ValueError("trailing bytes after the UBJ value")
    return value


class _UBJReader:
    """Recursive-descent UBJSON reader over one bytes object (``read_ubj``)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def value(self, pos: int, depth: int, marker: int | None = None) -> tuple[Any, int]:
        data = self.data
        if depth > MAX_DEPTH:
            raise ValueError("UBJ nested too deeply")
        if marker is None:
            marker, pos = data[pos], pos + 1
        fmt = _STRUCTS.get(marker)
        if fmt is not None:
            return fmt.unpack_from(data, pos)[0], pos + fmt.size
        if marker == 0x53:  # S
            n, pos = self.length(pos)
            return data[pos:pos + n].decode(), pos + n
        if marker == 0x7B:  # {
            return self.object(pos, depth)
        if marker == 0x5B:  # [
            return self.array(pos, depth)
        if marker in _CONSTANTS:
            return _CONSTANTS[marker], pos
        raise ValueError(f"unknown UBJ marker {marker!r}")

    def length(self, pos: int) -> tuple[int, int]:
        fmt = _INTS.get(self.data[pos])
        if fmt is None:
            raise ValueError("bad UBJ length marker")
        n = fmt.unpack_from(self.data, pos + 1)[0]
        pos += 1 + fmt.size
        if n < 0 or pos + n > len(self.data):
            raise ValueError("bad UBJ length")
        return n, pos

    def array(self, pos: int, depth: int) -> tuple[Any, int]:
        data, kind = self.data, None
        if data[pos] == 0x24:  # $: typed
            kind, pos = data[pos + 1], pos + 2
        if data[pos] != 0x23:  # #: counted
            if kind is not None:
                raise ValueError("typed UBJ array without a count")
            items = []
            while data[pos] != 0x5D:  # ]
                item, pos = self.value(pos, depth + 1)
                items.append(item)
            return items, pos + 1
        n, pos = self.length(pos + 1)
        if kind in _STRUCTS:
            end = pos + n * _STRUCTS[kind].size
            if end > len(data):
                raise ValueError("UBJ array past the end")
            return np.frombuffer(data, _DTYPES[kind], n, pos), end
        items = []
        for _ in range(n):
            item, pos = self.value(pos, depth + 1, kind)
            items.append(item)
        return items, pos

    def feature_names(self) -> tuple[str, ...] | None:
        """``learner.feature_names``, reading the learner's entries only up to it."""
        data, pos = self.data, 1
        if data[0] != 0x7B:
            return None
        n, pos = self.length(pos)
        if data[pos:pos + n] != b"learner" or data[pos + n] != 0x7B:
            return None
        pos += n + 1
        while data[pos] != 0x7D:
            n, pos = self.length(pos)
            key = data[pos:pos + n].decode()
            value, pos = self.value(pos + n, 2)
            if key == "feature_names":
                return tuple(value) if isinstance(value, list) else None
        return None

    def object(self, pos: int, depth: int) -> tuple[dict, int]:
        data, out = self.data, {}
        while data[pos] != 0x7D:  # }
            n, pos = self.length(pos)
            key = data[pos:pos + n].decode()
            out[key], pos = self.value(pos + n, depth + 1)
        return out, pos + 1


_STRUCTS = {ord(k): struct.Struct(v.replace("i1", "b").replace("u1", "B").replace("i2", "h")
                                    .replace("i4", "i").replace("i8", "q").replace("f4", "f")
                                    .replace("f8", "d")) for k, v in _SCALARS.items()}
_DTYPES = {ord(k): np.dtype(v) for k, v in _SCALARS.items()}
_INTS = {m: _STRUCTS[m] for m in map(ord, "iUIlL")}
_CONSTANTS = {ord("T"): True, ord("F"): False, ord("Z"): None}
