"""Device memory of one model replica serving a batch: weights + KV cache + activations +
the engine's reserve (bytes).

* **weights**: the layers' projections (attention, every expert, at ``weights`` with their
  quantisation scales, ``precision.weight_bytes_per_element``) + router, norms, biases,
  embedding, learned positions and LM head at the model dtype (not quantised);
* **KV cache** = ``batch x min(N + M, window) x kv_bytes_per_token``, ``kv_bytes_per_token``
  = ``2 x layers x kv_heads x head_dim x bytes`` (``sliding_window`` caps the tokens kept; a
  continuous batch reserves every request's full length, as a worst case);
* **activations**: the peak of one prefill pass (a documented estimate):
  ``T x (2 d + max(q + 2 kv, up)) x act bytes`` for the ``T = batch x N`` prompt tokens
  (``min(T, max_prefill_tokens)`` with chunked prefill) — the residual stream and its normed
  copy plus the widest intermediate (QKV output, or the MLP's up projection ``(1 + gated)
  x d_ff x experts_per_token``) — plus fp32 logits of the ``batch`` last tokens
  (``batch x vocab x 4``) and, for eager attention, one layer's score matrix
  (``batch x heads x N x N x act bytes``; fused attention keeps it on chip);
* **reserve** = ``(1 - memory_utilization) x capacity`` (``profile.serving``; without a
  ``[serving]`` table ``DEFAULT_MEMORY_UTILIZATION`` = 0.9, vLLM's
  ``gpu_memory_utilization`` default): CUDA context, workspace, what the engine leaves free.

**Parallel** (``cfg.tp``/``pp``/``ep``, ``sharding``): the fullest device of the replica —
``device_weights_bytes`` (``ceil(L / pp)`` layers of ``local_arch`` with ``E / ep`` experts;
norms replicated; embedding and LM head vocab-parallel, on the first and last stage), the KV of
its ``ceil(L / pp)`` layers and ``kv_heads_per_device`` KV heads (replicated when ``tp`` exceeds
the KV heads), the activations of ``local_arch``; the reserve per device.

``max_batch``: the largest batch whose total fits the capacity (0 when the weights and one
request do not). ``devices_needed``: ``ceil((weights + one request's KV and activations) /
(capacity x memory_utilization))`` — tensor parallelism splits weights and KV evenly, so this
is a lower bound (every device also holds its own reserve and activations).
"""

from __future__ import annotations

import math
from dataclasses import replace

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.llm.precision import TensorDtypes, dtype_bytes, weight_bytes_per_element
from roofcast.predictor.llm.types import MemoryBreakdown, ServingConfig
from roofcast.predictor.runtimes import ExecutionProfile
from roofcast.predictor.runtimes.profile import ServingSpec
from roofcast.predictor.sharding import Sharding, local_arch, stage_layers

#: a runtime without ``[serving]`` claims what a default ``ServingSpec`` claims (0.9).
DEFAULT_MEMORY_UTILIZATION = ServingSpec().memory_utilization
LOGIT_BYTES = 4.0
#: the largest batch ``max_batch`` searches (a guard, far above any device's fit).
MAX_BATCH_SEARCH = 1 << 20


def _layer_bytes(a: LLMArch, dtypes: TensorDtypes, experts: int) -> float:
    """Bytes of one layer holding ``experts`` of its experts (all of them on one device)."""
    small_bytes = dtype_bytes(dtypes.model_dtype)
    attn = a.d_model * (a.q_dim + 2 * a.kv_dim) * weight_bytes_per_element(dtypes.weights, a.d_model)
    attn += a.q_dim * a.d_model * weight_bytes_per_element(dtypes.weights, a.q_dim)
    mats = 3 if a.gated_mlp else 2
    expert = ((mats - 1) * a.d_model * a.d_ff * weight_bytes_per_element(dtypes.weights, a.d_model)
              + a.d_ff * a.d_model * weight_bytes_per_element(dtypes.weights, a.d_ff))
    quantised_elems = a.attention_params + experts * mats * a.d_model * a.d_ff
    quantised_elems -= (a.q_dim + 2 * a.kv_dim) if a.qkv_bias else 0
    # biases, router, norms: at the activation dtype
    small = a.layer_params - (a.n_experts - experts) * a.expert_params - quantised_elems
    return attn + experts * expert + small * small_bytes


def weights_bytes(arch: LLMArch, dtypes: TensorDtypes) -> float:
    """Bytes of all weights (module docstring)."""
    a = arch
    per_layer = _layer_bytes(a, dtypes, a.n_experts)
    return float(a.n_layers * per_layer + a.embedding_params * dtype_bytes(dtypes.model_dtype))


