"""The kernel rows of engine steps of a decoder-only LLM (serving), costed by the op registry.

A step runs ``segments``: ``batch`` sequences each adding ``new_tokens`` tokens and attending
``context`` keys (prefill of N: ``Segment(B, N, N)``; decode at L: ``Segment(B, 1, L)``). Its
layers' rows come from ``layer.layer_kernels`` (one group of rows per layer kind of
``decoder_of(arch)``, ``count`` = its layers); the step adds the embedding Gather, the final
norm and the LM head + sampling Softmax of the sequences that emit. Bytes follow the tensor
class (``precision``: quantised weights, KV dtype); quantised projections get an overlapping
``Dequantize`` row, attention reading a quantised KV cache ``KvConvert`` rows. MoE experts:
one ``MoeExperts`` module row per layer (``layer.expert_module_terms``; timed by the kernel
model's ``moe`` family); ``T`` tokens touch ``E (1 - (1 - k/E)^T)`` experts (uniform routing);
under expert parallelism the busiest of ``ep`` groups (``busiest_share``), at least ``imbalance
x T k / ep`` pairs with a ``MoeRouting``. Fused attention and MoE rows carry the shape the
engine tables key by (``ATTENTION_COLUMNS``, ``MOE_COLUMNS``); the profile's decoder fusions
apply last (``fusions``). Design notes: docs/design/decoder.md, engines.md, engine-tables.md.
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
from roofcast.graph_import.llm.decoder import Attention, LayerKind, decoder_of
from roofcast.graph_import.types import Engine, OpNode, TensorInfo
from roofcast.predictor.engine_tables.store import ATTENTION_COLUMNS, MOE_COLUMNS
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.fusions import fuse
from roofcast.predictor.llm.layer import (
    MOE_FAMILY,
    MOE_OP,
    AttentionCall,
    ExpertWork,
    LayerPass,
    attended_keys,  # noqa: F401  (re-exported: callers import it from here)
    cached_kv_elements,
    expert_module_terms,
    layer_kernels,
    norm,
    tensor,
)
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
                                 "applies", *ATTENTION_COLUMNS, *MOE_COLUMNS)
#: bytes per element of the graph_import tensors the nodes are built with ("float").
_BUILD_BYTES = 4.0
#: tensor-name prefixes -> tensor class: projection weights, small weights kept at the
#: model dtype (norms, biases, router, embedding, LM head), KV cache, integer indices; other
#: tensors are activations.
_WEIGHT, _SMALL, _KV, _INDEX = "w.", "n.", "kv.", "i."
#: the attention-shape columns of a row that is not a fused attention kernel.
_NO_SHAPE: dict = {**dict.fromkeys(ATTENTION_COLUMNS[:-1], np.nan), ATTENTION_COLUMNS[-1]: "",
                   **dict.fromkeys(MOE_COLUMNS, np.nan)}


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


@dataclass(frozen=True)
class MoeRouting:
    """Expert load imbalance of a serving run: the busiest expert-parallel group carries at
    least ``imbalance`` x the mean ``T k / ep`` token-expert pairs (max load / mean load, as
    expert-load balancers report it; 1: uniform routing, ``busiest_share`` alone), at most all
    ``T k``. No effect on one expert group (its device runs every pair anyway)."""

    imbalance: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.imbalance) and self.imbalance >= 1.0):
            raise PredictionError(f"MoE imbalance must be a finite number >= 1 (max / mean "
                                  f"expert-group load), got {self.imbalance!r}")

    def busiest_pairs(self, uniform_pairs: float, tokens: float, top_k: int, ep: int) -> float:
        """Pairs of the busiest of ``ep`` groups given the uniform-routing ``uniform_pairs``."""
        total = float(tokens * top_k)
        return min(total, max(uniform_pairs, self.imbalance * total / max(ep, 1)))


class _Rows:
    """The serving ``layer.Sink``: costed rows (workload columns + ``LLM_COLUMNS``), bytes per
    tensor class, ``count`` and ``scope`` of the layer group or the step being built."""

    small = _SMALL

    def __init__(self, arch: LLMArch, dtypes: TensorDtypes, profile: ExecutionProfile,
                 step: str = "", ep: int = 1, moe: MoeRouting | None = None) -> None:
        self.arch, self.dtypes, self.profile, self.step, self.ep = arch, dtypes, profile, step, ep
        self.moe = moe or MoeRouting()
        self.count, self.scope, self.prefix = 1, "step", ""
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
            outputs: Sequence[TensorInfo], *, attrs: dict | None = None,
            flops_scale: float = 1.0, weight_elems: float | None = None,
            dtype: str | None = None) -> str:
        """Cost one node and append its row; returns the row key. ``weight_elems``: the
        weight elements the kernel reads when they differ from its weight tensors' (MoE)."""
        name = self.prefix + name
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
        return self._append(name, {
            "op_type": op_type, "family": op_family(node),
            "engine": cost.engine.value, "dtype": dtype or self.dtypes.vector_dtype,
            "flops": cost.flops * flops_scale, "bytes_read": act_read + w_bytes,
            "bytes_written": cost.bytes_written * self._scale(outputs, k),
            "weight_bytes": w_bytes,
            **dict(zip(GEMM_COLUMNS, (np.nan,) * 4 if dims is None else dims, strict=True)),
            "inner_elems": inner_elems_or_nan(node)})

    def _append(self, name: str, values: dict) -> str:
        """Append the row of kernel ``name`` (prefixed) with this group's common columns."""
        key = f"{self.step}:{name}"
        row = {"node": name, "phase": "forward", "fused_nodes": name, "key": key,
               "kernel": "forward", "domain": "", "grad_of": "", "count": float(self.count),
               "step": self.step, "overlaps": "", "fallback_only": False,
               "scope": self.scope, "applies": "", **_NO_SHAPE, **values}
        for c, v in row.items():
            self.cols[c].append(v)
        return key

    def experts(self, name: str, kind: LayerKind, work: ExpertWork) -> str:
        """The routed experts as one ``MoeExperts`` module row (``layer.expert_module_terms``)
        at the plan's compute dtype, with the ``Dequantize`` row of quantised weights; without
        expert parallelism it carries ``MOE_COLUMNS`` (the engine tables' key)."""
        m, d, plan = kind.mlp, kind.d_model, self.dtypes.gemm_plan()
        act = self.dtypes.act_bytes
        terms = expert_module_terms(work.pairs, work.touched, d, m.d_ff, m.up_width,
                                    weight_bytes_per_element(self.dtypes.weights, d), act, act)
        shape = {} if self.ep > 1 else dict(zip(MOE_COLUMNS, (
            work.pairs / kind.moe.top_k, d, m.d_ff, kind.moe.top_k, kind.moe.n_experts,
            float(m.gated)), strict=True))
        key = self._append(self.prefix + name, {
            "op_type": MOE_OP, "family": MOE_FAMILY, "engine": Engine.MATRIX.value,
            "dtype": plan.compute, **terms, "inner_elems": np.nan, **shape})
        if plan.dequant_flops_per_weight > 0:
            elems = work.touched * d * (m.up_width + m.d_ff)
            self.overlapping(f"{name}.dequant", "Dequantize", key,
                             plan.dequant_flops(elems, work.pairs), self.dtypes.vector_dtype,
                             fallback_only=plan.dequant_on_fallback_only)
        return key

    def gemm(self, name: str, tokens: float, k: int, n: int, *, bias: bool = False,
             small: bool = False, weight_elems: float | None = None) -> str:
        """A projection Gemm [tokens, k] x [k, n] (+ bias); quantised (not ``small``) weights
        get the plan's compute dtype and a ``Dequantize`` row overlapping it."""
        plan = self.dtypes.gemm_plan()
        inputs = [tensor(f"x.{name}", tokens, k), tensor(f"{_SMALL if small else _WEIGHT}{name}",
                                                        k, n)]
        if bias:
            inputs.append(tensor(f"{_SMALL}{name}.bias", n))
        dtype = self.dtypes.vector_dtype if small else plan.compute
        key = self.add(name, "Gemm", inputs, [tensor(f"y.{name}", tokens, n)], dtype=dtype,
                       weight_elems=weight_elems)
        if not small and plan.dequant_flops_per_weight > 0:
            elems = float(k * n) if weight_elems is None else weight_elems
            self.overlapping(f"{name}.dequant", "Dequantize", key,
                             plan.dequant_flops(elems, tokens), self.dtypes.vector_dtype,
                             fallback_only=plan.dequant_on_fallback_only)
        return key

    def cached_keys_read(self, call: AttentionCall, key: str, attention: Attention) -> None:
        """The ``KvConvert`` rows of attention kernel ``key`` (module docstring)."""
        serving = self.profile.serving
        per_query = serving is not None and serving.kv_convert_per == "query-head"
        self._attention_shape(call, attention)
        seg = call.segment
        elems = cached_kv_elements(attention, seg.batch, seg.new_tokens, seg.context, per_query)
        native = serving is not None and self.dtypes.kv in serving.native_kv
        for cond, flops in self.dtypes.kv_convert_flops(elems, native=native).items():
            if flops > 0:
                self.overlapping(f"kv_convert{call.label}", "KvConvert", key, flops,
                                 KV_CONVERT_DTYPE, applies=cond)

    def _attention_shape(self, call: AttentionCall, a: Attention) -> None:
        """Fill the ``ATTENTION_COLUMNS`` of the fused attention row just added, the shape an
        engine's own attention tables are keyed by (``predictor.engine_tables``): plain
        multi-head / grouped attention (no sinks or chunks), and MLA decode as its heads over
        one KV head of the latent cache's width (prefill decompresses: not keyed)."""
        if self.cols["op_type"][-1] != "Attention" or a.sinks or a.chunk:
            return
        kv_heads, width = a.n_kv_heads, a.head_dim
        if a.latent is not None:
            if call.queries != 1:
                return
            kv_heads, width = 1, a.latent.cache_width
        for c, v in zip(ATTENTION_COLUMNS, (call.batch, call.queries, call.context, a.n_heads,
                                            kv_heads, width, a.window, self.dtypes.kv),
                        strict=True):
            self.cols[c][-1] = v

    def overlapping(self, name: str, op_type: str, key: str, flops: float, dtype: str, *,
                    fallback_only: bool = False, applies: str = "") -> None:
        """A vector row of ``flops`` (no traffic of its own) that runs inside the kernel of
        row ``key`` (``overlaps``): a weight dequantisation or a KV conversion."""
        name = self.prefix + name
        row = {c: v[-1] for c, v in self.cols.items()}
        row.update({**_NO_SHAPE, "node": name, "op_type": op_type, "family": "quantization",
                    "engine": Engine.VECTOR.value, "dtype": dtype,
                    "flops": flops, "bytes_read": 0.0, "bytes_written": 0.0,
                    "weight_bytes": 0.0, "gemm_batch": np.nan, "gemm_m": np.nan,
                    "gemm_n": np.nan, "gemm_k": np.nan, "fused_nodes": name,
                    "inner_elems": np.nan, "key": f"{key}.{op_type}{applies}",
                    "count": float(self.count), "overlaps": key,
                    "fallback_only": fallback_only, "applies": applies})
        for c, v in row.items():
            self.cols[c].append(v)

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.cols)
        for c in ("flops", "bytes_read", "bytes_written", "weight_bytes", *GEMM_COLUMNS,
                  "inner_elems", "count", *ATTENTION_COLUMNS[:-1], *MOE_COLUMNS):
            df[c] = df[c].astype(float)
        return df


