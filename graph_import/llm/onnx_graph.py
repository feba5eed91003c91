"""A read-only view of an ONNX graph for finding a decoder's structure (``onnx_decoder``).

Only initializer *dims* are read, never their values (weightless exports hold none), except
small inline tensors (``load.CHECKED_DATA_ELEMENTS``) that carry constants such as TopK's ``k``.

A *linear* is a node that multiplies an activation by a weight matrix: ``MatMul`` (either
operand), ``Gemm`` (``B``, ``transB``), ``FusedMatMul`` (``transA``/``transB``) and
``MatMulNBits`` (``K``, ``N`` attributes). The weight is an initializer reached from the operand
through layout/dtype ops (Transpose, Cast, Identity, DequantizeLinear) and, for stacked MoE
experts ``[n_experts, a, b]``, a ``Gather`` on axis 0. Orientation: a weight in the second
operand is ``[.., in, out]``, in the first ``[.., out, in]``; a Transpose swaps them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, numpy_helper

from roofcast.graph_import.load import CHECKED_DATA_ELEMENTS, tensor_has_inline_data
from roofcast.graph_import.shape_types import ShapeResult

FLOAT_WEIGHTS = frozenset({
    TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE,
    TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.INT8, TensorProto.UINT8,
    TensorProto.INT4, TensorProto.UINT4,
})
#: ops between a weight initializer and the matmul that reads it (input 0 is the weight)
WEIGHT_PATH_OPS = frozenset({"Transpose", "Cast", "Identity", "DequantizeLinear", "Gather"})
LINEAR_OPS = frozenset({"MatMul", "Gemm", "FusedMatMul", "MatMulNBits"})


@dataclass(frozen=True)
class Linear:
    """One weight matmul. ``experts`` > 1: a stacked ``[experts, ..]`` weight (MoE).
    ``elements``: weight elements per expert (``in_features * out_features``)."""

    node: int
    weight: str
    in_features: int
    out_features: int
    experts: int
    bias: str | None
    input: str
    output: str

    @property
    def elements(self) -> int:
        return self.in_features * self.out_features


class DecoderGraph:
    """Producers, consumers, initializer dims, concrete shapes and the linears of a model."""

    def __init__(self, model: ModelProto, shapes: ShapeResult | None = None) -> None:
        g = model.graph
        self.nodes = list(g.node)
        self.init = {t.name: t for t in g.initializer}
        self.inputs = [vi for vi in g.input if vi.name not in self.init]
        self.outputs = [vi.name for vi in g.output]
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            for t in node.output:
                if t:
                    self.producer[t] = i
            for t in node.input:
                if t:
                    self.consumers.setdefault(t, []).append(i)
        self.shapes = shapes
        self.linears = [lin for i in range(len(self.nodes)) if (lin := self._linear(i))]
        self.linear_at = {lin.node: lin for lin in self.linears}

    # ---------------------------------------------------------------- lookups

    def node_of(self, tensor: str) -> onnx.NodeProto | None:
        i = self.producer.get(tensor)
        return None if i is None else self.nodes[i]

    def dims(self, tensor: str) -> tuple[int, ...] | None:
        """Concrete dims of a tensor (initializers always; others after shape inference)."""
        if tensor in self.init:
            return tuple(int(d) for d in self.init[tensor].dims)
        if self.shapes is None:
            return None
        ts = self.shapes.tensors.get(tensor)
        if ts is None or not ts.is_concrete:
            return None
        return tuple(ts.dims)  # type: ignore[arg-type]

    def value(self, tensor: str) -> np.ndarray | None:
        """The value of a small constant tensor (folded, Constant node or inline initializer)."""
        if self.shapes is not None and tensor in self.shapes.values:
            return self.shapes.values[tensor]
        t = self.init.get(tensor)
        if t is not None:
            small = math.prod(t.dims) <= CHECKED_DATA_ELEMENTS
            return numpy_helper.to_array(t) if small and tensor_has_inline_data(t) else None
        node = self.node_of(tensor)
        if node is not None and node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and math.prod(a.t.dims) <= CHECKED_DATA_ELEMENTS:
                    return numpy_helper.to_array(a.t)
                if a.name in ("value_int", "value_ints"):
                    return np.array(onnx.helper.get_attribute_value(a))
        return None

    def attr(self, node: onnx.NodeProto, name: str, default=None):
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def is_weight(self, tensor: str) -> bool:
        return self.weight_source(tensor) is not None

    # ---------------------------------------------------------------- weights and linears

    def weight_source(self, tensor: str) -> tuple[str, bool, int] | None:
        """``(initializer, swapped, experts)`` when ``tensor`` is a weight matrix: the
        initializer, whether an odd number of Transposes swapped its last two axes, and the
        number of stacked experts (its leading dim when a Gather picks experts from it)."""
        swapped, gathered = False, False
        for _ in range(8):
            t = self.init.get(tensor)
            if t is not None:
                if t.data_type not in FLOAT_WEIGHTS:
                    return None
                rank = len(t.dims)
                if rank == 2 and min(t.dims) > 1:
                    return tensor, swapped, 1
                if rank == 3 and min(t.dims[1:]) > 1 and (gathered or t.dims[0] > 1):
                    return tensor, swapped, int(t.dims[0])
                return None
            node = self.node_of(tensor)
            if node is None or node.op_type not in WEIGHT_PATH_OPS:
                return None
            if node.op_type == "Transpose":
                perm = list(self.attr(node, "perm", []) or [])
                if len(perm) >= 2 and perm[-2:] == [len(perm) - 1, len(perm) - 2]:
                    swapped = not swapped
                elif perm != list(range(len(perm))):
                    return None
            if node.op_type == "Gather":
                if gathered or self.attr(node, "axis", 0) != 0:
                    return None
                gathered = True
            tensor = node.input[0]
        return None

    def _linear(self, i: int) -> Linear | None:
        node = self.nodes[i]
        if node.op_type not in LINEAR_OPS or len(node.input) < 2:
            return None
        if node.op_type == "MatMulNBits":
            k, n = int(self.attr(node, "K", 0)), int(self.attr(node, "N", 0))
            if k <= 1 or n <= 1:
                return None
            return self._made(i, node.input[1], k, n, 1, node.input[0])
        trans_a = bool(self.attr(node, "transA", 0))
        trans_b = bool(self.attr(node, "transB", 0))
        for pos, other in ((1, 0), (0, 1)):
            src = self.weight_source(node.input[pos])
            if src is None or self.is_weight(node.input[other]):
                continue
            name, swapped, experts = src
            a, b = self.init[name].dims[-2:]
            flip = swapped ^ (trans_b if pos == 1 else trans_a)
            if pos == 1:  # [.., in, out]
                k, n = (b, a) if flip else (a, b)
            else:  # [.., out, in]
                n, k = (b, a) if flip else (a, b)
            return self._made(i, name, int(k), int(n), experts, node.input[other])
        return None

    def _made(self, i: int, weight: str, k: int, n: int, experts: int, act: str) -> Linear:
        node = self.nodes[i]
        out, bias = node.output[0], None
        if node.op_type == "Gemm" and len(node.input) > 2 and node.input[2] in self.init:
            bias = node.input[2]
        else:
            for c in self.consumers.get(out, []):
                cn = self.nodes[c]
                if cn.op_type != "Add" or len(self.consumers.get(out, [])) != 1:
                    continue
                other = cn.input[1] if cn.input[0] == out else cn.input[0]
                t = self.init.get(other)
                if t is not None and math.prod(t.dims) == n * (experts if len(t.dims) > 1 else 1):
                    bias, out = other, cn.output[0]
        return Linear(i, weight, k, n, experts, bias, act, out)

    # ---------------------------------------------------------------- walks

    def walk_back(self, tensors: Iterable[str], through: Callable[[onnx.NodeProto], bool],
                  stop: Callable[[int], bool] = lambda i: False, limit: int = 400) -> Iterator[int]:
        """Producer nodes reachable backwards from ``tensors`` (breadth first), entering a node
        only when ``through(node)``; a node where ``stop(i)`` is yielded but not crossed."""
        seen: set[int] = set()
        todo = deque(tensors)
        while todo and len(seen) < limit:
            i = self.producer.get(todo.popleft())
            if i is None or i in seen:
                continue
            seen.add(i)
            node = self.nodes[i]
            if stop(i):
                yield i
                continue
            if not through(node):
                continue
            yield i
            todo.extend(t for t in node.input if t)

    def walk_forward(self, tensors: Iterable[str], through: Callable[[onnx.NodeProto], bool],
                     limit: int = 400) -> Iterator[int]:
        """Consumer nodes reachable forwards from ``tensors``, crossing nodes where ``through``."""
        seen: set[int] = set()
        todo = deque(tensors)
        while todo and len(seen) < limit:
            for i in self.consumers.get(todo.popleft(), []):
                if i in seen:
                    continue
                seen.add(i)
                yield i
                if through(self.nodes[i]):
                    todo.extend(t for t in self.nodes[i].output if t)
