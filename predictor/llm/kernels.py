"""The kernels of one engine step of a decoder-only LLM, costed through the op cost registry.

A step runs ``segments``: groups of ``batch`` sequences that each bring ``new_tokens`` tokens
and attend ``context`` keys after the step (past + new). A prefill of N tokens at batch B is
``Segment(B, N, N)``; a decode step at context L is ``Segment(B, 1, L)``; a continuous-batching
step mixes both (``phases``). ``T`` = the step's tokens = sum of ``batch x new_tokens``.

Rows (one ``OpNode`` each, costed by ``graph_import.costs.cost_of``, then bytes set per tensor
class, ``precision``): ``count`` = ``n_layers`` for a layer's kernels, 1 for the once-per-step
ones.

* per layer: norm [T, d]; QKV projection (Gemm [T, d] x [d, q + 2 kv], + bias); rotary on Q and
  K (``positions = rope``); KV-cache write (Cast of the new K, V [T, 2 kv] to the KV dtype);
  attention per segment; O projection; residual Add(s); second norm (not for
  ``parallel_block``); MLP: gated = fused gate/up Gemm [d, 2 d_ff] + SwiGLU (silu) or Gelu +
  Mul, else up Gemm + activation; down Gemm. MoE: router Gemm [d, E], TopK, Softmax over the
  k picks, expert GEMMs over ``T x k`` token-expert pairs reading the weights of the experts
  the step touches, the weighted combine (Mul).
* per step: embedding Gather (+ learned positions Add), final norm over T tokens, LM head Gemm
  and a Softmax (sampling) over ``vocab`` for the sequences that emit a token
  (``Segment.emits``: the last token of each prefilled sequence, every decoded sequence).

**Attention** of a segment with ``s`` queries per sequence and ``T_k = min(context, window +
s - 1)`` keys (``window`` = ``sliding_window``, 0: none), Q [b, H, s, hd], K/V [b, Hkv, T_k,
hd] at the KV dtype (GQA/MQA read K/V once per KV head):

* ``fused`` (the profile's ``attention``): one ONNX ``Attention`` kernel (FLOPs of QK^T and PV +
  per-score scale and softmax; bytes Q, K, V, O only) whose FLOPs are scaled by the causal
  fraction ``mean_attended / T_k`` (a flash kernel skips the blocks above the diagonal and
  outside the window; mean over the s queries at positions ``context - s + i`` of
  ``min(position + 1, window)``);
* ``eager``: QK^T MatMul [b, Hkv, G s, hd] x [b, Hkv, hd, T_k] (G = H / Hkv query heads per KV
  head), the profile's ``attention_score_passes`` elementwise passes over the score matrix,
  Softmax, PV MatMul; the full s x T_k rectangle is computed (masked).

**MoE distinct experts**: a step of ``T`` tokens routing each to ``k`` of ``E`` experts
touches ``E x (1 - (1 - k/E)^T)`` experts per layer in expectation (each expert is missed by
one token with probability ``1 - k/E``, independent uniform routing). Decode at batch B reads
only those experts' weights; prefill touches nearly all. FLOPs are ``T x k`` tokens' worth.

**Quantised weights** (``precision.gemm_plan``): a projection GEMM computes at the plan's
dtype; a weight-only plan adds a ``Dequantize`` vector row (``overlaps`` = the GEMM's key)
that ``phases`` folds into the GEMM as ``max(GEMM time, dequant compute time)``.

**Quantised KV cache** (``precision`` "KV-cache conversion cost"): each attention kernel that
reads cached keys gets one ``KvConvert`` vector row per device condition of
``precision.KV_CONVERT_OPS`` (column ``applies``: ``""`` every device, ``fp8-units`` /
``no-fp8-units``), overlapping the attention kernel (eager: its QK^T MatMul); ``phases``
charges the row whose condition the device meets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from roofcast.graph_import.costs import cost_of
from roofcast.graph_import.costs.gemm_dims import gemm_dims
from roofcast.graph_import.costs.inner_dims import inner_elems_or_nan
from roofcast.graph_import.costs.registry import op_family
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.types import Engine, OpNode, TensorInfo
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.precision import (
    KV_CONVERT_DTYPE,
    TensorDtypes,
    dtype_bytes,
    weight_bytes_per_element,
)
from roofcast.predictor.runtimes import ExecutionProfile
from roofcast.predictor.workload_rows import COLUMNS, GEMM_COLUMNS

#: columns the LLM workload adds to ``predictor.workload_rows.COLUMNS``.
LLM_COLUMNS: tuple[str, ...] = ("count", "step", "overlaps", "fallback_only", "scope",
                                 "applies")
#: bytes per element of the graph_import tensors the nodes are built with ("float").
_BUILD_BYTES = 4.0
#: tensor-name prefixes -> tensor class: projection weights, small weights kept at the
#: model dtype (norms, biases, router, embedding, LM head), KV cache, integer indices; other
#: tensors are activations.
_WEIGHT, _SMALL, _KV, _INDEX = "w.", "n.", "kv.", "i."
_ACT_OP = {"silu": ("Swish", {}), "gelu": ("Gelu", {}), "gelu_tanh": ("Gelu", {"approximate": "tanh"}),
           "relu": ("Relu", {})}


@dataclass(frozen=True)
class Segment:
    """``batch`` sequences, each adding ``new_tokens`` tokens and attending ``context`` keys
    after this step; ``emits``: whether each sequence samples a token this step."""

    batch: int
    new_tokens: int
    context: int
    emits: bool = True

    def __post_init__(self) -> None:
        if self.batch < 1 or self.new_tokens < 1 or self.context < self.new_tokens:
            raise PredictionError(f"bad segment {self}: batch and new_tokens must be >= 1 and "
                                  "context >= new_tokens")

    @property
    def tokens(self) -> int:
        return self.batch * self.new_tokens


def expected_experts(n_experts: int, per_token: int, tokens: float) -> float:
    """Distinct experts ``tokens`` tokens touch: ``E (1 - (1 - k/E)^tokens)`` (module doc)."""
    if n_experts <= 1:
        return 1.0
    return float(n_experts * (1.0 - (1.0 - per_token / n_experts) ** tokens))


def expected_max_binomial(n: int, p: float, groups: int) -> float:
    """Expected maximum of ``groups`` independent Binomial(``n``, ``p``) counts:
    ``sum_{j=0}^{n-1} (1 - F(j)^groups)`` (``F`` the binomial CDF; summed exactly over
    mean +- 12 standard deviations, the terms below that range are 1)."""
    if n <= 0 or p <= 0.0:
        return 0.0
    if p >= 1.0 or groups <= 1:
        return float(n) * min(p, 1.0)
    mean, sd = n * p, math.sqrt(n * p * (1.0 - p))
    lo, hi = max(0, math.floor(mean - 12 * sd)), min(n, math.ceil(mean + 12 * sd))
    j = np.arange(lo, hi + 1)
    log_pmf = np.array([math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                        for k in j]) + j * math.log(p) + (n - j) * math.log1p(-p)
    cdf = np.cumsum(np.exp(log_pmf - log_pmf.max()))
    cdf /= cdf[-1]
    return float(lo + np.sum(1.0 - cdf[: max(0, min(hi, n - 1) - lo + 1)] ** groups))


def busiest_share(n_experts: int, per_token: int, tokens: float, groups: int
                  ) -> tuple[float, float]:
    """(distinct experts, token-expert pairs) of the busiest of ``groups`` expert-parallel
    groups, each holding ``E / groups`` experts, for a step of ``tokens`` tokens routed to
    ``k`` experts each (uniform independent routing): every expert is touched with probability
    ``p = 1 - (1 - k/E)^T``, so a group touches Binomial(``E / groups``, p) experts; the ``T k``
    pairs land on a group with probability ``1 / groups`` each, Binomial(``T k``, 1/groups)
    per group; the step waits for the maximum over the groups (``expected_max_binomial``). One
    group: ``(expected_experts, T k)``."""
    if groups <= 1:
        return expected_experts(n_experts, per_token, tokens), float(tokens * per_token)
    p = 1.0 - (1.0 - per_token / n_experts) ** tokens
    experts = expected_max_binomial(n_experts // groups, p, groups)
    pairs = expected_max_binomial(round(tokens * per_token), 1.0 / groups, groups)
    return experts, pairs


def attended_keys(context: int, new_tokens: int, window: int) -> tuple[int, float]:
    """(keys the kernel spans ``T_k``, mean keys a query attends) of ``new_tokens`` causal
    queries ending at ``context`` (sliding ``window``, 0: none)."""
    span = min(context, window + new_tokens - 1) if window else context
    pos = np.arange(context - new_tokens, context, dtype=float) + 1.0
    mean = float(np.minimum(pos, window).mean() if window else pos.mean())
    return span, mean


def _t(name: str, *shape: int) -> TensorInfo:
    return TensorInfo(name, tuple(int(s) for s in shape), "int64" if name.startswith(_INDEX)
                      else "float")


class _Rows:
    """Accumulates costed rows (workload columns + ``LLM_COLUMNS``)."""

    def __init__(self, arch: LLMArch, dtypes: TensorDtypes, step: str, ep: int = 1) -> None:
        self.arch, self.dtypes, self.step, self.ep = arch, dtypes, step, ep
        self.cols: dict[str, list] = {c: [] for c in (*COLUMNS, *LLM_COLUMNS)}

    def _bpe(self, t: TensorInfo, k: int) -> float:
        """Storage bytes per element of tensor ``t`` (class by name prefix)."""
        if t.name.startswith(_WEIGHT):
            return weight_bytes_per_element(self.dtypes.weights, k)
        if t.name.startswith(_KV):
            return self.dtypes.kv_bytes
        if t.name.startswith(_INDEX):
            return 8.0
        if t.name.startswith(_SMALL):
            return dtype_bytes(self.dtypes.model_dtype)
        return self.dtypes.act_bytes

    def _scale(self, tensors, k: int) -> float:
        total = scaled = 0.0
        for t in tensors:
            if t is None:
                continue
            total += t.numel * _BUILD_BYTES
            scaled += t.numel * self._bpe(t, k)
        return scaled / total if total else 1.0

    def add(self, name: str, op_type: str, inputs: Sequence[TensorInfo | None],
            outputs: Sequence[TensorInfo], *, count: int, dtype: str, attrs: dict | None = None,
            flops_scale: float = 1.0, weight_elems: float | None = None) -> str:
        """Cost one node and append its row; returns the row key. ``weight_elems``: the
        weight elements the kernel reads when they differ from its weight tensors' (MoE)."""
        weights = frozenset(t.name for t in inputs if t is not None
                            and t.name.startswith((_WEIGHT, _SMALL)))
        node = OpNode(name, op_type, "", tuple(inputs), tuple(outputs), attrs or {},
                      weight_inputs=weights)
        cost = cost_of(node)
        if cost is None:
            raise PredictionError(f"no cost rule for {op_type} (LLM kernel {name})")
        k = inputs[0].shape[-1] if inputs and inputs[0] is not None and inputs[0].shape else 1
        w_in = [t for t in inputs if t is not None and t.name in weights]
        a_in = [t for t in inputs if t is not None and t.name not in weights]
        w_bytes = cost.weight_bytes * self._scale(w_in, k)
        if weight_elems is not None and w_in:
            w_bytes = weight_elems * self._bpe(w_in[0], k)
        act_read = max(cost.bytes_read - cost.weight_bytes, 0.0) * self._scale(a_in, k)
        dims = gemm_dims(node)
        key = f"{self.step}:{name}"
        values = {
            "node": name, "op_type": op_type, "family": op_family(node), "phase": "forward",
            "engine": cost.engine.value, "dtype": dtype, "flops": cost.flops * flops_scale,
            "bytes_read": act_read + w_bytes,
            "bytes_written": cost.bytes_written * self._scale(outputs, k),
            "weight_bytes": w_bytes,
            **dict(zip(GEMM_COLUMNS, (np.nan,) * 4 if dims is None else dims, strict=True)),
            "fused_nodes": name, "inner_elems": inner_elems_or_nan(node), "key": key,
            "kernel": "forward", "domain": "", "grad_of": "", "count": float(count),
            "step": self.step, "overlaps": "", "fallback_only": False,
            "scope": "layer" if count == self.arch.n_layers else "step", "applies": "",
        }
        for c, v in values.items():
            self.cols[c].append(v)
        return key

    def gemm(self, name: str, tokens: int, k: int, n: int, *, count: int, bias: bool = False,
             quantised: bool = True, weight_elems: float | None = None) -> None:
        """A projection Gemm [tokens, k] x [k, n] (+ bias); quantised weights get the plan's
        compute dtype and a ``Dequantize`` row overlapping it."""
        plan = self.dtypes.gemm_plan()
        prefix = _WEIGHT if quantised else _SMALL
        inputs = [_t(f"x.{name}", tokens, k), _t(f"{prefix}{name}", k, n)]
        if bias:
            inputs.append(_t(f"n.{name}.bias", n))
        dtype = plan.compute if quantised else self.dtypes.vector_dtype
        key = self.add(name, "Gemm", inputs, [_t(f"y.{name}", tokens, n)], count=count,
                       dtype=dtype, weight_elems=weight_elems)
        if quantised and plan.dequant_flops_per_weight > 0:
            elems = float(k * n) if weight_elems is None else weight_elems
            self.dequant(name, key, plan.dequant_flops(elems, tokens), count,
                              plan.dequant_on_fallback_only)

    def dequant(self, name: str, key: str, flops: float, count: int,
                fallback_only: bool) -> None:
        """A ``Dequantize`` vector row (no traffic of its own) overlapping GEMM ``key``."""
        self.overlapping(f"{name}.dequant", "Dequantize", key, flops, count,
                         self.dtypes.vector_dtype, fallback_only=fallback_only)

    def overlapping(self, name: str, op_type: str, key: str, flops: float, count: int,
                    dtype: str, *, fallback_only: bool = False, applies: str = "") -> None:
        """A vector row of ``flops`` (no traffic of its own) that runs inside the kernel of
        row ``key`` (``overlaps``): a weight dequantisation or a KV conversion."""
        row = {c: v[-1] for c, v in self.cols.items()}
        row.update({"node": name, "op_type": op_type, "family": "quantization",
                    "engine": Engine.VECTOR.value, "dtype": dtype,
                    "flops": flops, "bytes_read": 0.0, "bytes_written": 0.0,
                    "weight_bytes": 0.0, "gemm_batch": np.nan, "gemm_m": np.nan,
                    "gemm_n": np.nan, "gemm_k": np.nan, "fused_nodes": name,
                    "inner_elems": np.nan, "key": f"{key}.{op_type}{applies}",
                    "count": float(count), "overlaps": key, "fallback_only": fallback_only,
                    "applies": applies})
        for c, v in row.items():
            self.cols[c].append(v)

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.cols)
        for c in ("flops", "bytes_read", "bytes_written", "weight_bytes", *GEMM_COLUMNS,
                  "inner_elems", "count"):
            df[c] = df[c].astype(float)
        return df