def device_weights_bytes(arch: LLMArch, dtypes: TensorDtypes, sh: Sharding) -> float:
    """Weight bytes of the fullest device of a replica split as ``sh``: ``ceil(L / pp)``
    layers of ``local_arch`` holding ``E / ep`` experts each, plus the embedding (vocab-parallel,
    first stage) and the final norm + LM head (last stage; the embedding again when tied): both
    on one stage when ``pp`` = 1, else the larger of the two. ``weights_bytes`` for one
    device."""
    if sh.trivial:
        return weights_bytes(arch, dtypes)
    a = local_arch(arch, sh)
    small = dtype_bytes(dtypes.model_dtype)
    layers = stage_layers(arch, sh.pp) * _layer_bytes(a, dtypes, a.n_experts // sh.ep)
    pos = a.max_context * a.d_model if a.positions == "learned" else 0
    first, last = a.vocab * a.d_model + pos, a.vocab * a.d_model + a.d_model
    ends = a.embedding_params if sh.pp == 1 else max(first, last)
    return float(layers + ends * small)


def kv_bytes_per_token(arch: LLMArch, dtypes: TensorDtypes) -> float:
    """``2 x layers x kv_heads x head_dim x bytes`` of one token's K and V."""
    return arch.kv_elements_per_token() * dtypes.kv_bytes


def kv_tokens(arch: LLMArch, cfg: ServingConfig) -> int:
    """Tokens a request keeps in the cache: ``N + M`` capped by the sliding window."""
    total = int(cfg.input_tokens) + int(cfg.output_tokens)
    return min(total, arch.sliding_window) if arch.sliding_window else total


def memory_utilization(profile: ExecutionProfile | None) -> float:
    """The engine's claimed fraction of device memory (default 0.9 without ``[serving]``)."""
    if profile is None or profile.serving is None:
        return DEFAULT_MEMORY_UTILIZATION
    return float(profile.serving.memory_utilization)


def activation_bytes(arch: LLMArch, cfg: ServingConfig, batch: int,
                     profile: ExecutionProfile | None) -> float:
    """Peak activation bytes of a prefill pass at ``batch`` (module docstring)."""
    a = arch
    act = dtype_bytes(cfg.activations)
    tokens = batch * int(cfg.input_tokens)
    cap = profile.serving.max_prefill_tokens if profile and profile.serving else 0
    if cap:
        tokens = min(tokens, cap)
    up = (2 if a.gated_mlp else 1) * a.d_ff * (a.experts_per_token if a.n_experts > 1 else 1)
    widest = max(a.q_dim + 2 * a.kv_dim, up)
    total = tokens * (2 * a.d_model + widest) * act + batch * a.vocab * LOGIT_BYTES
    if profile is not None and profile.attention == "eager":
        n = int(cfg.input_tokens)
        total += batch * a.n_heads * n * n * act
    return float(total)


def serving_memory(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig, batch: int,
                   profile: ExecutionProfile | None) -> MemoryBreakdown:
    """The memory of ``batch`` requests of ``cfg`` on ``hw`` under ``profile``: on the fullest
    device of the replica when ``cfg`` splits it (``tp``/``pp``/``ep``, ``sharding``): its
    weights (``device_weights_bytes``), the KV cache of its ``ceil(L / pp)`` layers and
    ``kv_heads_per_device`` KV heads, the activations of ``local_arch``."""
    dtypes = TensorDtypes.of(cfg)
    sh = Sharding.of(cfg)
    local = arch if sh.trivial else replace(local_arch(arch, sh),
                                            n_layers=stage_layers(arch, sh.pp))
    per_token = kv_bytes_per_token(local, dtypes)
    cap = float(hw.mem_capacity_bytes)
    return MemoryBreakdown(
        weights_bytes=device_weights_bytes(arch, dtypes, sh),
        kv_cache_bytes=float(batch * kv_tokens(arch, cfg) * per_token),
        activations_bytes=activation_bytes(local, cfg, batch, profile),
        reserve_bytes=(1.0 - memory_utilization(profile)) * cap,
        capacity_bytes=cap, kv_bytes_per_token=per_token, batch=int(batch))


def max_batch(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig,
              profile: ExecutionProfile | None) -> int:
    """The largest batch that fits (0: not even one request); binary search, memory grows
    monotonically with the batch."""
    if not serving_memory(arch, hw, cfg, 1, profile).fits:
        return 0
    lo, hi = 1, 2
    while hi < MAX_BATCH_SEARCH and serving_memory(arch, hw, cfg, hi, profile).fits:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if serving_memory(arch, hw, cfg, mid, profile).fits:
            lo = mid
        else:
            hi = mid
    return lo


def devices_needed(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig,
                   profile: ExecutionProfile | None) -> int:
    """Devices of ``hw``'s kind the weights + one request need (a tensor-parallel lower
    bound, module docstring); 1 when one device holds them."""
    m = serving_memory(arch, hw, cfg, 1, profile)
    usable = m.capacity_bytes * memory_utilization(profile)
    need = m.weights_bytes + m.kv_cache_bytes + m.activations_bytes
    return max(1, math.ceil(need / usable))
