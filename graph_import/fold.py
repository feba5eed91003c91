"""Numpy evaluation of shape-computation ops, for folding shape subgraphs to constants.

Exporters compute reshape targets at run time (``Shape -> Gather -> Unsqueeze -> Concat ->
Reshape``). Once the input dims are bound these subgraphs have known values; evaluating them
here lets ONNX shape inference see constant ``shape`` inputs and produce concrete shapes.

One registry dict keyed by op type: ``FOLDERS[op_type](attrs, inputs) -> outputs`` where
``inputs`` are numpy arrays (None for an omitted optional input) and ``attrs`` plain python
values. A folder raises ``FoldError`` when it cannot evaluate (unsupported attribute combination);
the caller then leaves the node to shape inference. Only ai.onnx ops are folded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from onnx import helper, numpy_helper

Array = np.ndarray
Folder = Callable[[dict[str, Any], list[Array | None]], list[Array]]

FOLDERS: dict[str, Folder] = {}

#: Largest value a folder computes. Folders whose output size depends on input *values*
#: (Range, ConstantOfShape, Expand, Tile, broadcasting ops, Gather) check it before allocating,
#: so a hostile model cannot make the import allocate terabytes.
MAX_FOLD_ELEMENTS = 1 << 16


class FoldError(Exception):
    """A node could not be evaluated with numpy; it stays in the graph."""


def _limit(shape: Sequence[int]) -> tuple[int, ...]:
    """``shape`` as ints, or FoldError when it is negative or holds more than MAX_FOLD_ELEMENTS."""
    dims = tuple(int(d) for d in shape)
    n = 1
    for d in dims:
        if d < 0:
            raise FoldError(f"negative dim in {dims}")
        n *= d
    if n > MAX_FOLD_ELEMENTS:
        raise FoldError(f"value of shape {dims} is too large to fold")
    return dims


def folder(*op_types: str) -> Callable[[Folder], Folder]:
    """Register ``fn`` as the numpy evaluation of each op type."""

    def deco(fn: Folder) -> Folder:
        for op_type in op_types:
            if op_type in FOLDERS:
                raise RuntimeError(f"folder for {op_type} registered twice")
            FOLDERS[op_type] = fn
        return fn

    return deco


def _axes(attrs: dict[str, Any], inputs: Sequence[Array | None], pos: int) -> list[int] | None:
    """Axes from the attribute (old opsets) or from input ``pos`` (new opsets)."""
    if len(inputs) > pos and inputs[pos] is not None:
        return [int(a) for a in np.asarray(inputs[pos]).reshape(-1)]
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    return None


@folder("Identity")
def _identity(attrs, inputs):
    return [inputs[0]]


@folder("Constant")
def _constant(attrs, inputs):
    if "value" in attrs:
        return [np.asarray(attrs["value"])]
    for key, dtype in (
        ("value_int", np.int64), ("value_ints", np.int64),
        ("value_float", np.float32), ("value_floats", np.float32),
    ):
        if key in attrs:
            return [np.asarray(attrs[key], dtype=dtype)]
    raise FoldError("Constant without a numeric value")


@folder("Cast")
def _cast(attrs, inputs):
    return [inputs[0].astype(helper.tensor_dtype_to_np_dtype(int(attrs["to"])))]


@folder("CastLike")
def _cast_like(attrs, inputs):
    return [inputs[0].astype(inputs[1].dtype)]


@folder("Gather")
def _gather(attrs, inputs):
    data, idx = inputs[0], inputs[1].astype(np.int64)
    axis = int(attrs.get("axis", 0))
    _limit((*data.shape[:axis], *idx.shape, *data.shape[axis + 1 :]) if data.ndim else idx.shape)
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    return [np.take(data, idx, axis=axis)]


@folder("GatherElements")
def _gather_elements(attrs, inputs):
    data, idx = inputs[0], inputs[1].astype(np.int64)
    axis = int(attrs.get("axis", 0))
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    return [np.take_along_axis(data, idx, axis=axis)]


@folder("Unsqueeze")
def _unsqueeze(attrs, inputs):
    axes = _axes(attrs, inputs, 1)
    if axes is None:
        raise FoldError("Unsqueeze without axes")
    out = inputs[0]
    rank = out.ndim + len(axes)
    for a in sorted(a + rank if a < 0 else a for a in axes):
        out = np.expand_dims(out, a)
    return [out]


@folder("Squeeze")
def _squeeze(attrs, inputs):
    axes = _axes(attrs, inputs, 1)
    data = inputs[0]
    if axes is None:
        return [np.squeeze(data)]
    return [np.squeeze(data, axis=tuple(a + data.ndim if a < 0 else a for a in axes))]


@folder("Concat")
def _concat(attrs, inputs):
    parts = [x for x in inputs if x is not None]
    return [np.concatenate(parts, axis=int(attrs.get("axis", 0)))]


@folder("Range")
def _range(attrs, inputs):
    start, limit, delta = (np.asarray(x).reshape(()) for x in inputs[:3])
    if delta == 0:
        raise FoldError("Range with delta 0")
    _limit((max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0),))
    return [np.arange(start, limit, delta, dtype=np.asarray(inputs[0]).dtype)]


@folder("ConstantOfShape")
def _constant_of_shape(attrs, inputs):
    value = np.asarray(attrs["value"]).reshape(-1) if "value" in attrs else np.zeros(1, np.float32)
    return [np.full(_limit(inputs[0].reshape(-1)), value[0], dtype=value.dtype)]


@folder("Slice")
def _slice(attrs, inputs):
    data = inputs[0]
    if len(inputs) > 1:  # opset >= 10: starts, ends, axes, steps as inputs
        starts, ends = inputs[1].reshape(-1), inputs[2].reshape(-1)
        axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else None
        steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else None
    else:
        starts, ends = np.asarray(attrs["starts"]), np.asarray(attrs["ends"])
        axes, steps = attrs.get("axes"), None
    axes = list(range(len(starts))) if axes is None else [int(a) for a in np.reshape(axes, -1)]
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.reshape(steps, -1)]
    index = [slice(None)] * data.ndim
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        a = a + data.ndim if a < 0 else a
        n = data.shape[a]
        s, e = int(s), int(e)
        # ONNX clamps huge sentinels (INT64_MAX / INT64_MIN) to the dim; python slices do too
        s, e = max(min(s, n), -n - 1), max(min(e, n), -n - 1)
        index[a] = slice(s, None if (st < 0 and e < -n) else e, st)
    return [data[tuple(index)]]


def _binary(fn: Callable[[Array, Array], Array]) -> Folder:
    def fold(attrs, inputs):
        _limit(np.broadcast_shapes(inputs[0].shape, inputs[1].shape))
        return [np.asarray(fn(inputs[0], inputs[1]))]

    return fold


def _int_div(a: Array, b: Array) -> Array:
    """ONNX Div on integers truncates toward zero (like C), unlike numpy's floor division."""
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        if np.any(b == 0):
            raise FoldError("integer division by zero")
        q = np.abs(a) // np.abs(b)
        return (q * np.sign(a) * np.sign(b)).astype(np.result_type(a, b))
    return np.asarray(a / b, dtype=np.result_type(a, b))


