"""The kernels of one decoder layer kind: the one builder serving steps (``kernels``) and
training blocks (``parallel.llm_block``) both call, each through its own ``Sink`` (how a
kernel becomes a row: serving dtypes and quantised weights, training gradients).

Per layer (``T`` projection tokens, ``T_l`` norm / residual / router tokens, ``T / tp`` with
sequence parallelism): norm ``[T_l, d]``; QKV Gemm ``[T, d] x [d, q + 2 kv]``; rotary on Q and
K; (serving) the KV-cache write; attention per call (``fused``: one kernel, FLOPs x the causal
fraction ``mean keys / span``; ``eager``: QK^T, score passes, Softmax, (dropout), PV); O Gemm;
residual Add; second norm unless ``parallel_block``; the MLP (up Gemm, activation, down Gemm)
or MoE (router Gemm, TopK, Softmax over the ``k`` picks, the experts in the road's
``ExpertWork`` form: serving one ``MoeExperts`` module row, ``expert_module_terms``; the shared
experts as a dense MLP, the weighted combine); residual Add.
qk-norm: an RMSNorm over the Q and K heads; sinks: one extra score per query row and head.
MLA (``mla``): prefill decompresses, decode attends over the latent. Shapes are elements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from roofcast.graph_import.llm.decoder import Attention, LayerKind, MoE
from roofcast.graph_import.types import TensorInfo
from roofcast.predictor.errors import PredictionError

#: op type and family of a routed-expert module row (serving; timed by the ``moe`` family).
MOE_OP, MOE_FAMILY = "MoeExperts", "moe"
#: tensor-name prefixes: projection weights, constants (no gradient), integer indices, KV.
WEIGHT, CONST, INDEX, KV = "w.", "c.", "i.", "kv."
_ACT_OP = {"silu": ("Swish", {}), "gelu": ("Gelu", {}),
           "gelu_tanh": ("Gelu", {"approximate": "tanh"}), "relu": ("Relu", {})}


def tensor(name: str, *shape: float) -> TensorInfo:
    """A float tensor (``i.``: int64) of ``shape`` rounded to whole elements, at least 1."""
    return TensorInfo(name, tuple(max(round(s), 1) for s in shape),
                      "int64" if name.startswith(INDEX) else "float")


def attended_keys(context: int, new_tokens: int, window: int, chunk: int = 0
                  ) -> tuple[int, float]:
    """(keys the kernel spans ``T_k``, mean keys a query attends) of ``new_tokens`` causal
    queries ending at ``context`` (sliding ``window``, 0: none; ``chunk``: a query at
    position ``p`` (1-based) attends the ``(p - 1) mod chunk + 1`` keys of its chunk)."""
    pos = np.arange(context - new_tokens, context, dtype=float) + 1.0
    if chunk:
        start = (context - new_tokens) // chunk * chunk
        return context - start, float(((pos - 1.0) % chunk + 1.0).mean())
    span = min(context, window + new_tokens - 1) if window else context
    mean = float(np.minimum(pos, window).mean() if window else pos.mean())
    return span, mean


def kind_keys(a: Attention, context: int, new_tokens: int) -> tuple[int, float]:
    """``attended_keys`` under ``a``'s window or chunk."""
    return attended_keys(context, new_tokens, a.window, a.chunk)


def cached_kv_elements(a: Attention, batch: int, new_tokens: int, context: int,
                       per_query_head: bool) -> float:
    """KV-cache elements one layer's attention of ``batch`` sequences converts from the cache
    dtype: ``b x cache_width / 2 x 2 x cached keys`` (``2 Hkv hd`` per key; MLA its latent),
    x ``G`` when the kernel converts per query head (not MLA: one latent for all heads).
    Cached keys: all of a decode segment's span; a prefill's span less its own new keys."""
    span, _ = kind_keys(a, context, new_tokens)
    cached = span if new_tokens == 1 else max(span - new_tokens, 0)
    g = a.group if per_query_head and a.latent is None else 1
    return float(batch * a.cache_width * cached * g)


class Sink(Protocol):
    """Where the builder's kernels go. ``small``: the prefix of norm / bias / router weights."""

    small: str

    def add(self, name: str, op_type: str, inputs: Sequence[TensorInfo],
            outputs: Sequence[TensorInfo], *, attrs: dict | None = None,
            flops_scale: float = 1.0) -> str: ...

    def gemm(self, name: str, tokens: float, k: int, n: int, *, bias: bool = False,
             small: bool = False, weight_elems: float | None = None) -> str: ...

    def cached_keys_read(self, call: AttentionCall, key: str, attention: Attention
                         ) -> None: ...

    def experts(self, name: str, kind: LayerKind, work: ExpertWork) -> str: ...