def _norm(rows: _Rows, name: str, tokens: int, count: int) -> None:
    a = rows.arch
    if a.norm == "layernorm":
        rows.add(name, "LayerNormalization", [_t(f"x.{name}", tokens, a.d_model),
                 _t(f"n.{name}.g", a.d_model), _t(f"n.{name}.b", a.d_model)],
                 [_t(f"y.{name}", tokens, a.d_model)], count=count,
                 dtype=rows.dtypes.vector_dtype, attrs={"axis": -1})
    else:
        rows.add(name, "RMSNormalization", [_t(f"x.{name}", tokens, a.d_model),
                 _t(f"n.{name}.g", a.d_model)], [_t(f"y.{name}", tokens, a.d_model)],
                 count=count, dtype=rows.dtypes.vector_dtype, attrs={"axis": -1})


def kv_elements_converted(arch: LLMArch, seg: Segment, per_query_head: bool) -> float:
    """KV elements one layer's attention kernel of ``seg`` converts from the cache dtype
    (``precision`` "KV-cache conversion cost"): ``2 x b x Hkv x hd x cached keys``, x ``G``
    when the kernel converts per query head. Cached keys: all of a decode segment's span; a
    prefill segment's span less its own new keys (fresh from the QKV projection)."""
    span, _ = attended_keys(seg.context, seg.new_tokens, arch.sliding_window)
    cached = span if seg.new_tokens == 1 else max(span - seg.new_tokens, 0)
    g = arch.n_heads // arch.n_kv_heads if per_query_head else 1
    return 2.0 * seg.batch * arch.n_kv_heads * arch.head_dim * cached * g