def kv_elements_converted(arch: LLMArch, seg: Segment, per_query_head: bool) -> float:
    """KV elements one layer of ``arch``'s main kind converts for ``seg``
    (``layer.cached_kv_elements``)."""
    return cached_kv_elements(arch.uniform_kind.attention, seg.batch, seg.new_tokens,
                              seg.context, per_query_head)


def _experts(kind: LayerKind, tokens: int, ep: int,
             routing: MoeRouting | None = None) -> ExpertWork | None:
    """The serving form of the step's experts: pairs and touched experts of the busiest of
    ``ep`` groups (``routing``: its imbalance; one group: all ``T k`` pairs,
    ``expected_experts``)."""
    moe = kind.moe
    if moe is None:
        return None
    if ep > 1:
        touched, share = busiest_share(moe.n_experts, moe.top_k, tokens, ep)
        share = (routing or MoeRouting()).busiest_pairs(share, tokens, moe.top_k, ep)
        return ExpertWork("module", max(1, round(share)), touched)
    return ExpertWork("module", tokens * moe.top_k,
                      expected_experts(moe.n_experts, moe.top_k, tokens))


def steps_workload(arch: LLMArch, steps: Sequence[tuple[str, Sequence[Segment]]],
                   dtypes: TensorDtypes, profile: ExecutionProfile, *,
                   ep: int = 1, moe: MoeRouting | None = None) -> pd.DataFrame:
    """The workload rows of several engine steps, each ``(label, segments)``, in one table
    (column ``step`` = the label, also the key prefix). ``arch``: the shapes one device runs
    (``sharding.local_arch``); ``ep``: expert-parallel groups (``busiest_share``); ``moe``:
    their load imbalance (``MoeRouting``; None: uniform)."""
    rows = _Rows(arch, dtypes, profile, "", ep, moe)
    for label, segments in steps:
        rows.step = label
        _step_rows(rows, segments)
    return fuse(rows.frame(), profile.serving.fused_kernels if profile.serving else ())


