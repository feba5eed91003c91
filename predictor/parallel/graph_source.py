"""``GraphParallelSource``: any ONNX graph as a ``ParallelSource`` (Megatron tensor sharding
inferred from the graph).

``build(tp=, ep=1, micro_batch=, sequence_parallel=, mode=)``: the graph's workload rows at
``micro_batch`` scaled by the ``tp_shard`` layout (a node split over an axis of ``n`` does
``w = ceil(n / tp) / n`` of the work; bytes by the split tensors' shares; the split GEMM dim
x ``w``), the layout's collectives (group ``tp``), and per layer slot (``graph_blocks``) the
parameters, kept activations, checkpoint and boundary bytes. ``tp`` must divide the
attention heads (``sharding.check_tp``); no experts, so ``ep = 1``. Cached per
(tp, micro_batch, sequence_parallel, mode). Design notes: docs/design/decoder.md.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from functools import cached_property

import numpy as np
import pandas as pd

from roofcast.graph_import.types import Engine, Graph, OpNode, TensorInfo
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.parallel.graph_blocks import Blocks, find_blocks
from roofcast.predictor.parallel.tp_shard import ShardLayout, shard_layout, split_fraction
from roofcast.predictor.parallel.types import (
    PARALLEL_MODES,
    CommOp,
    ModelFacts,
    ParallelPlanError,
    ShardedWorkload,
)
from roofcast.predictor.precision import FLOAT_DTYPES, rescale_bytes
from roofcast.predictor.runtimes import get_runtime
from roofcast.predictor.runtimes.catalog import default_runtime_name
from roofcast.predictor.sharding import check_ep, check_tp, positive_degree
from roofcast.predictor.training import requires_grad_tensors, trainable_params
from roofcast.predictor.workload import workload_table

#: forward GEMM dims (batch, M, N, K) -> column of each kernel's GEMM dims that carries it:
#: forward (b, m, n, k); dX of operand 0 (b, m, k, n); dW / dB of operand 1
#: (b_w, k, n, m·b/b_w) — the batch lands in column 0 when operand 1 is batched, else 3.
_ROLE_COLUMN: dict[str, dict[str, int]] = {
    "forward": {"b": 0, "m": 1, "n": 2, "k": 3},
    "grad0": {"b": 0, "m": 1, "k": 2, "n": 3},
    "grad1": {"k": 1, "n": 2, "m": 3},
}
_GEMM_COLS = ("gemm_batch", "gemm_m", "gemm_n", "gemm_k")


class GraphParallelSource:
    """A ``ParallelSource`` for an ONNX graph (module docstring).

    graph_at: the graph at a batch size (``roofcast.models.Model.graph_at``); config: the
    run's ``RunConfig`` (precision, optimizer, runtime: None = the GPU default); name: the
    model's name in messages and predictions.
    """

    def __init__(self, graph_at: Callable[[int], Graph], config: RunConfig, *, name: str
                 ) -> None:
        if not callable(graph_at):
            raise PredictionError("graph_at must be a function batch -> Graph "
                                  "(e.g. roofcast.load_model(PATH).graph_at)")
        if not isinstance(config, RunConfig):
            raise PredictionError(f"config must be a RunConfig, got {type(config).__name__}")
        self._graph_at = graph_at
        self.config = config
        self.name = str(name)
        runtime = config.runtime
        self.runtime = (default_runtime_name("gpu") if runtime is None
                        else get_runtime(runtime).name)
        self._graphs: dict[int, Graph] = {}
        self._params: dict[int, dict] = {}
        self._orders: dict[int, list[OpNode]] = {}
        self._rows: dict[tuple[int, str], pd.DataFrame] = {}
        self._layouts: dict[tuple[int, bool, str], ShardLayout] = {}
        self._blocks: dict[int, Blocks] = {}
        self._built: dict[tuple[int, int, bool, str], ShardedWorkload] = {}

    # ------------------------------------------------------------------ cached pieces

    def graph(self, micro_batch: int) -> Graph:
        if micro_batch not in self._graphs:
            self._graphs[micro_batch] = self._graph_at(micro_batch)
        return self._graphs[micro_batch]

    def order(self, micro_batch: int) -> list[OpNode]:
        """The graph's nodes in topological order."""
        if micro_batch not in self._orders:
            self._orders[micro_batch] = list(self.graph(micro_batch).ops())
        return self._orders[micro_batch]

    def params(self, micro_batch: int) -> dict:
        """``predictor.training.trainable_params`` of the graph at ``micro_batch``."""
        if micro_batch not in self._params:
            self._params[micro_batch] = trainable_params(self.graph(micro_batch))
        return self._params[micro_batch]

    def run_config(self, micro_batch: int, mode: str) -> RunConfig:
        return dataclasses.replace(self.config, dims=self.graph(micro_batch).dims,
                                   mode="train" if mode == "train" else "infer")

    def rows(self, micro_batch: int, mode: str) -> pd.DataFrame:
        """The unsharded workload rows of one micro-batch."""
        key = (micro_batch, mode)
        if key not in self._rows:
            self._rows[key] = workload_table(self.graph(micro_batch),
                                             self.run_config(micro_batch, mode), self.runtime)
        return self._rows[key]

    def layout(self, micro_batch: int, sequence_parallel: bool, mode: str) -> ShardLayout:
        key = (micro_batch, sequence_parallel, mode)
        if key not in self._layouts:
            g = self.graph(micro_batch)
            grads = frozenset(requires_grad_tensors(g)) if mode == "train" else frozenset()
            self._layouts[key] = shard_layout(g, sequence_parallel=sequence_parallel,
                                              requires_grad=grads)
        return self._layouts[key]

    def blocks(self, micro_batch: int) -> Blocks:
        if micro_batch not in self._blocks:
            self._blocks[micro_batch] = find_blocks(self.graph(micro_batch))
        return self._blocks[micro_batch]

    @cached_property
    def facts(self) -> ModelFacts:
        """Layers (None: no repeated blocks), heads (from the attention cores), hidden (the
        width of the tensor between blocks), tokens per sample (a dim named like ``seq``)."""
        g = self.graph(1)
        blocks = self.blocks(1)
        heads = self.layout(1, False, "infer").attention_heads
        head = Counter(heads).most_common(1)[0][0] if heads else None
        bound = next((t for t in blocks.boundaries if t is not None and t.shape), None)
        transformer = blocks.layers is not None and "attention" in blocks.how
        hidden = int(bound.shape[-1]) if transformer and bound is not None else None
        seq = next((int(v) for k, v in g.dims.items() if "seq" in k.lower()), None)
        return ModelFacts(name=self.name, layers=blocks.layers, heads=head, kv_heads=head,
                          experts=None, hidden=hidden, seq_tokens=seq)

    # ------------------------------------------------------------------ build

    def build(self, *, tp: int, ep: int = 1, micro_batch: int, sequence_parallel: bool = False,
              mode: str = "train") -> ShardedWorkload:
        """One device's work for one micro-batch (module docstring)."""
        tp = positive_degree("tp", tp)
        ep = positive_degree("ep", ep)
        micro_batch = positive_degree("micro_batch", micro_batch)
        if mode not in PARALLEL_MODES:
            raise ParallelPlanError(f"mode must be one of {', '.join(PARALLEL_MODES)}, "
                                    f"got {mode!r}")
        if not isinstance(sequence_parallel, bool):
            raise ParallelPlanError(f"sequence_parallel must be true or false, "
                                    f"got {sequence_parallel!r}")
        check_ep(self.name, ep, None)
        check_tp(self.name, tp, self.facts.heads or None)
        key = (tp, micro_batch, sequence_parallel, mode)
        if key not in self._built:
            self._built[key] = self._build(tp, micro_batch, sequence_parallel and tp > 1, mode)
        return self._built[key]

    def _build(self, tp: int, mb: int, sp: bool, mode: str) -> ShardedWorkload:
        g = self.graph(mb)
        config = self.run_config(mb, mode)
        layout = self.layout(mb, sp, mode)
        blocks = self.blocks(mb)
        order = self.order(mb)
        nodes = {n.name: n for n in order}
        rows = self.rows(mb, mode).copy()
        params = self.params(mb)
        slot_of = dict(blocks.slot)
        for name, p in params.items():
            slot_of[name] = blocks.slot.get(p.consumers[0], 0)
        rows["layer"] = [slot_of.get(n, 0) for n in rows["node"]]
        rows["count"] = 1.0
        notes = [f"layers: {blocks.how}"]
        if tp > 1:
            _scale_rows(rows, nodes, layout, tp, config.precision)
            notes.append(_layout_note(layout, tp))
        comms = _comms(layout, slot_of, tp, config.precision, mode)
        param_elems = np.zeros(blocks.slots)
        for name, p in params.items():
            share = (split_fraction(layout.split_weights[name], tp)
                     if name in layout.split_weights else 1.0)
            param_elems[slot_of[name]] += p.tensor.numel * share
        act = _activation_bytes(order, blocks, layout, tp, config.precision)
        ckpt, boundary = _boundaries(g, blocks, layout, tp, config.precision, act)
        if blocks.layers is None:
            notes.append("pipeline stages take whole chunks of the topological order "
                         "(no repeated blocks found)")
        return ShardedWorkload(rows=rows, comms=comms, param_elems=param_elems,
                               activation_bytes=act, checkpoint_bytes=ckpt,
                               boundary_bytes=boundary, config=config,
                               runtime=self.runtime, notes=tuple(notes))