def _kv_convert(rows: _Rows, i: int, seg: Segment, key: str, profile: ExecutionProfile) -> None:
    """The ``KvConvert`` rows of attention kernel ``key`` (module docstring)."""
    per_query = profile.serving is not None and profile.serving.kv_convert_per == "query-head"
    elems = kv_elements_converted(rows.arch, seg, per_query)
    for cond, flops in rows.dtypes.kv_convert_flops(elems).items():
        if flops > 0:
            rows.overlapping(f"kv_convert{i}", "KvConvert", key, flops, rows.arch.n_layers,
                             KV_CONVERT_DTYPE, applies=cond)


def _attention(rows: _Rows, i: int, seg: Segment, profile: ExecutionProfile) -> None:
    a, L = rows.arch, rows.arch.n_layers
    vdt = rows.dtypes.vector_dtype
    b, s = seg.batch, seg.new_tokens
    span, mean = attended_keys(seg.context, s, a.sliding_window)
    g = a.n_heads // a.n_kv_heads
    if profile.attention == "fused":
        key = rows.add(f"attn{i}", "Attention", [_t(f"q.{i}", b, a.n_heads, s, a.head_dim),
                       _t(f"kv.k{i}", b, a.n_kv_heads, span, a.head_dim),
                       _t(f"kv.v{i}", b, a.n_kv_heads, span, a.head_dim)],
                       [_t(f"o.{i}", b, a.n_heads, s, a.head_dim)], count=L, dtype=vdt,
                       flops_scale=mean / span)
        _kv_convert(rows, i, seg, key, profile)
        return
    scores = (b, a.n_kv_heads, g * s, span)
    key = rows.add(f"qk{i}", "MatMul", [_t(f"q.{i}", b, a.n_kv_heads, g * s, a.head_dim),
                   _t(f"kv.k{i}", b, a.n_kv_heads, a.head_dim, span)], [_t(f"s.{i}", *scores)],
                   count=L, dtype=vdt)
    _kv_convert(rows, i, seg, key, profile)
    for p in range(profile.attention_score_passes):
        rows.add(f"score{i}.{p}", "Mul", [_t(f"s.{i}", *scores), _t(f"c.{i}.{p}")],
                 [_t(f"s.{i}.{p}", *scores)], count=L, dtype=vdt)
    rows.add(f"softmax{i}", "Softmax", [_t(f"s.{i}", *scores)], [_t(f"p.{i}", *scores)],
             count=L, dtype=vdt, attrs={"axis": -1})
    rows.add(f"pv{i}", "MatMul", [_t(f"p.{i}", *scores),
             _t(f"kv.v{i}", b, a.n_kv_heads, span, a.head_dim)],
             [_t(f"o.{i}", b, a.n_kv_heads, g * s, a.head_dim)], count=L, dtype=vdt)


