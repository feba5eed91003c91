"""Core domain types of an imported graph.

Units: FLOPs are counted with one multiply-add = 2 FLOPs (the convention of vendor peak FLOP/s);
bytes are bytes an *unfused* kernel reads from and writes to memory. All quantities are SI
(FLOPs, bytes, seconds) unless a name carries another unit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import networkx as nx

from roofcast.dtypes import ONNX_ITEMSIZE_BYTES


class Engine(StrEnum):
    """Which peak of a device bounds an op's compute term."""

    MATRIX = "matrix"  # tensor cores / matrix units / BLAS-class GEMM throughput
    VECTOR = "vector"  # SIMD / CUDA cores: elementwise, reductions, normalisation
    DATA = "data"  # pure data movement: copies, gathers, transposes, concat
    FREE = "free"  # shape/view ops that no kernel executes


@dataclass(frozen=True)
class TensorInfo:
    """A tensor's name, concrete shape (empty tuple = scalar) and ONNX dtype name (e.g. 'float').

    Tensors of unresolved nodes (``Graph.unresolved``) keep their non-concrete dims as strings:
    the symbolic name (``'batch'``) or ``'?'``; ``is_concrete`` tells, and ``numel`` refuses them.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def is_concrete(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            if not isinstance(d, int):
                raise ValueError(
                    f"tensor {self.name!r} has no concrete shape {self.shape}: its node is "
                    "unresolved (bind the model's symbolic dims with --dim NAME=N)"
                )
            n *= d
        return n

    @property
    def itemsize_bytes(self) -> int:
        return dtype_itemsize_bytes(self.dtype)

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize_bytes


def dtype_itemsize_bytes(dtype: str) -> int:
    """Bytes per element of an ONNX dtype name (int4 rounds up to 1 byte)."""
    try:
        return ONNX_ITEMSIZE_BYTES[dtype]
    except KeyError as exc:
        raise ValueError(f"unknown dtype {dtype!r}") from exc


@dataclass(frozen=True)
class OpCost:
    """Work of one op: FLOPs (1 MAC = 2 FLOPs), bytes read/written by an unfused kernel.

    ``bytes_read`` includes ``weight_bytes`` (weights are read like any input);
    ``weight_bytes`` is reported separately so weight traffic can be amortised or cached.
    """

    flops: float
    bytes_read: float
    bytes_written: float
    weight_bytes: float
    engine: Engine

    @property
    def bytes_total(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def intensity_flop_per_byte(self) -> float:
        """Arithmetic intensity = flops / (bytes_read + bytes_written); 0 when nothing moves."""
        total = self.bytes_total
        return self.flops / total if total > 0 else 0.0


FREE_COST = OpCost(0.0, 0.0, 0.0, 0.0, Engine.FREE)


@dataclass(frozen=True)
class OpNode:
    """One ONNX node with concrete tensor infos and its cost (None while unresolved/unsupported).

    ``inputs`` keeps ONNX positions: an omitted optional input is ``None``.
    ``const_inputs`` maps input names whose *values* are known at import (initializers with
    data, folded shape subgraphs) to small numpy arrays, for rules that need them (Slice, Pad...).
    """

    name: str
    op_type: str
    domain: str
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    cost: OpCost | None = None
    weight_inputs: frozenset[str] = frozenset()
    const_inputs: Mapping[str, Any] = field(default_factory=dict)
    constant_folded: bool = False

    def input(self, i: int) -> TensorInfo | None:
        """The i-th input, or None when absent/omitted."""
        return self.inputs[i] if i < len(self.inputs) else None


@dataclass
class Graph:
    """An imported model: a DAG of OpNodes (edges follow tensors) plus what could not be costed.

    ``nx_graph`` nodes are OpNode names with attribute ``op`` (the OpNode); an edge u->v carries
    ``tensor`` (the TensorInfo flowing from u to v).
    ``unsupported``: op type -> count of nodes without a cost rule.
    ``unresolved``: node name -> reason its shapes could not be made concrete.
    ``unbound_dims``: symbolic dim names the user did not bind.
    ``skeleton``: the source model without its large initializers' data (``load.skeleton``),
    for runtimes asked which kernels they would run (``predictor.runtimes.ort_plan``).
    """

    name: str
    nx_graph: nx.DiGraph
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    params: int
    weight_bytes: int
    opset: int
    unsupported: dict[str, int] = field(default_factory=dict)
    unresolved: dict[str, str] = field(default_factory=dict)
    unbound_dims: tuple[str, ...] = ()
    dims: Mapping[str, int] = field(default_factory=dict)
    skeleton: bytes = field(default=b"", repr=False)

    def ops(self) -> Iterator[OpNode]:
        """OpNodes in a topological order (``order``)."""
        g = self.nx_graph
        kept = self.__dict__.get("_ops")
        if kept is not None and kept[0] is g:
            return iter(kept[1])
        nodes = g.nodes
        ops = tuple(nodes[n]["op"] for n in self.order())
        if nx.is_frozen(g):
            self.__dict__["_ops"] = (g, ops)
        return iter(ops)

    def order(self) -> tuple[str, ...]:
        """Node names in a topological order. On a frozen ``nx_graph`` (``nx.freeze``: an
        imported graph, ``graph_import.build``) the order, and the ops in it (``ops``), are
        computed once and kept: its nodes and edges cannot change (and an imported graph's
        nodes keep their ``op``); an unfrozen graph is sorted on every call. The same order as
        ``nx.topological_sort`` either way."""
        g = self.nx_graph
        kept = self.__dict__.get("_order")
        if kept is not None and kept[0] is g:
            return kept[1]
        order = tuple(nx.topological_sort(g))
        if nx.is_frozen(g):
            self.__dict__["_order"] = (g, order)
        return order

    def __len__(self) -> int:
        return self.nx_graph.number_of_nodes()