def _activation_bytes(order: list[OpNode], blocks: Blocks, layout: ShardLayout, tp: int,
                      precision: str) -> np.ndarray:
    """Per slot: the float outputs of its kernels at one rank's share (what the backward
    keeps; ``predictor.memory`` counts the same buffers, plus the model inputs)."""
    act = np.zeros(blocks.slots)
    for node in order:
        if node.cost is None or node.cost.engine == Engine.FREE:
            continue
        act[blocks.slot[node.name]] += sum(
            _bytes(t, precision) * layout.tensor_fraction(t, tp)
            for t in node.outputs if t.dtype in FLOAT_DTYPES and t.is_concrete)
    return act


def _boundaries(g: Graph, blocks: Blocks, layout: ShardLayout, tp: int, precision: str,
                act: np.ndarray) -> tuple[np.ndarray, float]:
    """Per slot the tensor entering it at one rank's share (slot 0: the model inputs; a slot
    without a known boundary tensor keeps its activations), and the largest of them between
    slots 0..L+1 (the pipeline send)."""
    ckpt = np.zeros(blocks.slots)
    ckpt[0] = sum(_bytes(t, precision) for t in g.inputs if t.is_concrete)
    sent = []
    for i, t in enumerate(blocks.boundaries, start=1):
        if t is None:
            ckpt[i] = act[i]
        else:
            ckpt[i] = _bytes(t, precision) * layout.tensor_fraction(t, tp)
            sent.append(ckpt[i])
    return ckpt, float(max(sent, default=ckpt[1:].max()))


