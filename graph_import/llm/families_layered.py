"""Readers of today's families whose layers differ: each builds one ``LayerKind`` per layer.

DeepSeek-V2/V3/R1 and Kimi K2 (MLA, ``first_k_dense_replace`` dense layers then MoE with
shared experts), Qwen3 (qk-norm) and Qwen3-MoE, gpt-oss (``layer_types``: sliding-window and
full attention alternate; sinks; MoE with biases), Llama 4 (MoE every
``interleave_moe_layer_step``-th layer with a shared expert; chunked attention on RoPE
layers, every 4th layer global without RoPE), Gemma 2 (sliding / global alternate) and
Gemma 3 (5 sliding : 1 global), GLM-4.5 (dense first layers, shared expert, qk-norm),
MiniMax-M2 (qk-norm MoE). Registered with ``families.reader``; the scalar ``LLMArch`` fields
keep the main kind (the MoE layers' experts, the first layer's attention). Multimodal
configs are read from their ``text_config``.
"""

from __future__ import annotations

from typing import Any

from roofcast.graph_import.llm.families import _experts, _llama_like, reader
from roofcast.graph_import.llm.hf_fields import ConfigFields
from roofcast.graph_import.llm.layers import MLP, Attention, Latent, LayerKind, MoE


def _text(c: ConfigFields) -> ConfigFields:
    """The text model's fields of a multimodal config (``text_config``), else ``c``."""
    inner = c.data.get("text_config")
    if inner is None:
        return c
    if not isinstance(inner, dict):
        raise c.error("'text_config' must be an object of the text model's fields")
    out = ConfigFields({**c.data, **inner}, c.family, c.where)
    out.notes = c.notes
    return out


def _attention(f: dict[str, Any], **kw: Any) -> Attention:
    return Attention(f["n_heads"], f["n_kv_heads"], f["head_dim"], f["qkv_bias"], **kw)


def _kind(f: dict[str, Any], attn: Attention, ffn: MLP | MoE) -> LayerKind:
    return LayerKind(f["d_model"], attn, ffn, "rmsnorm")


def _layered(f: dict[str, Any], kinds: list[LayerKind]) -> dict[str, Any]:
    """``f`` with ``layers`` set and its scalar MoE fields from the first MoE kind."""
    moe = next((k.moe for k in kinds if k.moe is not None), None)
    if moe is not None:
        f = {**f, "d_ff": moe.expert.d_ff, "n_experts": moe.n_experts,
             "experts_per_token": moe.top_k}
    return {**f, "layers": tuple(kinds)}


def _dense_then_moe(c: ConfigFields, f: dict[str, Any], attn: Attention, *,
                    n_routed: str, dense_key: str = "first_k_dense_replace") -> dict[str, Any]:
    """``first_k_dense_replace`` dense layers, then MoE layers (every ``moe_layer_freq``-th)
    of ``n_routed`` experts of ``moe_intermediate_size`` plus ``n_shared_experts``."""
    act = f["activation"]
    dense = MLP(f["d_ff"], True, act)
    ex = _experts(c, n_routed, "num_experts_per_tok")
    moe = MoE(MLP(c.whole("moe_intermediate_size"), True, act), ex["n_experts"],
              ex["experts_per_token"], c.whole("n_shared_experts", default=0, lowest=0,
                                               kind="experts"))
    first = c.whole(dense_key, kind="layers", default=0, lowest=0)
    freq = c.whole("moe_layer_freq", kind="layers", default=1)
    n = f["n_layers"]
    kinds = [_kind(f, attn, moe if i >= first and (i - first) % freq == 0 else dense)
             for i in range(n)]
    mtp = c.whole("num_nextn_predict_layers", kind="layers", default=0, lowest=0)
    if mtp:
        c.notes.append(f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) are "
                       "not counted: they run only for speculative decoding")
    return _layered(f, kinds)


@reader("deepseek_v2", "deepseek_v3", "kimi_k2")
def deepseek(c: ConfigFields) -> dict[str, Any]:
    """DeepSeek-V2/V3/R1, Kimi K2: MLA (``q_lora_rank`` (null: no query bottleneck),
    ``kv_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``, ``v_head_dim``), dense
    first layers of ``intermediate_size``, then MoE."""
    f = _llama_like(c)
    q_rank = c.whole("q_lora_rank", default=0, lowest=0)
    latent = Latent(c.whole("kv_lora_rank"), q_rank, c.whole("qk_rope_head_dim"),
                    c.whole("qk_nope_head_dim"), c.whole("v_head_dim"))
    f = {**f, "n_kv_heads": f["n_heads"],
         "head_dim": latent.qk_nope_head_dim + latent.qk_rope_head_dim}
    return _dense_then_moe(c, f, _attention(f, latent=latent), n_routed="n_routed_experts")


