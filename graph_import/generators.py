"""Large constant generators, sized before ONNX shape inference sees them.

Shape inference with data propagation stores the *values* of a constant ``Range``,
``ConstantOfShape``, ``Expand`` or ``Tile`` (one protobuf dim, ~150 bytes, per element). Their
size follows from the constant inputs: ``Range``: ``max(⌈(limit − start) / delta⌉, 0)``;
``ConstantOfShape``: ``shape``; ``Expand``: ``broadcast(x.dims, shape)``; ``Tile``:
``x.dims * repeats``. ``hide_large_generators`` refuses one over the element budget and replaces
one over ``DATA_PROP_MAX_ELEMS`` by an ``Identity`` of a value-less graph input of the same
type, so inference still shapes its consumers and nothing is materialised (the original model
keeps the node for costing).

Rationale: ``docs/design/module-notes.md`` (roofcast.graph_import.generators).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
from onnx import GraphProto

from roofcast.graph_import.budgets import DATA_PROP_MAX_ELEMS, check_tensor_elems
from roofcast.graph_import.fold import attribute_values
from roofcast.graph_import.shape_types import ONNX_DOMAINS, LazyShapes, elem_type

NO_VALUES_SUFFIX = "__roofcast_no_values"
#: ONNX data propagation also writes one symbolic dim per element of every 1-D tensor that a
#: data-propagating op (Add, Cast, Gather, Concat...) reads, values known or not; above this
#: many such elements in a graph, a round infers without data propagation (``long_vector_elems``)
DATA_PROP_MAX_VECTOR_ELEMS = 1 << 20

#: (dims, onnx elem_type) of the output, or None when not known from the inputs
Sizer = Callable[[onnx.NodeProto, list, LazyShapes], "tuple[tuple[int, ...], int] | None"]


def hide_large_generators(
    graph: GraphProto, values: dict[str, np.ndarray], shapes: LazyShapes
) -> int:
    """Size every constant generator whose inputs are known (see module docstring); returns how
    many were replaced. Raises ModelImportError (naming the budget) for one over the element cap.
    """
    hidden = 0
    for node in graph.node:
        sizer = _SIZERS.get(node.op_type)
        if sizer is None or node.domain not in ONNX_DOMAINS or len(node.output) != 1:
            continue
        inputs = [values.get(name) if name else None for name in node.input]
        try:
            sized = sizer(node, inputs, shapes)
        except (ValueError, TypeError, OverflowError, KeyError, IndexError):
            continue  # malformed: left to ONNX inference, which reports it
        if sized is None:
            continue
        dims, dtype = sized
        numel = math.prod(dims)
        out = node.output[0]
        check_tensor_elems(f"tensor {out!r} ({node.op_type} {node.name!r})", numel, dims)
        if numel <= DATA_PROP_MAX_ELEMS:
            continue
        stub = out + NO_VALUES_SUFFIX
        graph.input.append(onnx.helper.make_tensor_value_info(stub, dtype, list(dims)))
        node.CopyFrom(onnx.helper.make_node("Identity", [stub], [out], name=node.name))
        hidden += 1
    return hidden


def long_vector_elems(graph: GraphProto) -> int:
    """Elements of the graph's concretely typed 1-D tensors longer than ``DATA_PROP_MAX_ELEMS``
    (inputs, value_info, outputs, initializers): what data propagation would write out."""
    total = 0
    for vi in (*graph.input, *graph.value_info, *graph.output):
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 1 and dims[0].dim_value > DATA_PROP_MAX_ELEMS:
            total += dims[0].dim_value
    for init in graph.initializer:
        if len(init.dims) == 1 and init.dims[0] > DATA_PROP_MAX_ELEMS:
            total += init.dims[0]
    return total


def _scalar(value: np.ndarray | None) -> float | None:
    if value is None or value.size != 1:
        return None
    return value.reshape(()).item()


def _int_list(value: np.ndarray | None) -> list[int] | None:
    if value is None or value.ndim != 1 or value.dtype.kind not in "iu":
        return None
    dims = [int(v) for v in value]
    return dims if all(d >= 0 for d in dims) else None


def _np_elem(value: np.ndarray) -> int:
    return onnx.helper.np_dtype_to_tensor_dtype(value.dtype)


def _input_type(name: str, value: np.ndarray | None, shapes: LazyShapes):
    """(dims, elem_type) of a generator's data input, from its value or its declared type."""
    if value is not None:
        return tuple(int(d) for d in value.shape), _np_elem(value)
    known = shapes.get(name)
    if known is None or not known.is_concrete or known.dtype == "undefined":
        return None
    return tuple(known.dims), elem_type(known.dtype)  # type: ignore[arg-type]


def _range(node, inputs, shapes):
    start, limit, delta = (_scalar(v) for v in (inputs + [None] * 3)[:3])
    if start is None or limit is None or not delta:
        return None
    n = max(math.ceil((limit - start) / delta), 0)
    return (n,), _np_elem(inputs[0])


def _constant_of_shape(node, inputs, shapes):
    dims = _int_list(inputs[0] if inputs else None)
    if dims is None:
        return None
    value = attribute_values(node).get("value")
    dtype = _np_elem(np.asarray(value)) if value is not None else onnx.TensorProto.FLOAT
    return tuple(dims), dtype


def _expand(node, inputs, shapes):
    if len(inputs) < 2:
        return None
    target = _int_list(inputs[1])
    src = _input_type(node.input[0], inputs[0], shapes)
    if target is None or src is None:
        return None
    a, b = list(src[0]), target
    rank = max(len(a), len(b))
    a, b = [1] * (rank - len(a)) + a, [1] * (rank - len(b)) + b
    dims = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            return None  # not broadcastable: ONNX inference reports it
        dims.append(y if x == 1 else x)
    return tuple(dims), src[1]


def _tile(node, inputs, shapes):
    if len(inputs) < 2:
        return None
    repeats = _int_list(inputs[1])
    src = _input_type(node.input[0], inputs[0], shapes)
    if repeats is None or src is None or len(repeats) != len(src[0]):
        return None
    return tuple(d * r for d, r in zip(src[0], repeats, strict=True)), src[1]


_SIZERS: dict[str, Sizer] = {
    "Range": _range,
    "ConstantOfShape": _constant_of_shape,
    "Expand": _expand,
    "Tile": _tile,
}