def step_workload(arch: LLMArch, segments: Sequence[Segment], dtypes: TensorDtypes,
                  profile: ExecutionProfile, step: str = "step") -> pd.DataFrame:
    """The workload rows of one engine step over ``segments``; ``step`` labels the rows."""
    return steps_workload(arch, [(step, segments)], dtypes, profile)


def _step_rows(rows: _Rows, segments: Sequence[Segment]) -> None:
    """Append one step's rows (module docstring) to ``rows``."""
    if not segments:
        raise PredictionError("a step needs at least one segment")
    dec = decoder_of(rows.arch)
    tokens = sum(s.tokens for s in segments)
    emit = sum(s.batch for s in segments if s.emits)
    d = dec.d_model
    rows.add("embed", "Gather", [tensor(f"{_SMALL}embed", dec.vocab, d),
             tensor(f"{_INDEX}ids", tokens)], [tensor("y.embed", tokens, d)])
    if dec.positions == "learned":
        rows.add("pos_add", "Add", [tensor("y.embed", tokens, d), tensor("x.pos", tokens, d)],
                 [tensor("y.pos", tokens, d)])
    calls = tuple(AttentionCall(str(i), s.batch, s.new_tokens, s.context, s)
                  for i, s in enumerate(segments))
    for g, (kind, count) in enumerate(dec.groups()):
        rows.count, rows.scope, rows.prefix = count, "layer", f"k{g}." if g else ""
        layer_kernels(rows, kind, LayerPass(
            tokens, tokens, calls, rows.profile.attention, rows.profile.attention_score_passes,
            kv_cache=True, experts=_experts(kind, tokens, rows.ep, rows.moe)))
    rows.count, rows.scope, rows.prefix = 1, "step", ""
    norm(rows, dec.norm, "final_norm", tokens, d)
    if emit:
        rows.gemm("lm_head", emit, d, dec.vocab, small=True)
        rows.add("sample", "Softmax", [tensor("x.logits", emit, dec.vocab)],
                 [tensor("y.probs", emit, dec.vocab)], attrs={"axis": -1})


def phase_workload(arch: LLMArch, *, batch: int, new_tokens: int, context: int,
                   dtypes: TensorDtypes, profile: ExecutionProfile) -> pd.DataFrame:
    """One phase's step: prefill (``new_tokens = context = N``) or a decode step
    (``new_tokens = 1``, ``context = L``) at ``batch`` sequences."""
    return step_workload(arch, [Segment(batch, new_tokens, context)], dtypes, profile,
                         "prefill" if new_tokens > 1 else "decode")
