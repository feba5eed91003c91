"""One rank's kernels of a decoder LLM's training step, per part: embedding, one block, head.

Each kernel is an ``OpNode`` costed by the op registry (``graph_import.costs.cost_of``), as
``predictor.llm.kernels`` builds the serving step, at the rank's Megatron-LM dims
(``llm_shard.LLMShard``) for a micro-batch of ``b`` sequences of ``s`` tokens
(``T = b s``; ``T_s = T / t`` with sequence parallelism, else ``T``):

* embedding: vocab-parallel Gather of ``T`` rows from the rank's ``V_r x d`` table (learned
  positions: a Gather and an Add on ``T_s`` tokens);
* block: norm ``[T_s, d]``; QKV Gemm ``[T, d] x [d, (H_r + 2 Hkv_r) hd]``; rotary on Q and K;
  attention as the runtime's profile runs it — ``fused``: one ``Attention`` kernel whose FLOPs
  are scaled by the causal fraction ``(s + 1) / (2 s)`` (a flash kernel skips the blocks above
  the diagonal), ``eager``: QK^T MatMul, the profile's score passes, Softmax, (dropout), PV
  MatMul over the full ``s x s_k`` rectangle; O Gemm ``[T, H_r hd] x [H_r hd, d]``; residual
  Add ``[T_s, d]``; second norm; MLP: gate/up Gemm ``[T, d] x [d, 2 f_r]``, SwiGLU (or the
  activation and the gating Mul), down Gemm ``[T, f_r] x [f_r, d]``; residual Add;
* MoE block MLP: router Gemm over the ``T_r`` tokens the rank routes (``T_s``), TopK, Softmax
  over the ``k`` picks, the experts as a grouped (batched) MatMul ``[E_r, P / E_r, d] x
  [E_r, d, 2 f_e]`` over the rank's ``P`` token-expert pairs (Megatron-Core's grouped GEMM),
  the activation, the down MatMul and the weighted combine Mul ``[T_r, k, d]``. ``P``: with
  ``ep > 1`` each rank's ``E / ep`` experts receive, with balanced routing, as many pairs as
  its own tokens make: ``P = T_r k`` (the ranks of an expert group hold different tokens);
  with ``ep = 1`` every rank runs all ``T k`` pairs on its ``1/t`` slice of every expert;
* head: final norm ``[T_s, d]``; vocab-parallel LM head Gemm ``[T, d] x [d, V_r]``; the
  cross-entropy as a Softmax over ``[T, V_r]`` (its backward ``softmax - onehot``).

Backward kernels are the registered rules (``predictor.training.node_backward_kernels``) of
each node, every float input requiring grad except constants (``c.``: score scales, masks)
and integer inputs (``i.``); optimizer-update rows (``training.update_row_values``) one per
parameter tensor (``w.``). Bytes are rescaled to the run's precision as the graph path does
(``predictor.precision.rescale_cost``): weights and activations at its width, integers kept.
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
from roofcast.graph_import.types import OpNode, TensorInfo
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.kernels import attended_keys
from roofcast.predictor.parallel.llm_shard import LLMShard
from roofcast.predictor.precision import compute_dtype, rescale_cost
from roofcast.predictor.training import (
    backward_row_values,
    node_backward_kernels,
    update_row_values,
)
from roofcast.predictor.workload_rows import COLUMNS, GEMM_COLUMNS

#: tensor-name prefixes: trainable weights, constants (no gradient), integer indices.
WEIGHT, CONST, INDEX = "w.", "c.", "i."
_ACT_OP = {"silu": ("Swish", {}), "gelu": ("Gelu", {}), "gelu_tanh": ("Gelu", {"approximate": "tanh"}),
           "relu": ("Relu", {})}


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


def _t(name: str, *shape: float) -> TensorInfo:
    return TensorInfo(name, tuple(max(round(s), 1) for s in shape),
                      "int64" if name.startswith(INDEX) else "float")


class Nodes:
    """Accumulates costed forward ``OpNode`` s of one part (embedding, block or head)."""

    def __init__(self, arch: LLMArch, shard: LLMShard, micro: Micro) -> None:
        self.arch, self.shard, self.micro = arch, shard, micro
        self.nodes: list[OpNode] = []

    def add(self, name: str, op_type: str, inputs: Sequence[TensorInfo],
            outputs: Sequence[TensorInfo], attrs: dict | None = None,
            flops_scale: float = 1.0) -> None:
        weights = frozenset(t.name for t in inputs if t.name.startswith(WEIGHT))
        node = OpNode(name, op_type, "", tuple(inputs), tuple(outputs), attrs or {},
                      weight_inputs=weights)
        cost = cost_of(node)
        if cost is None:
            raise PredictionError(f"no cost rule for {op_type} (LLM training kernel {name})")
        if flops_scale != 1.0:
            cost = replace(cost, flops=cost.flops * flops_scale)
        self.nodes.append(replace(node, cost=cost))

    def gemm(self, name: str, tokens: float, k: int, n: int, bias: bool = False,
             weight: str | None = None) -> None:
        inputs = [_t(f"x.{name}", tokens, k), _t(weight or f"{WEIGHT}{name}", k, n)]
        if bias:
            inputs.append(_t(f"{WEIGHT}{name}.bias", n))
        self.add(name, "Gemm", inputs, [_t(f"y.{name}", tokens, n)])

    def norm(self, name: str, tokens: float) -> None:
        d = self.arch.d_model
        inputs = [_t(f"x.{name}", tokens, d), _t(f"{WEIGHT}{name}", d)]
        if self.arch.norm == "layernorm":
            self.add(name, "LayerNormalization", [*inputs, _t(f"{WEIGHT}{name}.b", d)],
                     [_t(f"y.{name}", tokens, d)], {"axis": -1})
        else:
            self.add(name, "RMSNormalization", inputs, [_t(f"y.{name}", tokens, d)],
                     {"axis": -1})

    def elementwise(self, name: str, op_type: str, *shape: float, constant: bool = False,
                    attrs: dict | None = None) -> None:
        """A binary elementwise op on ``shape`` (the second operand a constant when
        ``constant``: a scale or a dropout mask), or unary when ``op_type`` is an activation."""
        second = _t(f"{CONST if constant else 'x.'}{name}.b", *shape)
        inputs = [_t(f"x.{name}", *shape)] + ([] if op_type in ("Swish", "Gelu", "Relu")
                                               else [second])
        self.add(name, op_type, inputs, [_t(f"y.{name}", *shape)], attrs)


def embedding_nodes(arch: LLMArch, shard: LLMShard, micro: Micro) -> list[OpNode]:
    """Slot 0 (module docstring)."""
    n = Nodes(arch, shard, micro)
    d, tokens = arch.d_model, micro.tokens
    n.add("embed", "Gather", [_t(f"{WEIGHT}embed", shard.vocab, d), _t(f"{INDEX}ids", tokens)],
          [_t("y.embed", tokens, d)])
    local = tokens / shard.seq_split
    if arch.positions == "learned":
        n.add("pos_embed", "Gather", [_t(f"{WEIGHT}pos", arch.max_context, d),
              _t(f"{INDEX}pos", local)], [_t("y.pos_embed", local, d)])
        n.elementwise("pos_add", "Add", local, d)
    if micro.dropout:
        n.elementwise("embed_dropout", "Mul", local, d, constant=True)
    return n.nodes


def _attention(n: Nodes) -> None:
    a, sh, mc = n.arch, n.shard, n.micro
    b, s, hd = mc.batch, mc.seq, a.head_dim
    span, mean = attended_keys(s, s, a.sliding_window)
    if mc.attention == "fused":
        n.add("attn", "Attention", [_t("x.q", b, sh.heads, s, hd),
              _t("x.k", b, sh.kv_heads, span, hd), _t("x.v", b, sh.kv_heads, span, hd)],
              [_t("y.attn", b, sh.heads, s, hd)], flops_scale=mean / span)
        return
    g = sh.heads // sh.kv_heads
    scores = (b, sh.kv_heads, g * s, span)
    n.add("qk", "MatMul", [_t("x.q", b, sh.kv_heads, g * s, hd),
          _t("x.k", b, sh.kv_heads, hd, span)], [_t("y.qk", *scores)])
    for p in range(mc.score_passes):
        n.add(f"score{p}", "Mul", [_t(f"x.score{p}", *scores), _t(f"{CONST}score{p}")],
              [_t(f"y.score{p}", *scores)])
    n.add("softmax", "Softmax", [_t("x.softmax", *scores)], [_t("y.softmax", *scores)],
          {"axis": -1})
    if mc.dropout:
        n.elementwise("attn_dropout", "Mul", *scores, constant=True)
    n.add("pv", "MatMul", [_t("x.p", *scores), _t("x.v", b, sh.kv_heads, span, hd)],
          [_t("y.pv", b, sh.kv_heads, g * s, hd)])


def _activation(n: Nodes, name: str, *shape: float) -> None:
    a = n.arch
    if a.gated_mlp and a.activation == "silu":
        n.add(name, "SwiGLU", [_t(f"x.{name}.gate", *shape), _t(f"x.{name}.up", *shape)],
              [_t(f"y.{name}", *shape)])
        return
    op, attrs = _ACT_OP[a.activation]
    n.elementwise(name, op, *shape, attrs=attrs)
    if a.gated_mlp:
        n.elementwise(f"{name}_mul", "Mul", *shape)


def moe_pairs(arch: LLMArch, shard: LLMShard, micro: Micro) -> float:
    """Token-expert pairs the rank's experts run per micro-batch (module docstring)."""
    k = arch.experts_per_token
    if shard.ep > 1:
        return micro.tokens / shard.seq_split * k
    return float(micro.tokens * k)


