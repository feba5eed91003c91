"""Weights and KV cache of a decoder LLM on one device (bytes).

Weights: each layer's projections (attention, every expert it holds) at the weight dtype with
its quantisation scales (``llm.precision.weight_bytes_per_element``); router, norms, biases,
embedding, learned positions and LM head at the model dtype (not quantised). A device of a
pipeline holds its stage's layers and the larger of the embedding (first stage) and the final
norm + LM head (last stage); without a pipeline both.
KV cache per token = ``2 x layers x kv_heads x head_dim x kv bytes``; a request keeps
``min(N + M, sliding_window)`` tokens.
"""

from __future__ import annotations

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.predictor.llm.precision import TensorDtypes, dtype_bytes, weight_bytes_per_element


def layer_bytes(a: LLMArch, dtypes: TensorDtypes, experts: int) -> float:
    """Bytes of one layer of ``a`` holding ``experts`` of its experts."""
    small_bytes = dtype_bytes(dtypes.model_dtype)
    attn = (a.d_model * (a.q_dim + 2 * a.kv_dim)
            * weight_bytes_per_element(dtypes.weights, a.d_model))
    attn += a.q_dim * a.d_model * weight_bytes_per_element(dtypes.weights, a.q_dim)
    mats = 3 if a.gated_mlp else 2
    expert = ((mats - 1) * a.d_model * a.d_ff * weight_bytes_per_element(dtypes.weights, a.d_model)
              + a.d_ff * a.d_model * weight_bytes_per_element(dtypes.weights, a.d_ff))
    quantised_elems = a.attention_params + experts * mats * a.d_model * a.d_ff
    quantised_elems -= (a.q_dim + 2 * a.kv_dim) if a.qkv_bias else 0
    # biases, router, norms: at the activation dtype
    small = a.layer_params - (a.n_experts - experts) * a.expert_params - quantised_elems
    return attn + experts * expert + small * small_bytes


def device_weights_bytes(local: LLMArch, dtypes: TensorDtypes, *, layers: int, experts: int,
                         pp: int) -> float:
    """Weight bytes of a device running ``local`` (the shapes one device computes), holding
    ``layers`` layers of ``experts`` experts each, in a pipeline of ``pp`` stages."""
    a = local
    small = dtype_bytes(dtypes.model_dtype)
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
    """``2 x layers x kv_heads x head_dim x bytes`` of one token's K and V."""
    return arch.kv_elements_per_token() * dtypes.kv_bytes


def kv_tokens(arch: LLMArch, tokens: int) -> int:
    """Tokens a request of ``tokens`` (prompt + output) keeps: capped by the sliding window."""
    return min(tokens, arch.sliding_window) if arch.sliding_window else tokens