def _bytes(t: TensorInfo, precision: str) -> float:
    return rescale_bytes(t.nbytes, t.dtype, precision) if t.is_concrete else 0.0


def _layout_note(layout: ShardLayout, tp: int) -> str:
    rules = Counter(s.rule for s in layout.nodes.values())
    gathered = [n for n, s in layout.nodes.items() if s.rule == "gathered"]
    where = f" (e.g. {', '.join(gathered[:3])})" if gathered else ""
    return (f"tensor parallel tp={tp} inferred from the graph: {rules.get('column', 0)} "
            f"column-parallel, {rules.get('row', 0)} row-parallel, {rules.get('vocab', 0)} "
            f"vocab-parallel, {rules.get('split', 0)} split and {rules.get('gathered', 0)} "
            f"all-gathered nodes{where}; a model output of a column-parallel GEMM stays split "
            "(Megatron's vocab-parallel loss)")


def _shares(node: OpNode, layout: ShardLayout, tp: int, precision: str
            ) -> tuple[float, float, float, float]:
    """(read, written, weight, traffic) shares of one node's bytes on one rank."""
    def share(t: TensorInfo) -> float:
        if t.name in layout.split_weights:
            return split_fraction(layout.split_weights[t.name], tp)
        return layout.tensor_fraction(t, tp)

    ins = {t.name: t for t in node.inputs if t is not None and t.is_concrete}
    outs = [t for t in node.outputs if t.is_concrete]
    b_in = [(_bytes(t, precision), share(t), t.name in node.weight_inputs) for t in ins.values()]
    b_out = [(_bytes(t, precision), share(t)) for t in outs]

    def ratio(pairs: list[tuple[float, float]]) -> float:
        total = sum(b for b, _ in pairs)
        return sum(b * s for b, s in pairs) / total if total > 0 else 1.0

    read = ratio([(b, s) for b, s, _ in b_in])
    weight = ratio([(b, s) for b, s, w in b_in if w])
    written = ratio(b_out)
    traffic = ratio([(b, s) for b, s, _ in b_in] + b_out)
    return read, written, weight, traffic