def _mlp(n: Nodes) -> None:
    a, sh, mc = n.arch, n.shard, n.micro
    d, tokens = a.d_model, mc.tokens
    up_mats = 2 if a.gated_mlp else 1
    if a.n_experts <= 1:
        n.gemm("up", tokens, d, up_mats * sh.d_ff, bias=a.mlp_bias)
        _activation(n, "act", tokens, sh.d_ff)
        n.gemm("down", tokens, sh.d_ff, d, bias=a.mlp_bias)
        return
    routed, k = tokens / sh.seq_split, a.experts_per_token
    n.gemm("router", routed, d, a.n_experts)
    n.add("topk", "TopK", [_t("x.topk", routed, a.n_experts), _t(f"{INDEX}k", 1)],
          [_t("y.topk", routed, k), _t(f"{INDEX}topk", routed, k)], {"axis": -1})
    n.add("route_softmax", "Softmax", [_t("x.route", routed, k)], [_t("y.route", routed, k)],
          {"axis": -1})
    er, f = sh.experts, sh.expert_d_ff
    per_expert = moe_pairs(a, sh, mc) / er
    n.add("experts_up", "MatMul", [_t("x.experts_up", er, per_expert, d),
          _t(f"{WEIGHT}experts_up", er, d, up_mats * f)],
          [_t("y.experts_up", er, per_expert, up_mats * f)])
    _activation(n, "experts_act", er, per_expert, f)
    n.add("experts_down", "MatMul", [_t("x.experts_down", er, per_expert, f),
          _t(f"{WEIGHT}experts_down", er, f, d)], [_t("y.experts_down", er, per_expert, d)])
    n.add("combine", "Mul", [_t("x.combine", routed, k, d), _t("x.combine.w", routed, k, 1)],
          [_t("y.combine", routed, k, d)])