@reader("glm4_moe")
def glm4_moe(c: ConfigFields) -> dict[str, Any]:
    """GLM-4.5 / GLM-4.5-Air: GQA with Q/K/V biases (``attention_bias``) and qk-norm
    (``use_qk_norm``), dense first layers then MoE with a shared expert."""
    f = _llama_like(c, qkv_bias=True)
    attn = _attention(f, qk_norm=c.flag("use_qk_norm", False))
    return _dense_then_moe(c, f, attn, n_routed="n_routed_experts")


@reader("qwen3")
def qwen3(c: ConfigFields) -> dict[str, Any]:
    """Qwen3 dense: the Llama layout with an explicit ``head_dim`` and qk-norm."""
    f = _llama_like(c)
    return _layered(f, [_kind(f, _attention(f, qk_norm=True), MLP(f["d_ff"], True,
                                                                   f["activation"]))]
                    * f["n_layers"])


@reader("qwen3_moe")
def qwen3_moe(c: ConfigFields) -> dict[str, Any]:
    """Qwen3-MoE: Qwen3 attention, ``num_experts`` experts of ``moe_intermediate_size``
    (no shared expert); layers in ``mlp_only_layers`` (or off ``decoder_sparse_step``) dense."""
    f = _llama_like(c)
    ex = _experts(c, "num_experts", "num_experts_per_tok")
    moe = MoE(MLP(c.whole("moe_intermediate_size"), True, f["activation"]),
              ex["n_experts"], ex["experts_per_token"])
    dense_at = set(_int_list(c, "mlp_only_layers"))
    step = c.whole("decoder_sparse_step", kind="layers", default=1)
    attn = _attention(f, qk_norm=True)
    kinds = [_kind(f, attn, moe if i not in dense_at and (i + 1) % step == 0
                   else MLP(f["d_ff"], True, f["activation"])) for i in range(f["n_layers"])]
    return _layered(f, kinds)


@reader("minimax_m2", "minimax")
def minimax_m2(c: ConfigFields) -> dict[str, Any]:
    """MiniMax-M2: GQA with qk-norm, every layer MoE of ``num_local_experts`` experts of
    ``intermediate_size``. MiniMax-M1 / Text-01 (lightning attention) are refused."""
    if c.has("attn_type_list") and 0 in (c.data.get("attn_type_list") or []):
        raise c.error("lightning (linear) attention layers ('attn_type_list' 0) are not "
                      "modelled: roofcast costs softmax attention with a KV cache only")
    f = _llama_like(c)
    ex = _experts(c, "num_local_experts", "num_experts_per_tok")
    moe = MoE(MLP(f["d_ff"], True, f["activation"]), ex["n_experts"], ex["experts_per_token"])
    attn = _attention(f, qk_norm=c.flag("use_qk_norm", True))
    return _layered(f, [_kind(f, attn, moe)] * f["n_layers"])


def _int_list(c: ConfigFields, key: str) -> list[int]:
    value = c.data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        raise c.error(f"{key!r} must be a list of layer numbers")
    return value


def _layer_types(c: ConfigFields, n: int, default: list[str]) -> list[str]:
    """``layer_types`` (``sliding_attention`` / ``full_attention`` / ``chunked_attention``
    per layer), else ``default``."""
    types = c.data.get("layer_types")
    if types is None:
        return default
    known = ("sliding_attention", "full_attention", "chunked_attention")
    if not isinstance(types, list) or len(types) != n or any(t not in known for t in types):
        raise c.error(f"'layer_types' must list one of {', '.join(known)} for each of the "
                      f"{n} layers")
    return types