def _scale_rows(rows: pd.DataFrame, nodes: dict[str, OpNode], layout: ShardLayout, tp: int,
                precision: str) -> None:
    """Scale ``rows`` in place to one tensor rank's share (module docstring, step 3)."""
    cols = {c: rows[c].to_numpy(dtype=float).copy() for c in
            ("flops", "bytes_read", "bytes_written", "weight_bytes", *_GEMM_COLS)}
    cache: dict[str, tuple[float, float, float, float]] = {}
    for i, (name, phase, kernel) in enumerate(zip(rows["node"], rows["phase"], rows["kernel"],
                                                  strict=True)):
        if phase == "update":
            if name in layout.split_weights:
                s = split_fraction(layout.split_weights[name], tp)
                for c in ("flops", "bytes_read", "bytes_written", "weight_bytes"):
                    cols[c][i] *= s
            continue
        node = nodes.get(name)
        shard = layout.nodes.get(name)
        if node is None or shard is None:
            continue
        if name not in cache:
            cache[name] = _shares(node, layout, tp, precision)
        read, written, weight, traffic = cache[name]
        work = split_fraction(shard.split_len, tp) if shard.split_len else 1.0
        cols["flops"][i] *= work
        cols["weight_bytes"][i] *= weight
        if phase == "forward":
            cols["bytes_read"][i] *= read
            cols["bytes_written"][i] *= written
        else:
            cols["bytes_read"][i] *= traffic
            cols["bytes_written"][i] *= traffic
        if shard.gemm_role is not None:
            _scale_gemm(cols, i, phase, kernel, shard.gemm_role, work)
    for c, v in cols.items():
        rows[c] = v


def _scale_gemm(cols: dict[str, np.ndarray], i: int, phase: str, kernel: str, role: str,
                work: float) -> None:
    if phase == "forward":
        table = _ROLE_COLUMN["forward"]
    elif kernel.endswith("0"):
        table = _ROLE_COLUMN["grad0"]
    elif kernel.endswith("1"):
        table = dict(_ROLE_COLUMN["grad1"], b=0 if cols["gemm_batch"][i] > 1 else 3)
    else:
        return
    col = table.get(role)
    if col is not None and np.isfinite(cols[_GEMM_COLS[col]][i]):
        cols[_GEMM_COLS[col]][i] *= work


def _comms(layout: ShardLayout, slot_of: dict[str, int], tp: int, precision: str, mode: str
           ) -> tuple[CommOp, ...]:
    """The layout's collectives at ``precision``, merged per (collective, size, phase, slot)."""
    if tp == 1:
        return ()
    merged: Counter = Counter()
    for c in layout.comms:
        if c.phase == "backward" and mode != "train":
            continue
        merged[(c.collective, _bytes(c.tensor, precision), c.phase,
                slot_of.get(c.node, 0))] += 1
    return tuple(CommOp(coll, size, "tp", phase, layer, float(n))
                 for (coll, size, phase, layer), n in merged.items())