def block_nodes(arch: LLMArch, shard: LLMShard, micro: Micro) -> list[OpNode]:
    """One transformer block (module docstring)."""
    n = Nodes(arch, shard, micro)
    a, sh = arch, shard
    d, hd, tokens = a.d_model, a.head_dim, micro.tokens
    local = tokens / sh.seq_split
    n.norm("norm1", local)
    n.gemm("qkv", tokens, d, (sh.heads + 2 * sh.kv_heads) * hd, bias=a.qkv_bias)
    if a.positions == "rope":
        n.add("rotary", "RotaryEmbedding", [_t("x.rot", 1, sh.heads + sh.kv_heads, tokens, hd)],
              [_t("y.rot", 1, sh.heads + sh.kv_heads, tokens, hd)])
    _attention(n)
    n.gemm("o_proj", tokens, sh.heads * hd, d)
    if micro.dropout:
        n.elementwise("attn_out_dropout", "Mul", local, d, constant=True)
    n.elementwise("residual1", "Add", local, d)
    if not a.parallel_block:
        n.norm("norm2", local)
    _mlp(n)
    if micro.dropout:
        n.elementwise("mlp_dropout", "Mul", local, d, constant=True)
    n.elementwise("residual2", "Add", local, d)
    return n.nodes


def head_nodes(arch: LLMArch, shard: LLMShard, micro: Micro) -> list[OpNode]:
    """Slot L+1 (module docstring); a tied head uses the embedding's weight."""
    n = Nodes(arch, shard, micro)
    d, tokens = arch.d_model, micro.tokens
    n.norm("final_norm", tokens / shard.seq_split)
    n.gemm("lm_head", tokens, d, shard.vocab,
           weight=f"{WEIGHT}embed" if arch.tied_embeddings else None)
    n.add("cross_entropy", "Softmax", [_t("x.logits", tokens, shard.vocab)],
          [_t("y.logits", tokens, shard.vocab)], {"axis": -1})
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
                       for k in node_backward_kernels(nd, precision, grad_inputs(nd))]
        params: dict[str, tuple[TensorInfo, list[str]]] = {}
        for nd in nodes:
            for t in nd.inputs:
                if t.name in nd.weight_inputs and t.name not in skip_params:
                    params.setdefault(t.name, (t, []))[1].append(nd.name)
        values += [update_row_values(name, t, users, config)
                   for name, (t, users) in params.items()]
    return {c: [v[c] for v in values] for c in COLUMNS}