@dataclass(frozen=True)
class AttentionCall:
    """``batch`` sequences of ``queries`` new tokens attending ``context`` keys; ``label``
    tells the calls of one step apart (serving segments), ``segment`` what the sink needs."""

    label: str
    batch: int
    queries: int
    context: int
    segment: Any = None


@dataclass(frozen=True)
class ExpertWork:
    """How the experts run: ``module`` (serving: one fused MoE module over the ``pairs``
    token-expert pairs reading the ``touched`` experts' weights, ``expert_module_terms``) or
    ``grouped`` (training, Megatron-Core's grouped GEMM: ``experts`` local experts of
    ``pairs / experts`` pairs each)."""

    form: str
    pairs: float
    touched: float = 1.0
    experts: int = 1


@dataclass(frozen=True)
class LayerPass:
    """One pass of a layer kind on a device (module docstring): token counts, the attention
    calls and how they run, dropout (training), the KV-cache write (serving), the experts."""

    tokens: float
    local_tokens: float
    calls: tuple[AttentionCall, ...]
    attention: str = "fused"
    score_passes: int = 0
    dropout: bool = False
    kv_cache: bool = False
    experts: ExpertWork | None = None


def norm(sink: Sink, kind_norm: str, name: str, tokens: float, d: int) -> None:
    """RMSNorm or LayerNorm over ``[tokens, d]`` (gain, + bias for LayerNorm)."""
    ins = [tensor(f"x.{name}", tokens, d), tensor(f"{sink.small}{name}", d)]
    if kind_norm == "layernorm":
        sink.add(name, "LayerNormalization", [*ins, tensor(f"{sink.small}{name}.b", d)],
                 [tensor(f"y.{name}", tokens, d)], attrs={"axis": -1})
    else:
        sink.add(name, "RMSNormalization", ins, [tensor(f"y.{name}", tokens, d)],
                 attrs={"axis": -1})


def elementwise(sink: Sink, name: str, op_type: str, *shape: float, constant: bool = False,
                attrs: dict | None = None) -> None:
    """A binary elementwise op on ``shape`` (a constant second operand when ``constant``),
    or a unary activation."""
    second = tensor(f"{CONST if constant else 'x.'}{name}.b", *shape)
    inputs = [tensor(f"x.{name}", *shape)] + ([] if op_type in ("Swish", "Gelu", "Relu")
                                               else [second])
    sink.add(name, op_type, inputs, [tensor(f"y.{name}", *shape)], attrs=attrs)


def _attention(sink: Sink, kind: LayerKind, p: LayerPass, c: AttentionCall) -> None:
    a = kind.attention
    if a.latent is not None:
        mla(sink, a, c)
        return
    b, s, hd, i = c.batch, c.queries, a.head_dim, c.label
    span, mean = kind_keys(a, c.context, s)
    k_in, v_in = tensor(f"{KV}k{i}", b, a.n_kv_heads, span, hd), \
        tensor(f"{KV}v{i}", b, a.n_kv_heads, span, hd)
    if p.attention == "fused":
        key = sink.add(f"attn{i}", "Attention", [tensor(f"q.{i}", b, a.n_heads, s, hd), k_in,
                       v_in], [tensor(f"o.{i}", b, a.n_heads, s, hd)],
                       flops_scale=(mean + a.sinks) / span)
        sink.cached_keys_read(c, key, a)
        return
    scores = (b, a.n_kv_heads, a.group * s, span)
    key = sink.add(f"qk{i}", "MatMul", [tensor(f"q.{i}", b, a.n_kv_heads, a.group * s, hd),
                   tensor(f"{KV}k{i}", b, a.n_kv_heads, hd, span)], [tensor(f"s.{i}", *scores)])
    sink.cached_keys_read(c, key, a)
    for q in range(p.score_passes):
        name = f"score{i}.{q}" if i else f"score{q}"
        sink.add(name, "Mul", [tensor(f"s.{i}", *scores), tensor(f"{CONST}{name}")],
                 [tensor(f"s.{i}.{q}", *scores)])
    sink.add(f"softmax{i}", "Softmax", [tensor(f"s.{i}", *scores)],
             [tensor(f"p.{i}", *scores)], attrs={"axis": -1})
    if p.dropout:
        elementwise(sink, f"attn_dropout{i}", "Mul", *scores, constant=True)
    sink.add(f"pv{i}", "MatMul", [tensor(f"p.{i}", *scores), v_in],
             [tensor(f"o.{i}", b, a.n_kv_heads, a.group * s, hd)])


