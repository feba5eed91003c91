"""Weights and KV cache of a decoder LLM on one device (bytes), summed over its layer kinds.

Weights: each layer's projections (attention, MLA's query / latent / decompression matrices,
every expert it holds, shared experts) at the weight dtype with its quantisation scales
(``llm.precision.weight_bytes_per_element``); router, norms, biases, sinks, embedding,
learned positions and LM head at the model dtype (not quantised). A device of a pipeline
holds its stage's layers and the larger of the embedding (first stage) and the final norm +
LM head (last stage); without a pipeline both.
KV cache per token and layer = ``cache_width x kv bytes`` (``2 x kv_heads x head_dim``; MLA
``kv_lora_rank + qk_rope_head_dim``, one latent for all heads and replicated across tensor
ranks); a request of ``T`` tokens keeps ``min(T, window)`` tokens in a sliding-window layer
(a ring buffer; chunked attention: ``min(T, chunk)``), ``T`` in a global one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.decoder import Attention, LayerKind, decoder_of
from roofcast.predictor.llm.precision import TensorDtypes, dtype_bytes, weight_bytes_per_element


def _attention_bytes(a: Attention, d: int, w: Callable[[int], float]) -> float:
    """Bytes of one layer's attention matrices; ``w(K)`` bytes per element of a K-input one."""
    m = a.latent
    if m is None:
        return d * (a.q_dim + 2 * a.kv_dim) * w(d) + a.q_dim * d * w(a.q_dim)
    h, qk = a.n_heads, m.qk_nope_head_dim + m.qk_rope_head_dim
    q = (d * m.q_lora_rank * w(d) + m.q_lora_rank * h * qk * w(m.q_lora_rank)
         if m.q_lora_rank else d * h * qk * w(d))
    return (q + d * m.cache_width * w(d)
            + m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim) * w(m.kv_lora_rank)
            + a.v_dim * d * w(a.v_dim))


def kind_bytes(kind: LayerKind, dtypes: TensorDtypes, experts: int) -> float:
    """Bytes of one layer of ``kind`` holding ``experts`` of its routed experts (and all
    shared ones; a dense layer holds its MLP)."""
    d, m, moe = kind.d_model, kind.mlp, kind.moe
    w = functools.partial(weight_bytes_per_element, dtypes.weights)
    one = (m.mats - 1) * d * m.d_ff * w(d) + m.d_ff * d * w(m.d_ff)
    held = 1 if moe is None else experts + moe.n_shared
    params = kind.params - (0 if moe is None else (moe.n_experts - experts) * m.params(d))
    quantised = kind.attention.matrix_params(d) + held * m.mats * d * m.d_ff
    small = params - quantised  # biases, router, norms: at the model dtype
    return _attention_bytes(kind.attention, d, w) + held * one \
        + small * dtype_bytes(dtypes.model_dtype)


def layer_bytes(a: LLMArch, dtypes: TensorDtypes, experts: int) -> float:
    """Bytes of one layer of ``a``'s main kind holding ``experts`` of its experts."""
    return kind_bytes(a.uniform_kind, dtypes, experts)


def device_weights_bytes(local: LLMArch, dtypes: TensorDtypes, *, layers: int, experts: int,
                         pp: int) -> float:
    """Weight bytes of a device running ``local`` (the shapes one device computes; its
    ``kinds`` the stage's layers), holding ``layers`` layers of ``experts`` experts each, in
    a pipeline of ``pp`` stages."""
    a = local
    small = dtype_bytes(dtypes.model_dtype)
    if a.layers:
        stage = sum(count * kind_bytes(k, dtypes, experts)
                    for k, count in decoder_of(a).groups())
    else:
        stage = layers * layer_bytes(a, dtypes, experts)
    pos = a.max_context * a.d_model if a.positions == "learned" else 0
    first, last = a.vocab * a.d_model + pos, a.vocab * a.d_model + a.d_model
    ends = a.embedding_params if pp == 1 else max(first, last)
    return float(stage + ends * small)


def weights_bytes(arch: LLMArch, dtypes: TensorDtypes) -> float:
    """Bytes of all weights of ``arch`` (one device holds the whole model)."""
    return device_weights_bytes(arch, dtypes, layers=arch.n_layers, experts=arch.n_experts,
                                pp=1)


def kv_bytes_per_token(arch: LLMArch, dtypes: TensorDtypes) -> float:
    """Bytes one token adds to the cache over all layers (``cache_width`` each; before any
    window caps it)."""
    return arch.kv_elements_per_token() * dtypes.kv_bytes


def kept_tokens(a: Attention, tokens: int) -> int:
    """Tokens a layer of ``a`` keeps of a request of ``tokens``: capped by its window or
    chunk (a ring buffer), all of them in a global layer."""
    cap = a.window or a.chunk
    return min(tokens, cap) if cap else tokens


def kv_tokens(arch: LLMArch, tokens: int) -> int:
    """Tokens a request of ``tokens`` (prompt + output) keeps in ``arch``'s main kind."""
    return kept_tokens(arch.uniform_kind.attention, tokens)


def request_kv_bytes(arch: LLMArch, dtypes: TensorDtypes, tokens: int, batch: int = 1
                     ) -> float:
    """KV bytes of ``batch`` requests of ``tokens`` tokens: per layer ``kept_tokens x
    cache_width x kv bytes`` (module docstring)."""
    if not arch.layers:
        return float(batch * kv_tokens(arch, tokens) * kv_bytes_per_token(arch, dtypes))
    return float(batch * sum(count * kept_tokens(k.attention, tokens) * k.attention.cache_width
                             for k, count in decoder_of(arch).groups()) * dtypes.kv_bytes)
