"""One rank's kernels of a decoder LLM's training step, per part: embedding, each layer kind,
head; the layers' kernels come from ``predictor.llm.layer.layer_kernels`` (the builder serving
uses too) at the rank's Megatron-LM widths (``sharding.LLMShard``) for a micro-batch of ``b``
sequences of ``s`` tokens (``T = b s``; ``T / tp`` with sequence parallelism).

Embedding: vocab-parallel Gather of ``T`` rows (learned positions: Gather + Add); head: final
norm, vocab-parallel LM head Gemm ``[T, d] x [d, V_r]``, cross-entropy as a Softmax. MoE
experts run as a grouped GEMM over the rank's ``P`` token-expert pairs: ``P = T_r k`` with
``ep > 1`` (balanced routing), else all ``T k`` on a ``1/tp`` slice of every expert.
Backward rows: the registered rules of each node (``training.node_backward_kernels``), every
float input but constants (``c.``) and indices (``i.``); one update row per ``w.`` tensor.
Fused (flash) attention's backward: 5 matmuls against the forward's 2 (S = QK^T recomputed,
dV, dP, dQ, dK; Dao 2023, FlashAttention-2 §3.1.2): ``2.5 F_fwd`` FLOPs at ``0.85`` x the
forward's efficiency (FlashAttention-2's backward reaches ~63 % of A100 peak, its forward ~73 %),
carried as ``2.5 / 0.85 F_fwd`` on the row so the shared kernel estimator times it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from roofcast.graph_import.costs import cost_of
from roofcast.graph_import.costs.gemm_dims import gemm_dims
from roofcast.graph_import.costs.inner_dims import inner_elems_or_nan
from roofcast.graph_import.costs.registry import op_family
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.decoder import Attention, LayerKind, MoE
from roofcast.graph_import.types import OpNode, TensorInfo
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.layer import (
    CONST,
    INDEX,
    WEIGHT,
    AttentionCall,
    ExpertWork,
    LayerPass,
    elementwise,
    layer_kernels,
    norm,
    tensor,
)
from roofcast.predictor.precision import compute_dtype, rescale_cost
from roofcast.predictor.sharding import LLMShard, local_kind
from roofcast.predictor.training import (
    backward_row_values,
    node_backward_kernels,
    update_row_values,
)
from roofcast.predictor.workload_rows import COLUMNS, GEMM_COLUMNS

#: FlashAttention backward FLOPs / forward FLOPs (module docstring).
FLASH_BACKWARD_FLOPS = 2.5
#: its efficiency relative to the forward kernel's (module docstring).
FLASH_BACKWARD_EFFICIENCY = 0.85


@dataclass(frozen=True)
class Micro:
    """The micro-batch and how it runs: ``batch`` sequences of ``seq`` tokens; ``attention``
    ``fused`` / ``eager`` and the eager ``score_passes`` (the runtime profile's); ``dropout``."""

    batch: int
    seq: int
    attention: str
    score_passes: int = 0
    dropout: bool = False

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


class Nodes:
    """The training ``layer.Sink``: costed forward ``OpNode`` s of one part."""

    small = WEIGHT

    def __init__(self) -> None:
        self.nodes: list[OpNode] = []

    def add(self, name: str, op_type: str, inputs: Sequence[TensorInfo],
            outputs: Sequence[TensorInfo], *, attrs: dict | None = None,
            flops_scale: float = 1.0) -> str:
        weights = frozenset(t.name for t in inputs if t.name.startswith(WEIGHT))
        node = OpNode(name, op_type, "", tuple(inputs), tuple(outputs), attrs or {},
                      weight_inputs=weights)
        cost = cost_of(node)
        if cost is None:
            raise PredictionError(f"no cost rule for {op_type} (LLM training kernel {name})")
        if flops_scale != 1.0:
            cost = replace(cost, flops=cost.flops * flops_scale)
        self.nodes.append(replace(node, cost=cost))
        return name

    def gemm(self, name: str, tokens: float, k: int, n: int, *, bias: bool = False,
             small: bool = False, weight_elems: float | None = None,
             weight: str | None = None) -> str:
        inputs = [tensor(f"x.{name}", tokens, k), tensor(weight or f"{WEIGHT}{name}", k, n)]
        if bias:
            inputs.append(tensor(f"{WEIGHT}{name}.bias", n))
        return self.add(name, "Gemm", inputs, [tensor(f"y.{name}", tokens, n)])

    def cached_keys_read(self, call: AttentionCall, key: str, attention: Attention) -> None:
        """Training keeps no KV cache."""


def embedding_nodes(arch: LLMArch, shard: LLMShard, micro: Micro) -> list[OpNode]:
    """Slot 0 (module docstring)."""
    n = Nodes()
    d, tokens = arch.d_model, micro.tokens
    n.add("embed", "Gather", [tensor(f"{WEIGHT}embed", shard.vocab, d),
          tensor(f"{INDEX}ids", tokens)], [tensor("y.embed", tokens, d)])
    local = tokens / shard.seq_split
    if arch.positions == "learned":
        n.add("pos_embed", "Gather", [tensor(f"{WEIGHT}pos", arch.max_context, d),
              tensor(f"{INDEX}pos", local)], [tensor("y.pos_embed", local, d)])
        elementwise(n, "pos_add", "Add", local, d)
    if micro.dropout:
        elementwise(n, "embed_dropout", "Mul", local, d, constant=True)
    return n.nodes


def moe_pairs(arch: LLMArch, shard: LLMShard, micro: Micro) -> float:
    """Token-expert pairs the rank's experts run per micro-batch (module docstring)."""
    k = arch.experts_per_token
    if shard.ep > 1:
        return micro.tokens / shard.seq_split * k
    return float(micro.tokens * k)


def block_nodes(kind: LayerKind, arch: LLMArch, shard: LLMShard, micro: Micro
                ) -> list[OpNode]:
    """One layer of ``kind`` on the rank (module docstring)."""
    n = Nodes()
    tokens = micro.tokens
    experts = ExpertWork("grouped", moe_pairs(arch, shard, micro), experts=shard.experts) \
        if isinstance(kind.ffn, MoE) else None
    layer_kernels(n, local_kind(kind, tp=shard.tp, etp=shard.etp), LayerPass(
        tokens, tokens / shard.seq_split, (AttentionCall("", micro.batch, micro.seq, micro.seq),),
        micro.attention, micro.score_passes, dropout=micro.dropout, experts=experts))
    return n.nodes


def head_nodes(arch: LLMArch, shard: LLMShard, micro: Micro) -> list[OpNode]:
    """Slot L+1 (module docstring); a tied head uses the embedding's weight."""
    n = Nodes()
    d, tokens = arch.d_model, micro.tokens
    norm(n, arch.norm, "final_norm", tokens / shard.seq_split, d)
    n.gemm("lm_head", tokens, d, shard.vocab,
           weight=f"{WEIGHT}embed" if arch.tied_embeddings else None)
    n.add("cross_entropy", "Softmax", [tensor("x.logits", tokens, shard.vocab)],
          [tensor("y.logits", tokens, shard.vocab)], attrs={"axis": -1})
    return n.nodes


def forward_values(node: OpNode, precision: str) -> dict[str, object]:
    """The forward row (``COLUMNS``) of a costed node at ``precision`` (as
    ``predictor.workload.forward_rows`` makes it)."""
    cost = rescale_cost(node, precision)
    dims = gemm_dims(node)
    gemm = (np.nan,) * 4 if dims is None else tuple(float(x) for x in dims)
    return {
        "node": node.name, "op_type": node.op_type, "family": op_family(node),
        "phase": "forward", "engine": str(cost.engine.value), "dtype": compute_dtype(precision),
        "flops": float(cost.flops), "bytes_read": float(cost.bytes_read),
        "bytes_written": float(cost.bytes_written), "weight_bytes": float(cost.weight_bytes),
        **dict(zip(GEMM_COLUMNS, gemm, strict=True)), "fused_nodes": node.name,
        "inner_elems": inner_elems_or_nan(node), "key": f"forward:forward:{node.name}",
        "kernel": "forward", "domain": "", "grad_of": "",
    }


def grad_inputs(node: OpNode) -> tuple[int, ...]:
    """Positions of the inputs that require grad: floats that are not constants."""
    return tuple(i for i, t in enumerate(node.inputs)
                 if t is not None and t.dtype == "float" and not t.name.startswith(CONST))


def backward_kernels(node: OpNode, precision: str) -> list:
    """The backward kernels of ``node``: its registered rule's, with a fused attention's FLOPs
    at FlashAttention's backward cost (module docstring)."""
    kernels = node_backward_kernels(node, precision, grad_inputs(node))
    if op_family(node) != "attention":
        return kernels
    forward = float(rescale_cost(node, precision).flops)
    scale = FLASH_BACKWARD_FLOPS / FLASH_BACKWARD_EFFICIENCY
    return [replace(k, flops=scale * forward) for k in kernels]


def part_rows(nodes: Sequence[OpNode], config: RunConfig, *,
              skip_params: frozenset[str] = frozenset()) -> dict[str, list]:
    """Workload columns of one part: forward rows, then (``config.mode == "train"``) the
    backward rows in reverse order and one update row per parameter tensor not in
    ``skip_params`` (a tied head's weight is updated with the embedding)."""
    precision = config.precision
    values = [forward_values(nd, precision) for nd in nodes]
    if config.mode == "train":
        dtype = compute_dtype(precision)
        for nd in reversed(nodes):
            values += [backward_row_values(nd, k, dtype)
                       for k in backward_kernels(nd, precision)]
        params: dict[str, tuple[TensorInfo, list[str]]] = {}
        for nd in nodes:
            for t in nd.inputs:
                if t.name in nd.weight_inputs and t.name not in skip_params:
                    params.setdefault(t.name, (t, []))[1].append(nd.name)
        values += [update_row_values(name, t, users, config)
                   for name, (t, users) in params.items()]
    return {c: [v[c] for v in values] for c in COLUMNS}