def _no_overflow(exact: Array, a: Array, b: Array, fn: Callable[[Array, Array], Array]) -> Array:
    """Integer results must match the float computation: numpy integers wrap silently, and a
    wrapped shape value (batch x sequence x ... beyond int64) would be a wrong shape."""
    if exact.dtype.kind in "iu":
        approx = fn(a.astype(np.float64), b.astype(np.float64))
        if np.any(np.abs(approx) > 2.0**62) or np.any(
            np.abs(approx - exact) > 1e-6 * np.abs(approx) + 1
        ):
            raise FoldError("integer overflow while folding")
    return exact


def _same_dtype(fn: Callable[[Array, Array], Array]) -> Callable[[Array, Array], Array]:
    def op(a: Array, b: Array) -> Array:
        exact = np.asarray(fn(a, b)).astype(np.result_type(a, b))
        return _no_overflow(exact, a, b, fn)

    return op


for _op, _fn in {
    "Add": _same_dtype(np.add),
    "Sub": _same_dtype(np.subtract),
    "Mul": _same_dtype(np.multiply),
    "Div": _int_div,
    "Pow": lambda a, b: np.power(a, b).astype(a.dtype),
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
    "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or,
}.items():
    FOLDERS[_op] = _binary(_fn)


@folder("Mod")
def _mod(attrs, inputs):
    a, b = inputs
    _limit(np.broadcast_shapes(a.shape, b.shape))
    if np.issubdtype(b.dtype, np.integer) and np.any(b == 0):
        raise FoldError("modulo by zero")
    fn = np.fmod if int(attrs.get("fmod", 0)) else np.mod
    return [fn(a, b).astype(np.result_type(a, b))]


def _unary(fn: Callable[[Array], Array]) -> Folder:
    def fold(attrs, inputs):
        return [np.asarray(fn(inputs[0])).astype(inputs[0].dtype, copy=False)]

    return fold


for _op, _fn in {
    "Neg": np.negative,
    "Abs": np.abs,
    "Sign": np.sign,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Sqrt": np.sqrt,
    "Reciprocal": np.reciprocal,
    "Relu": lambda x: np.maximum(x, 0),
}.items():
    FOLDERS[_op] = _unary(_fn)


@folder("Not")
def _not(attrs, inputs):
    return [np.logical_not(inputs[0])]


@folder("Where")
def _where(attrs, inputs):
    cond, a, b = inputs
    _limit(np.broadcast_shapes(cond.shape, a.shape, b.shape))
    return [np.where(cond.astype(bool), a, b).astype(np.result_type(a, b))]


def _variadic_folder(fn: Callable[[Array, Array], Array], mean: bool = False) -> Folder:
    def fold(attrs, inputs):
        parts = [x for x in inputs if x is not None]
        _limit(np.broadcast_shapes(*(x.shape for x in parts)))
        out = parts[0]
        for x in parts[1:]:
            out = fn(out, x)
        if mean:
            out = out / len(parts)
        return [np.asarray(out).astype(np.result_type(*parts))]

    return fold