def _mlp(rows: _Rows, tokens: int) -> None:
    a, L = rows.arch, rows.arch.n_layers
    vdt = rows.dtypes.vector_dtype
    moe = a.n_experts > 1
    pairs, touched = tokens, 1.0
    if moe and rows.ep > 1:
        touched, share = busiest_share(a.n_experts, a.experts_per_token, tokens, rows.ep)
        pairs = max(1, round(share))
    elif moe:
        pairs = tokens * a.experts_per_token
        touched = expected_experts(a.n_experts, a.experts_per_token, tokens)
    if moe:
        rows.gemm("router", tokens, a.d_model, a.n_experts, count=L, quantised=False)
        rows.add("topk", "TopK", [_t("x.router", tokens, a.n_experts), _t("i.k", 1)],
                 [_t("y.topk", tokens, a.experts_per_token),
                  _t("i.topk", tokens, a.experts_per_token)], count=L, dtype=vdt)
        rows.add("route_softmax", "Softmax", [_t("x.topk", tokens, a.experts_per_token)],
                 [_t("y.route", tokens, a.experts_per_token)], count=L, dtype=vdt,
                 attrs={"axis": -1})
    up_n = (2 if a.gated_mlp else 1) * a.d_ff
    rows.gemm("up", pairs, a.d_model, up_n, count=L, bias=a.mlp_bias,
              weight_elems=touched * a.d_model * up_n if moe else None)
    if a.gated_mlp and a.activation == "silu":
        rows.add("act", "SwiGLU", [_t("x.gate", pairs, a.d_ff), _t("x.up", pairs, a.d_ff)],
                 [_t("y.act", pairs, a.d_ff)], count=L, dtype=vdt)
    else:
        op, attrs = _ACT_OP[a.activation]
        rows.add("act", op, [_t("x.gate", pairs, a.d_ff)], [_t("y.act", pairs, a.d_ff)],
                 count=L, dtype=vdt, attrs=attrs)
        if a.gated_mlp:
            rows.add("act_mul", "Mul", [_t("y.act", pairs, a.d_ff), _t("x.up", pairs, a.d_ff)],
                     [_t("y.glu", pairs, a.d_ff)], count=L, dtype=vdt)
    rows.gemm("down", pairs, a.d_ff, a.d_model, count=L, bias=a.mlp_bias,
              weight_elems=touched * a.d_ff * a.d_model if moe else None)
    if moe:
        rows.add("combine", "Mul", [_t("x.experts", tokens, a.experts_per_token, a.d_model),
                 _t("x.weights", tokens, a.experts_per_token, 1)],
                 [_t("y.combine", tokens, a.experts_per_token, a.d_model)], count=L, dtype=vdt)


