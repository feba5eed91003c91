"""Tensor types as the import sees them: dtype name and dims (ints, or symbolic names).

Read from ONNX ``ValueInfoProto`` / initializer dims; ``LazyShapes`` parses on demand (a graph
of thousands of tensors is looked up a few hundred times per inference round).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import GraphProto, TensorProto

UNKNOWN_DIM = "?"
ONNX_DOMAINS = ("", "ai.onnx")

Dim = int | str


@dataclass(frozen=True)
class TensorShape:
    """dtype name (``'float'``, ``'int64'``...) and dims.

    ``dims is None`` when the rank is unknown.
    """

    dtype: str
    dims: tuple[Dim, ...] | None

    @property
    def is_concrete(self) -> bool:
        return self.dims is not None and all(isinstance(d, int) for d in self.dims)


@dataclass
class ShapeResult:
    """Shapes and known values of the model's tensors after binding, inference and folding."""

    tensors: dict[str, TensorShape]
    values: dict[str, np.ndarray]
    bound: dict[str, int]
    unbound: tuple[str, ...]
    iterations: int
    folded_nodes: int = 0
    opsets: dict[str, int] = field(default_factory=dict)


def dtype_name(elem_type: int) -> str:
    """ONNX elem_type -> lower-case name used by TensorInfo (``1 -> 'float'``)."""
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return "undefined"


def elem_type(dtype: str) -> int:
    return TensorProto.DataType.Value(dtype.upper())


def collect_shapes(graph: GraphProto) -> dict[str, TensorShape]:
    """Types of all top-level tensors declared in a graph (inputs, value_info, outputs,
    initializers; initializers win)."""
    out: dict[str, TensorShape] = {}
    for vi in (*graph.input, *graph.value_info, *graph.output):
        shape = value_info_shape(vi)
        if shape is not None:
            out[vi.name] = shape
    for init in graph.initializer:
        out[init.name] = TensorShape(dtype_name(init.data_type), tuple(int(d) for d in init.dims))
    return out


class LazyShapes:
    """``collect_shapes`` parsed on demand: the fold pass needs only the inputs of Shape/Size."""

    def __init__(self, graph: GraphProto) -> None:
        self._protos: dict[str, onnx.ValueInfoProto | TensorProto] = {}
        for vi in (*graph.input, *graph.value_info, *graph.output):
            self._protos[vi.name] = vi
        for init in graph.initializer:
            self._protos[init.name] = init
        self._cache: dict[str, TensorShape | None] = {}

    def get(self, name: str) -> TensorShape | None:
        if name not in self._cache:
            proto = self._protos.get(name)
            if proto is None:
                self._cache[name] = None
            elif isinstance(proto, TensorProto):
                dims = tuple(int(d) for d in proto.dims)
                self._cache[name] = TensorShape(dtype_name(proto.data_type), dims)
            else:
                self._cache[name] = value_info_shape(proto)
        return self._cache[name]


def value_info_shape(vi: onnx.ValueInfoProto) -> TensorShape | None:
    if not vi.type.HasField("tensor_type"):
        return None
    tt = vi.type.tensor_type
    dtype = dtype_name(tt.elem_type)
    if not tt.HasField("shape"):
        return TensorShape(dtype, None)
    dims: list[Dim] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or UNKNOWN_DIM)
    return TensorShape(dtype, tuple(dims))


@functools.cache
def onnx_knows(op_type: str, domain: str) -> bool:
    """True when onnx has a schema (hence shape inference) for the op."""
    try:
        return onnx.defs.has(op_type, "" if domain == "ai.onnx" else domain)
    except Exception:  # onnx raises various errors for odd domains
        return False