FOLDERS["Min"] = _variadic_folder(np.minimum)
FOLDERS["Max"] = _variadic_folder(np.maximum)
FOLDERS["Sum"] = _variadic_folder(np.add)
FOLDERS["Mean"] = _variadic_folder(np.add, mean=True)


def _reduce(fn: Callable[..., Array]) -> Folder:
    def fold(attrs, inputs):
        data = inputs[0]
        axes = _axes(attrs, inputs, 1)
        keepdims = bool(int(attrs.get("keepdims", 1)))
        if not axes:
            if int(attrs.get("noop_with_empty_axes", 0)):
                return [data]
            axes = list(range(data.ndim))
        axes_t = tuple(a + data.ndim if a < 0 else a for a in axes)
        out = np.asarray(fn(data, axis=axes_t, keepdims=keepdims)).astype(data.dtype)
        if out.dtype.kind in "iu":
            approx = fn(data.astype(np.float64), axis=axes_t, keepdims=keepdims)
            if np.any(np.abs(approx) > 2.0**62):
                raise FoldError("integer overflow while folding")
        return [out]

    return fold


for _op, _fn in {
    "ReduceProd": np.prod,
    "ReduceSum": np.sum,
    "ReduceMax": np.max,
    "ReduceMin": np.min,
    "ReduceMean": np.mean,
}.items():
    FOLDERS[_op] = _reduce(_fn)


@folder("Reshape")
def _reshape(attrs, inputs):
    data, shape = inputs[0], [int(d) for d in inputs[1].reshape(-1)]
    allowzero = int(attrs.get("allowzero", 0))
    if not allowzero:
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [data.reshape(shape)]


@folder("Flatten")
def _flatten(attrs, inputs):
    data = inputs[0]
    axis = int(attrs.get("axis", 1))
    axis = axis + data.ndim if axis < 0 else axis
    return [data.reshape(int(np.prod(data.shape[:axis])), -1)]


@folder("Expand")
def _expand(attrs, inputs):
    data, shape = inputs[0], tuple(int(d) for d in inputs[1].reshape(-1))
    target = _limit(np.broadcast_shapes(data.shape, shape))
    return [np.broadcast_to(data, target).copy()]


@folder("Tile")
def _tile(attrs, inputs):
    reps = tuple(int(r) for r in inputs[1].reshape(-1))
    _limit((inputs[0].size, *reps))  # output elements = input elements x product of repeats
    return [np.tile(inputs[0], reps)]


@folder("Transpose")
def _transpose(attrs, inputs):
    perm = attrs.get("perm")
    return [np.transpose(inputs[0], perm)]


@folder("CumSum")
def _cumsum(attrs, inputs):
    if int(attrs.get("exclusive", 0)) or int(attrs.get("reverse", 0)):
        raise FoldError("exclusive/reverse CumSum not folded")
    return [np.cumsum(inputs[0], axis=int(inputs[1].reshape(()))).astype(inputs[0].dtype)]


@folder("NonZero")
def _nonzero(attrs, inputs):
    return [np.array(np.nonzero(inputs[0]), dtype=np.int64)]


@folder("ScatterND")
def _scatter_nd(attrs, inputs):
    data, idx, upd = inputs[0].copy(), inputs[1].astype(np.int64), inputs[2]
    if attrs.get("reduction", "none") != "none":
        raise FoldError("ScatterND with reduction not folded")
    k = idx.shape[-1]
    flat_idx = idx.reshape(-1, k)
    flat_upd = upd.reshape((flat_idx.shape[0], *data.shape[k:]))
    for i, ix in enumerate(flat_idx):
        data[tuple(ix)] = flat_upd[i]
    return [data]


def fold_split(attrs: dict[str, Any], inputs: list[Array | None], n_outputs: int) -> list[Array]:
    """Split needs the node's output count, which the plain folder signature lacks."""
    data = inputs[0]
    axis = int(attrs.get("axis", 0))
    sizes = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs.get("split")
    if sizes is None:
        return list(np.array_split(data, n_outputs, axis=axis))
    bounds = np.cumsum([int(s) for s in np.reshape(sizes, -1)])[:-1]
    return list(np.split(data, bounds, axis=axis))


def attribute_values(node: Any) -> dict[str, Any]:
    """A node's attributes as plain python values: ints, floats, str (bytes decoded as UTF-8),
    lists, numpy arrays for tensors up to ``load.CHECKED_DATA_ELEMENTS`` elements (None for
    bigger or external ones, whose data is never read); subgraphs stay GraphProto."""
    out: dict[str, Any] = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        out[attr.name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if type(value).__name__ == "TensorProto":
        from roofcast.graph_import.load import CHECKED_DATA_ELEMENTS, tensor_has_inline_data

        if not tensor_has_inline_data(value):
            return None  # external data is never read
        numel = 1
        for d in value.dims:
            numel *= d
        if numel > CHECKED_DATA_ELEMENTS:
            return None  # big constants: only their dims matter; their data is not loaded
        return numpy_helper.to_array(value)
    return value