def steps_workload(arch: LLMArch, steps: Sequence[tuple[str, Sequence[Segment]]],
                   dtypes: TensorDtypes, profile: ExecutionProfile, *,
                   ep: int = 1) -> pd.DataFrame:
    """The workload rows of several engine steps, each ``(label, segments)``, in one table
    (column ``step`` = the label, also the key prefix). ``arch``: the shapes one device runs
    (``sharding.local_arch`` under tensor parallelism); ``ep``: expert-parallel groups, whose
    busiest one the MoE rows cost (``busiest_share``)."""
    rows = _Rows(arch, dtypes, "", ep)
    for label, segments in steps:
        rows.step = label
        _step_rows(rows, segments, profile)
    return rows.frame()


def step_workload(arch: LLMArch, segments: Sequence[Segment], dtypes: TensorDtypes,
                  profile: ExecutionProfile, step: str = "step") -> pd.DataFrame:
    """The workload rows of one engine step over ``segments`` (module docstring); ``step``
    labels the rows (column ``step``, key prefix)."""
    return steps_workload(arch, [(step, segments)], dtypes, profile)


def _step_rows(rows: _Rows, segments: Sequence[Segment], profile: ExecutionProfile) -> None:
    """Append one step's rows (module docstring) to ``rows``."""
    if not segments:
        raise PredictionError("a step needs at least one segment")
    a, L = rows.arch, rows.arch.n_layers
    vdt = rows.dtypes.vector_dtype
    tokens = sum(s.tokens for s in segments)
    emit = sum(s.batch for s in segments if s.emits)
    d = a.d_model
    rows.add("embed", "Gather", [_t("n.embed", a.vocab, d), _t("i.ids", tokens)],
             [_t("y.embed", tokens, d)], count=1, dtype=vdt)
    if a.positions == "learned":
        rows.add("pos_add", "Add", [_t("y.embed", tokens, d), _t("x.pos", tokens, d)],
                 [_t("y.pos", tokens, d)], count=1, dtype=vdt)
    _norm(rows, "norm1", tokens, L)
    rows.gemm("qkv", tokens, d, a.q_dim + 2 * a.kv_dim, count=L, bias=a.qkv_bias)
    if a.positions == "rope":
        rows.add("rotary", "RotaryEmbedding",
                 [_t("x.rot", 1, a.n_heads + a.n_kv_heads, tokens, a.head_dim)],
                 [_t("y.rot", 1, a.n_heads + a.n_kv_heads, tokens, a.head_dim)], count=L,
                 dtype=vdt)
    rows.add("kv_write", "Cast", [_t("x.kvnew", tokens, 2 * a.kv_dim)],
             [_t("kv.write", tokens, 2 * a.kv_dim)], count=L, dtype=vdt)
    for i, seg in enumerate(segments):
        _attention(rows, i, seg, profile)
    rows.gemm("o_proj", tokens, a.q_dim, d, count=L)
    rows.add("residual1", "Add", [_t("x.res1", tokens, d), _t("x.attn", tokens, d)],
             [_t("y.res1", tokens, d)], count=L, dtype=vdt)
    if not a.parallel_block:
        _norm(rows, "norm2", tokens, L)
    _mlp(rows, tokens)
    rows.add("residual2", "Add", [_t("x.res2", tokens, d), _t("x.mlp", tokens, d)],
             [_t("y.res2", tokens, d)], count=L, dtype=vdt)
    _norm(rows, "final_norm", tokens, 1)
    if emit:
        rows.gemm("lm_head", emit, d, a.vocab, count=1, quantised=False)
        rows.add("sample", "Softmax", [_t("x.logits", emit, a.vocab)],
                 [_t("y.probs", emit, a.vocab)], count=1, dtype=vdt, attrs={"axis": -1})


def phase_workload(arch: LLMArch, *, batch: int, new_tokens: int, context: int,
                   dtypes: TensorDtypes, profile: ExecutionProfile) -> pd.DataFrame:
    """One phase's step: prefill (``new_tokens = context = N``) or a decode step
    (``new_tokens = 1``, ``context = L``) at ``batch`` sequences."""
    return step_workload(arch, [Segment(batch, new_tokens, context)], dtypes, profile,
                         "prefill" if new_tokens > 1 else "decode")