def mla(sink: Sink, a: Attention, c: AttentionCall) -> None:
    """Multi-head latent attention of one call (``r_kv`` latent, ``r`` rope, ``n`` nope, ``v``
    value channels, ``H`` heads, ``b`` sequences of ``s`` queries over ``span`` keys, FLOPs).
    Prefill (``s > 1``), decompress then attend: ``kv_b`` Gemm ``[b span, r_kv] x [r_kv,
    H (n + v)]`` (``2 b span r_kv H (n + v)``), then MHA with ``n + r`` query/key and ``v``
    value channels (``2 b H s mean (n + r + v)``). Decode (``s = 1``), absorbed weights:
    ``q_absorb`` ``2 b H n r_kv`` and ``o_absorb`` ``2 b H r_kv v`` (weights ``H n r_kv`` and
    ``H r_kv v`` elements), attention of ``H`` query heads over one latent head,
    ``2 b H span (2 r_kv + r)``; bytes: the latent ``b span (r_kv + r)`` cache elements once
    (its value half is the same latent, not read again)."""
    m, i, b, s, h = a.latent, c.label, c.batch, c.queries, a.n_heads
    assert m is not None
    span, mean = kind_keys(a, c.context, s)
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    if s > 1:
        sink.gemm(f"kv_b{i}", b * span, m.kv_lora_rank, h * (m.qk_nope_head_dim + m.v_head_dim))
        key = sink.add(f"attn{i}", "Attention", [
            tensor(f"q.{i}", b, h, s, qk), tensor(f"x.k{i}", b, h, span, qk),
            tensor(f"x.v{i}", b, h, span, m.v_head_dim)],
            [tensor(f"o.{i}", b, h, s, m.v_head_dim)], flops_scale=mean / span)
        sink.cached_keys_read(c, key, a)
        return
    t = b * s
    sink.gemm(f"q_absorb{i}", t * h, m.qk_nope_head_dim, m.kv_lora_rank,
              weight_elems=h * m.qk_nope_head_dim * m.kv_lora_rank)
    key = sink.add(f"attn{i}", "Attention", [
        tensor(f"q.{i}", b, h, s, m.cache_width), tensor(f"{KV}k{i}", b, 1, span, m.cache_width),
        tensor(f"x.v{i}", b, 1, 1, m.kv_lora_rank)],
        [tensor(f"o.{i}", b, h, s, m.kv_lora_rank)], flops_scale=mean / span)
    sink.cached_keys_read(c, key, a)
    sink.gemm(f"o_absorb{i}", t * h, m.kv_lora_rank, m.v_head_dim,
              weight_elems=h * m.kv_lora_rank * m.v_head_dim)


def _projections(sink: Sink, kind: LayerKind, p: LayerPass) -> None:
    """Q, K, V (MLA: the query path and the latent ``kv_a``), qk-norm, rotary, KV write."""
    a, d, m = kind.attention, kind.d_model, kind.attention.latent
    rope = a.head_dim
    if m is None:
        sink.gemm("qkv", p.tokens, d, a.q_dim + 2 * a.kv_dim, bias=a.qkv_bias)
    else:
        rope, q_width = m.qk_rope_head_dim, a.n_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        if m.q_lora_rank:
            sink.gemm("q_a", p.tokens, d, m.q_lora_rank)
            norm(sink, "rmsnorm", "q_a_norm", p.tokens, m.q_lora_rank)
        sink.gemm("q_b" if m.q_lora_rank else "q", p.tokens, m.q_lora_rank or d, q_width)
        sink.gemm("kv_a", p.tokens, d, m.cache_width)
        norm(sink, "rmsnorm", "kv_a_norm", p.tokens, m.kv_lora_rank)
    if a.qk_norm:
        norm(sink, "rmsnorm", "qk_norm", p.tokens * (a.n_heads + a.n_kv_heads), a.head_dim)
    if a.positions == "rope":
        rot = (1, a.n_heads + (1 if m else a.n_kv_heads), p.tokens, rope)
        sink.add("rotary", "RotaryEmbedding", [tensor("x.rot", *rot)], [tensor("y.rot", *rot)])
    if p.kv_cache:
        sink.add("kv_write", "Cast", [tensor("x.kvnew", p.tokens, a.cache_width)],
                 [tensor(f"{KV}write", p.tokens, a.cache_width)])


def _activation(sink: Sink, kind: LayerKind, name: str, *shape: float) -> None:
    m = kind.mlp
    if m.gated and m.activation == "silu":
        sink.add(name, "SwiGLU", [tensor(f"x.{name}.gate", *shape),
                 tensor(f"x.{name}.up", *shape)], [tensor(f"y.{name}", *shape)])
        return
    op, attrs = _ACT_OP[m.activation]
    elementwise(sink, name, op, *shape, attrs=attrs)
    if m.gated:
        elementwise(sink, f"{name}_mul", "Mul", *shape)