@reader("gpt_oss")
def gpt_oss(c: ConfigFields) -> dict[str, Any]:
    """gpt-oss: GQA with biases and one learned sink logit per head; ``layer_types``
    alternate ``sliding_window`` (128) and full attention; every layer MoE of
    ``num_local_experts`` SwiGLU experts of ``intermediate_size`` with biases. The O
    projection's bias (``d_model`` a layer) is not counted."""
    f = _llama_like(c, qkv_bias=True)
    ex = _experts(c, "num_local_experts", "num_experts_per_tok")
    moe = MoE(MLP(f["d_ff"], True, f["activation"], bias=True), ex["n_experts"],
              ex["experts_per_token"])
    n, window = f["n_layers"], c.whole("sliding_window", kind="context")
    types = _layer_types(c, n, ["sliding_attention" if i % 2 == 0 else "full_attention"
                                for i in range(n)])
    kinds = [_kind(f, _attention(f, sinks=1, window=window if t == "sliding_attention"
                                 else 0), moe) for t in types]
    return _layered({**f, "sliding_window": 0}, kinds)


@reader("llama4", "llama4_text")
def llama4(c: ConfigFields) -> dict[str, Any]:
    """Llama 4 Scout / Maverick (``text_config``): MoE of ``num_local_experts`` experts of
    ``intermediate_size`` + one shared expert every ``interleave_moe_layer_step``-th layer,
    dense layers of ``intermediate_size_mlp`` between; RoPE layers attend in chunks of
    ``attention_chunk_size``, every 4th layer (``no_rope_layers`` 0) is global without RoPE;
    qk-norm per ``use_qk_norm`` (RoPE layers only)."""
    c = _text(c)
    f = _llama_like(c)
    ex = _experts(c, "num_local_experts", "num_experts_per_tok")
    act = f["activation"]
    moe = MoE(MLP(f["d_ff"], True, act), ex["n_experts"], ex["experts_per_token"], 1)
    dense = MLP(c.whole("intermediate_size_mlp"), True, act)
    step = c.whole("interleave_moe_layer_step", kind="layers", default=1)
    chunk = c.whole("attention_chunk_size", kind="context", default=0, lowest=0)
    n = f["n_layers"]
    nope = _int_list(c, "no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(n)]
    if len(nope) != n:
        raise c.error(f"'no_rope_layers' must have one entry for each of the {n} layers")
    qk = c.flag("use_qk_norm", False)
    kinds = [_kind(f, _attention(f, chunk=chunk, qk_norm=qk) if nope[i]
                   else _attention(f, positions="none"),
                   moe if (i + 1) % step == 0 else dense) for i in range(n)]
    return _layered(f, kinds)


def _gemma_like(c: ConfigFields) -> dict[str, Any]:
    f = _llama_like(c)
    return {**f, "head_dim": c.whole("head_dim"),
            "activation": c.activation("hidden_activation", "hidden_act", default="gelu_tanh"),
            "tied_embeddings": c.flag("tie_word_embeddings", True)}


@reader("gemma2")
def gemma2(c: ConfigFields) -> dict[str, Any]:
    """Gemma 2: even layers attend a ``sliding_window`` (4096), odd ones globally (or
    ``layer_types``); GeGLU MLP, tied head. Its logit soft-capping (3 FLOPs a score) and
    post-norms (``2 d`` a layer) are left out."""
    f = _gemma_like(c)
    n, window = f["n_layers"], c.whole("sliding_window", kind="context")
    types = _layer_types(c, n, ["sliding_attention" if i % 2 == 0 else "full_attention"
                                for i in range(n)])
    mlp = MLP(f["d_ff"], True, f["activation"])
    return _layered(f, [_kind(f, _attention(f, window=window if t == "sliding_attention"
                                            else 0), mlp) for t in types])


@reader("gemma3", "gemma3_text")
def gemma3(c: ConfigFields) -> dict[str, Any]:
    """Gemma 3 (``text_config``): ``sliding_window_pattern`` - 1 sliding layers (window
    ``sliding_window``, 1024) then one global (5:1), or ``layer_types``; qk-norm."""
    c = _text(c)
    f = _gemma_like(c)
    n, window = f["n_layers"], c.whole("sliding_window", kind="context")
    pattern = c.whole("sliding_window_pattern", kind="layers", default=6)
    types = _layer_types(c, n, ["full_attention" if (i + 1) % pattern == 0
                                else "sliding_attention" for i in range(n)])
    mlp = MLP(f["d_ff"], True, f["activation"])
    return _layered(f, [_kind(f, _attention(f, qk_norm=True, window=window if
                                            t == "sliding_attention" else 0), mlp)
                        for t in types])
