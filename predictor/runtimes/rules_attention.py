"""Attention patterns: the score subgraph ``MatMul(q, k^T) -> [scale, mask, ...] -> Softmax ->
[cast, dropout] -> MatMul(p, v)`` found in an exported transformer.

* ``attention-score-passes`` (eager attention): HF's eager attention makes
  ``attention_score_passes`` elementwise passes over the score tensor before the softmax — the
  scale ``scores / sqrt(d)`` and the mask add (NeuSight's GPT-2-style traces: ``truediv`` and
  ``where`` on the 2x24x2048x2048 scores, 1.2 and 1.7 ms on an A100). Some exports fold the
  scale into q and k and drop an all-ones mask, so the graph has fewer passes than PyTorch
  runs; the pattern adds the missing ones (profile's count minus the vector nodes already on
  the path from the score MatMul to the Softmax) as extra elementwise kernels reading and
  writing the score tensor once each, after the score MatMul.
* ``fused-attention`` (SDPA flash / memory-efficient kernels under torch.compile, TensorRT's
  MHA fusion): the whole subgraph is one kernel with the flops of both matmuls and the bytes of
  Q, K, V and O only — the score matrix never reaches memory (Dao et al. 2022).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofcast.graph_import.types import Engine, Graph, OpNode
from roofcast.predictor.runtimes.patterns import (
    ExtraKernel,
    Kernel,
    KernelPlan,
    merge_each,
    register_pattern,
)
from roofcast.predictor.runtimes.rules_graph import (
    activation_inputs,
    consumers,
    family,
    launches,
    producer,
)

#: families a node between the score MatMul and the Softmax (or after it) may have.
PATH_FAMILIES: frozenset[str] = frozenset({"elementwise", "data_movement", "other"})
MAX_PATH = 8


@dataclass(frozen=True)
class ScoreSubgraph:
    """One attention's nodes: ``qk`` (score MatMul), ``pre`` (nodes between it and the
    softmax), ``softmax``, ``post`` (after the softmax), ``pv`` (the MatMul with V)."""

    qk: OpNode
    pre: tuple[OpNode, ...]
    softmax: OpNode
    post: tuple[OpNode, ...]
    pv: OpNode

    def members(self) -> list[str]:
        return [n.name for n in (self.qk, *self.pre, self.softmax, *self.post, self.pv)]

    def existing_passes(self) -> int:
        """Elementwise passes over the scores the graph already holds."""
        return sum(1 for n in self.pre if launches(n) and n.cost.engine == Engine.VECTOR)


def _score_input(graph: Graph, n: OpNode, numel: int):
    for t in activation_inputs(graph, n):
        if t.is_concrete and math.prod(t.shape) == numel:
            return t
    return None


def score_subgraph(graph: Graph, softmax: OpNode) -> ScoreSubgraph | None:
    """The attention around ``softmax``, or None when it is not a score softmax."""
    out = softmax.outputs[0]
    if not out.is_concrete or len(out.shape) < 2:
        return None
    found = _path_from_qk(graph, softmax, math.prod(out.shape))
    if found is None:
        return None
    qk, pre = found
    if len(activation_inputs(graph, qk)) != 2:
        return None
    found_pv = _path_to_pv(graph, softmax)
    if found_pv is None:
        return None
    post, pv = found_pv
    return ScoreSubgraph(qk, pre, softmax, post, pv)


def _path_from_qk(graph: Graph, softmax: OpNode,
                  numel: int) -> tuple[OpNode, tuple[OpNode, ...]] | None:
    """(the Q·Kᵀ MatMul, the path ops between it and ``softmax``), or None."""
    pre: list[OpNode] = []
    cur = softmax
    for _ in range(MAX_PATH):
        t = _score_input(graph, cur, numel)
        p = producer(graph, cur, t) if t is not None else None
        if p is None:
            return None
        if p.op_type == "MatMul":
            return p, tuple(pre)
        if family(p) not in PATH_FAMILIES:
            return None
        pre.insert(0, p)
        cur = p
    return None


def _path_to_pv(graph: Graph, softmax: OpNode) -> tuple[tuple[OpNode, ...], OpNode] | None:
    """(the path ops after ``softmax``, the probabilities·V MatMul), or None."""
    post: list[OpNode] = []
    cur = softmax
    for _ in range(MAX_PATH):
        cs = consumers(graph, cur.name)
        if len(cs) != 1:
            return None
        c = cs[0]
        if c.op_type == "MatMul":
            if c.input(0) is None or c.input(0).name != cur.outputs[0].name:
                return None
            if len(activation_inputs(graph, c)) != 2:
                return None
            return tuple(post), c
        if family(c) not in PATH_FAMILIES:
            return None
        post.append(c)
        cur = c
    return None


def score_subgraphs(graph: Graph) -> list[ScoreSubgraph]:
    """Every attention score subgraph of ``graph`` (one per score softmax)."""
    out = []
    for n in graph.ops():
        if n.op_type == "Softmax" and launches(n):
            sub = score_subgraph(graph, n)
            if sub is not None:
                out.append(sub)
    return out


@register_pattern("attention-score-passes")
def attention_score_passes(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Add the score passes eager attention makes that the export lacks (module docstring)."""
    wanted = plan.attention_score_passes
    extras: list[ExtraKernel] = []
    subs = score_subgraphs(graph) if wanted else []
    for sub in subs:
        scores = sub.qk.outputs[0]
        for i in range(max(0, wanted - sub.existing_passes())):
            extras.append(ExtraKernel(
                after=sub.qk.name, label=f"score_pass{i + 1}",
                kernel=Kernel(op_type="AttentionScorePass", family="elementwise",
                              engine=Engine.VECTOR.value, flops=float(math.prod(scores.shape)),
                              bytes_read=float(scores.nbytes), bytes_written=float(scores.nbytes),
                              dtype=scores.dtype)))
    if not extras:
        return plan
    return plan.with_extra(extras).with_note(
        f"{len(extras)} extra passes over {len({e.after for e in extras})} attention score "
        "tensors")


@register_pattern("fused-attention")
def fused_attention(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Each score subgraph as one flash-style attention kernel (module docstring)."""
    return merge_each(graph, plan, ((sub.members(), _flash_kernel(sub))
                                    for sub in score_subgraphs(graph)),
                      "attentions as one fused kernel")


def _flash_kernel(sub) -> Kernel:
    """One flash-style kernel: the flops of both matmuls, the bytes of Q, K, V and O only."""
    q, k = sub.qk.input(0), sub.qk.input(1)
    v, o = sub.pv.input(1), sub.pv.outputs[0]
    return Kernel(
        op_type="FusedAttention", family="attention", engine=Engine.MATRIX.value,
        flops=float(sub.qk.cost.flops + sub.pv.cost.flops),
        bytes_read=float(q.nbytes + k.nbytes + v.nbytes), bytes_written=float(o.nbytes),
        dtype=o.dtype)