def expert_module_terms(pairs: float, touched: float, d: int, d_ff: int, up_width: int,
                        weight_bpe: float, act_bpe: float, out_bpe: float) -> dict[str, float]:
    """Work of one routed-expert module (up Gemm, activation, down Gemm of ``pairs``
    token-expert pairs over ``touched`` experts): FLOPs ``2 P d (u + f)``; bytes read: the
    touched experts' weights ``E_t d (u + f)`` x ``weight_bpe`` (scales included) + the
    ``P (d + f)`` activations; written ``P (u + d)`` x ``out_bpe``; GEMM dims ``(E_t, P / E_t,
    f, d)``. The one costing both the LLM rows and aiconfigurator's MoE rows use."""
    width = up_width + d_ff
    weights = touched * d * width * weight_bpe
    return {"flops": 2.0 * pairs * d * width,
            "bytes_read": weights + pairs * (d + d_ff) * act_bpe,
            "bytes_written": pairs * (up_width + d) * out_bpe, "weight_bytes": weights,
            "gemm_batch": touched, "gemm_m": pairs / max(touched, 1.0), "gemm_n": float(d_ff),
            "gemm_k": float(d)}


def _experts_module(sink: Sink, kind: LayerKind, w: ExpertWork) -> None:
    """Serving: one MoE module row over the step's token-expert pairs (``ExpertWork``)."""
    sink.experts("experts", kind, w)


def _experts_grouped(sink: Sink, kind: LayerKind, w: ExpertWork) -> None:
    """Training: Megatron-Core's grouped GEMM, ``[E_r, P / E_r, d] x [E_r, d, up]``."""
    m, d, er = kind.mlp, kind.d_model, w.experts
    per = w.pairs / er
    sink.add("experts_up", "MatMul", [tensor("x.experts_up", er, per, d),
             tensor(f"{WEIGHT}experts_up", er, d, m.up_width)],
             [tensor("y.experts_up", er, per, m.up_width)])
    _activation(sink, kind, "experts_act", er, per, m.d_ff)
    sink.add("experts_down", "MatMul", [tensor("x.experts_down", er, per, m.d_ff),
             tensor(f"{WEIGHT}experts_down", er, m.d_ff, d)],
             [tensor("y.experts_down", er, per, d)])


#: expert forms (``ExpertWork.form``) -> their kernels.
EXPERT_FORMS: dict[str, Callable[[Sink, LayerKind, ExpertWork], None]] = {
    "module": _experts_module, "grouped": _experts_grouped}


def _ffn(sink: Sink, kind: LayerKind, p: LayerPass) -> None:
    m, d = kind.mlp, kind.d_model
    moe = kind.moe
    if not isinstance(moe, MoE):
        sink.gemm("up", p.tokens, d, m.up_width, bias=m.bias)
        _activation(sink, kind, "act", p.tokens, m.d_ff)
        sink.gemm("down", p.tokens, m.d_ff, d, bias=m.bias)
        return
    routed, k, e = p.local_tokens, moe.top_k, moe.n_experts
    sink.gemm("router", routed, d, e, small=True)
    sink.add("topk", "TopK", [tensor("x.router", routed, e), tensor(f"{INDEX}k", 1)],
             [tensor("y.topk", routed, k), tensor(f"{INDEX}topk", routed, k)], attrs={"axis": -1})
    sink.add("route_softmax", "Softmax", [tensor("x.topk", routed, k)],
             [tensor("y.route", routed, k)], attrs={"axis": -1})
    if p.experts is None:
        raise PredictionError("an MoE layer pass needs its ExpertWork (how the experts run)")
    EXPERT_FORMS[p.experts.form](sink, kind, p.experts)
    if moe.n_shared:
        sink.gemm("shared_up", p.tokens, d, moe.n_shared * m.up_width, bias=m.bias)
        _activation(sink, kind, "shared_act", p.tokens, moe.n_shared * m.d_ff)
        sink.gemm("shared_down", p.tokens, moe.n_shared * m.d_ff, d, bias=m.bias)
    sink.add("combine", "Mul", [tensor("x.combine", routed, k, d),
             tensor("x.combine.w", routed, k, 1)], [tensor("y.combine", routed, k, d)])


def layer_kernels(sink: Sink, kind: LayerKind, p: LayerPass) -> None:
    """Append the kernels of one layer of ``kind`` (local widths) run as ``p`` to ``sink``."""
    a, d, local = kind.attention, kind.d_model, p.local_tokens
    norm(sink, kind.norm, "norm1", local, d)
    _projections(sink, kind, p)
    for call in p.calls:
        _attention(sink, kind, p, call)
    sink.gemm("o_proj", p.tokens, a.v_dim, d)
    if p.dropout:
        elementwise(sink, "attn_out_dropout", "Mul", local, d, constant=True)
    elementwise(sink, "residual1", "Add", local, d)
    if not kind.parallel_block:
        norm(sink, kind.norm, "norm2", local, d)
    _ffn(sink, kind, p)
    if p.dropout:
        elementwise(sink, "mlp_dropout", "Mul", local, d, constant=True)
    elementwise(sink, "residual2", "Add", local, d)
