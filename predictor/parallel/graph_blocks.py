"""Repeated blocks of an ONNX graph: which layer slot each node belongs to.

Slots follow ``ShardedWorkload``: 0 before the first block, 1..L the blocks, L+1 after the
last. A *cut* is a point in topological order where one large float activation is live.
Transformers: a block starts at the last cut before each attention core (a Softmax fed by a
GEMM of two activations); other graphs: a block is a segment between cuts that joins two
branches. Fewer than two blocks: ``layers`` is None and the order is cut into ``CHUNKS``
chunks of equal forward FLOPs. Design notes: docs/design/decoder.md.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from roofcast.graph_import.types import Engine, Graph, OpNode, TensorInfo
from roofcast.predictor.precision import FLOAT_DTYPES

#: chunks of a graph without repeated blocks
CHUNKS = 16
_SCORE_OPS = frozenset({"Mul", "Div", "Add", "Sub", "Where", "Cast", "Tanh", "Clip", "Min", "Max"})


@dataclass(frozen=True)
class Blocks:
    """slot: node name -> slot (0..layers+1); layers: blocks found (None: chunks, see module
    docstring; the slot count is then ``chunks``); boundaries: the tensor entering each slot
    1..L+1 (None where unknown); how: one line on how they were found."""

    slot: dict[str, int]
    layers: int | None
    chunks: int
    boundaries: tuple[TensorInfo | None, ...]
    how: str

    @property
    def slots(self) -> int:
        """Slots 0..L+1 in all."""
        return (self.layers if self.layers is not None else self.chunks) + 2


def _is_float(t: TensorInfo | None) -> bool:
    return t is not None and t.dtype in FLOAT_DTYPES and t.is_concrete


def _is_weight_free_gemm(node: OpNode) -> bool:
    return node.op_type == "MatMul" and not node.weight_inputs


def attention_cores(order: list[OpNode], producer: dict[str, int]
                    ) -> tuple[list[int], set[str]]:
    """Positions of the score GEMMs (QK) of attention cores, in order, and the side tensors
    the scores take on the way to the Softmax (masks, position biases: shared by all blocks,
    so never a block boundary)."""
    cores = []
    side: set[str] = set()
    for node in order:
        if (node.op_type != "Softmax" or not _is_float(node.input(0))
                or len(node.input(0).shape) < 3):
            continue
        t, steps = node.input(0), 0
        while t is not None and t.name in producer and steps < 8:
            src = order[producer[t.name]]
            if _is_weight_free_gemm(src):
                cores.append(producer[t.name])
                break
            if src.op_type not in _SCORE_OPS:
                break
            nxt = next((x for x in src.inputs if _is_float(x) and x.shape == t.shape), None)
            side.update(x.name for x in src.inputs if x is not None and x is not nxt)
            t = nxt
            steps += 1
    return sorted(set(cores)), side


def cuts(order: list[OpNode], graph: Graph, side: set[str] = frozenset()) -> list[int]:
    """Positions after which one large float activation is live (module docstring), not
    counting the ``side`` tensors."""
    last_use: dict[str, int] = {}
    for i, node in enumerate(order):
        for t in node.inputs:
            if t is not None:
                last_use[t.name] = i
    for t in graph.outputs:
        last_use[t.name] = len(order)
    weights = {n for node in order for n in node.weight_inputs}
    live: dict[str, int] = {}
    found = []
    for i, node in enumerate(order):
        for t in node.inputs:
            if t is not None and last_use.get(t.name) == i:
                live.pop(t.name, None)
        for t in node.outputs:
            if (_is_float(t) and t.name not in weights and t.name not in side
                    and last_use.get(t.name, -1) > i):
                live[t.name] = t.numel
        out = node.outputs[0] if node.outputs else None
        if not _is_float(out) or out.name not in live or out.numel <= 1:
            continue
        big = [n for n, size in live.items() if size * 8 >= out.numel]
        if big == [out.name]:
            found.append(i)
    return found


def _weighted(order: list[OpNode], lo: int, hi: int) -> int:
    return sum(1 for node in order[lo + 1:hi + 1] if node.weight_inputs)


def find_blocks(graph: Graph) -> Blocks:
    """Slots of ``graph``'s nodes (module docstring)."""
    order = list(graph.ops())
    producer = {t.name: i for i, node in enumerate(order) for t in node.outputs}
    cores, side = attention_cores(order, producer)
    cut = cuts(order, graph, side)
    starts: list[int] = []  # position of the last node before each block
    how = ""
    if len(cores) >= 2:
        starts = [max((p for p in cut if p < c), default=-1) for c in cores]
        prev_after = _weighted(order, cores[-2], starts[-1])
        after = [p for p in cut if p > cores[-1]]
        end = min(after, key=lambda p: (abs(_weighted(order, cores[-1], p) - prev_after), p),
                  default=len(order) - 1)
        starts.append(end)
        how = f"{len(cores)} blocks from the attention cores"
    else:
        starts = _residual_starts(order, cut, producer)
        if len(starts) >= 3:
            how = f"{len(starts) - 1} residual blocks between single-tensor cuts"
    if len(starts) >= 3 and len(set(starts)) == len(starts):
        slot = {}
        layers = len(starts) - 1
        k = 0
        for i, node in enumerate(order):
            while k < len(starts) and i > starts[k]:
                k += 1
            slot[node.name] = k
        bounds = tuple(_output_at(order, p) for p in starts)
        return Blocks(slot, layers, layers, bounds, how)
    return _chunks(order)


def _output_at(order: list[OpNode], pos: int) -> TensorInfo | None:
    if pos < 0:
        return None
    out = order[pos].outputs
    return out[0] if out else None


def _residual_starts(order: list[OpNode], cut: list[int], producer: dict[str, int]) -> list[int]:
    """Cut positions that close a segment joining two branches (and the cut before the
    first such segment)."""
    starts: list[int] = []
    for a, b in itertools.pairwise(cut):
        if b - a < 2:
            continue
        joins = any(sum(1 for t in node.inputs if _is_float(t)
                        and a <= producer.get(t.name, -1) <= b) >= 2
                    for node in order[a + 1:b + 1])
        if joins:
            if not starts:
                starts.append(a)
            starts.append(b)
    return starts


def _chunks(order: list[OpNode]) -> Blocks:
    flops = np.array([0.0 if n.cost is None or n.cost.engine == Engine.FREE else n.cost.flops
                      for n in order])
    total = flops.sum()
    if total <= 0:
        flops = np.ones(len(order))
        total = float(len(order))
    chunks = max(1, min(CHUNKS, int(np.count_nonzero(flops))))
    middle = (np.cumsum(flops) - flops / 2) / total  # where each node's work sits
    slot = {n.name: 1 + min(chunks - 1, int(mid * chunks))
            for n, mid in zip(order, middle, strict=True)}
    first = {}
    for i, n in enumerate(order):
        first.setdefault(slot[n.name], i)
    first[chunks + 1] = len(order)
    bounds = tuple(_output_at(order, first[k] - 1) if k in first else None
                   for k in range(1, chunks + 2))
    return Blocks(slot, None, chunks, bounds,
                  f"no repeated blocks: the topological order cut into {chunks} chunks of equal "
                  "forward FLOPs")
