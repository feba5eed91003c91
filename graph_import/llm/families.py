"""One reader per Hugging Face ``model_type``: config fields -> ``LLMArch`` fields.

``READERS`` maps a ``model_type`` to its reader, filled by the ``@reader(...)`` decorator, which
refuses a type registered twice. Adding a family is adding a function here, never a branch
elsewhere. A reader gets a ``ConfigFields`` (typed reads that name the missing or bad field) and
returns the ``LLMArch`` keyword arguments except ``name`` and ``source``; ``family`` is the
reader's name. Defaults are the Hugging Face config class's own defaults, only for fields that
the class defaults and released configs leave out (GPT-2's ``n_inner``, Falcon's
``max_position_embeddings``); the size fields are always required.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.hf_fields import ConfigFields
from roofcast.graph_import.llm.layers import MLP, Attention, LayerKind

Reader = Callable[[ConfigFields], dict[str, Any]]

#: ``model_type`` -> (family name, reader)
READERS: dict[str, tuple[str, Reader]] = {}


def reader(*model_types: str) -> Callable[[Reader], Reader]:
    """Register ``fn`` for ``model_types``; the family is the function's name."""

    def register(fn: Reader) -> Reader:
        for model_type in model_types:
            if model_type in READERS:
                raise ValueError(f"model_type {model_type!r} has two readers")
            READERS[model_type] = (fn.__name__, fn)
        return fn

    return register


# ----------------------------------------------------------------------------- shared reads


def _head_dim(c: ConfigFields, d_model: int, heads: int, heads_key: str) -> int:
    """``head_dim`` when the config states it (Gemma, Mistral-NeMo), else ``d_model / heads``,
    which must then be whole."""
    if c.has("head_dim"):
        return c.whole("head_dim")
    if d_model % heads:
        raise c.error(
            f"{heads_key!r} ({heads}) does not divide the hidden size ({d_model}) and there is "
            "no 'head_dim': fix the head count or add 'head_dim'"
        )
    return d_model // heads


def _kv_heads(c: ConfigFields, heads: int, *keys: str, heads_key: str) -> int:
    """Key/value heads under the first present of ``keys`` (none: one per query head, i.e.
    MHA); they must divide the query heads (GQA groups are equal)."""
    kv = c.whole(*keys, kind="heads", default=heads)
    key = next((k for k in keys if c.has(k)), None)
    if key is None:
        c.notes.append(f"the config has no {keys[0]!r}: multi-head attention assumed ({heads} KV "
                       "heads, one per query head: the Hugging Face default)")
        key = keys[0]
    if heads % kv:
        raise c.error(
            f"{key!r} ({kv}) must divide {heads_key!r} ({heads}): grouped-query attention "
            "shares each key/value head among an equal number of query heads"
        )
    return kv


def _sliding_window(c: ConfigFields, key: str = "sliding_window") -> int:
    """Attention window in tokens, 0 for full attention (absent or ``null``)."""
    return c.whole(key, kind="context", default=0) if c.has(key) else 0


def _llama_like(c: ConfigFields, *, qkv_bias: bool = False) -> dict[str, Any]:
    """The Llama layout: RMSNorm, RoPE, SiLU-gated MLP, optional GQA, untied head."""
    d = c.whole("hidden_size")
    heads = c.whole("num_attention_heads", kind="heads")
    return {
        "n_layers": c.whole("num_hidden_layers", kind="layers"),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": _kv_heads(c, heads, "num_key_value_heads", heads_key="num_attention_heads"),
        "head_dim": _head_dim(c, d, heads, "num_attention_heads"),
        "d_ff": c.whole("intermediate_size"),
        "vocab": c.whole("vocab_size", kind="vocab"),
        "max_context": c.whole("max_position_embeddings", kind="context"),
        "activation": c.activation("hidden_act", default="silu"),
        "tied_embeddings": c.flag("tie_word_embeddings", False),
        "qkv_bias": c.flag("attention_bias", qkv_bias),
        "mlp_bias": c.flag("mlp_bias", False),
    }


def _experts(c: ConfigFields, n_key: str, k_key: str) -> dict[str, int]:
    n = c.whole(n_key, kind="experts")
    k = c.whole(k_key, kind="experts")
    if k > n:
        raise c.error(
            f"{k_key!r} ({k}) exceeds {n_key!r} ({n}): a token cannot use more experts than exist"
        )
    return {"n_experts": n, "experts_per_token": k}


# ----------------------------------------------------------------------------- families


@reader("llama", "aquila", "codellama")
def llama(c: ConfigFields) -> dict[str, Any]:
    """Llama 1/2/3, CodeLlama, huggyllama, Aquila (``aquila``: the Llama layout under its own
    ``model_type``). ``attention_bias``/``mlp_bias`` as in ``LlamaConfig`` (default false)."""
    return _llama_like(c)


@reader("internlm")
def internlm(c: ConfigFields) -> dict[str, Any]:
    """InternLM (1): the Llama layout; its ``bias`` field puts biases on the attention
    projections (true for internlm-7b, false for internlm-20b)."""
    return _llama_like(c, qkv_bias=c.flag("bias", True))


@reader("deci")
def decilm(c: ConfigFields) -> dict[str, Any]:
    """DeciLM: the Llama layout with ``num_key_value_heads_per_layer``; counts that vary
    (DeciLM-7B) give one layer kind per layer."""
    per_layer = c.data.get("num_key_value_heads_per_layer")
    if per_layer is None:
        return _llama_like(c)
    if not isinstance(per_layer, list) or not per_layer:
        raise c.error("'num_key_value_heads_per_layer' must be a list of head counts")
    f = _llama_like(ConfigFields({**c.data, "num_key_value_heads": per_layer[0]}, c.family,
                                 c.where))
    if len(per_layer) != f["n_layers"]:
        raise c.error(f"'num_key_value_heads_per_layer' lists {len(per_layer)} counts for "
                      f"{f['n_layers']} layers; give one per layer")
    kinds = []
    for i, kv in enumerate(per_layer):
        one = ConfigFields({**c.data, "num_key_value_heads": kv}, c.family,
                           f"{c.where} (layer {i})")
        kv = _kv_heads(one, f["n_heads"], "num_key_value_heads", heads_key="num_attention_heads")
        kinds.append(LayerKind(f["d_model"], Attention(f["n_heads"], kv, f["head_dim"],
                                                       f["qkv_bias"]),
                               MLP(f["d_ff"], True, f["activation"], f["mlp_bias"])))
    return {**f, "layers": tuple(kinds)} if len(set(kinds)) > 1 else f


@reader("mistral")
def mistral(c: ConfigFields) -> dict[str, Any]:
    """Mistral: Llama layout with GQA and ``sliding_window`` (4096 in v0.1, null later)."""
    return {**_llama_like(c), "sliding_window": _sliding_window(c)}


@reader("mixtral")
def mixtral(c: ConfigFields) -> dict[str, Any]:
    """Mixtral: Mistral attention, ``num_local_experts`` SwiGLU experts of width
    ``intermediate_size``, ``num_experts_per_tok`` of them per token, a router per layer."""
    return {
        **_llama_like(c),
        "sliding_window": _sliding_window(c),
        **_experts(c, "num_local_experts", "num_experts_per_tok"),
    }


@reader("qwen2")
def qwen2(c: ConfigFields) -> dict[str, Any]:
    """Qwen1.5 / Qwen2 / Qwen2.5: Llama layout with biases on Q, K and V (always, in
    ``Qwen2Attention``). Sliding-window attention applies from layer ``max_window_layers`` on
    when ``use_sliding_window`` is true (a window on some layers: one kind per layer)."""
    arch = {**_llama_like(c), "qkv_bias": True}
    if c.flag("use_sliding_window", False) and c.has("sliding_window"):
        first = c.whole("max_window_layers", kind="layers", default=0, lowest=0)
        window = _sliding_window(c)
        if first == 0:
            arch["sliding_window"] = window
        elif first < arch["n_layers"]:
            mlp = MLP(arch["d_ff"], True, arch["activation"], arch["mlp_bias"])
            arch["layers"] = tuple(
                LayerKind(arch["d_model"], Attention(arch["n_heads"], arch["n_kv_heads"],
                          arch["head_dim"], True, window=window if i >= first else 0), mlp)
                for i in range(arch["n_layers"]))
    return arch


@reader("qwen")
def qwen(c: ConfigFields) -> dict[str, Any]:
    """Qwen (1), remote code ``QWenLMHeadModel``: a SwiGLU MLP whose width is half of
    ``intermediate_size`` (``QWenMLP`` splits it into the two gated projections), biases on
    Q/K/V only (``c_attn``), ``kv_channels`` per head, context ``seq_length``."""
    d = c.whole("hidden_size")
    heads = c.whole("num_attention_heads", kind="heads")
    ff = c.whole("intermediate_size")
    if ff % 2:
        raise c.error(f"'intermediate_size' ({ff}) must be even: Qwen's MLP halves it")
    head_dim = c.whole("kv_channels", default=0) or _head_dim(c, d, heads, "num_attention_heads")
    return {
        "n_layers": c.whole("num_hidden_layers", kind="layers"),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": heads,
        "head_dim": head_dim,
        "d_ff": ff // 2,
        "vocab": c.whole("vocab_size", kind="vocab"),
        "max_context": c.whole("seq_length", "max_position_embeddings", kind="context"),
        "tied_embeddings": c.flag("tie_word_embeddings", False),
        "qkv_bias": True,
    }


@reader("qwen2_moe")
def qwen2_moe(c: ConfigFields) -> dict[str, Any]:
    """Qwen1.5-MoE / Qwen2-MoE: Qwen2 attention, ``num_experts`` routed SwiGLU experts of
    ``moe_intermediate_size`` (``num_experts_per_tok`` per token) plus one always-on shared
    expert of ``shared_expert_intermediate_size``. The shared expert is counted as
    ``shared / moe`` extra experts that every token uses (4 for Qwen1.5-MoE-A2.7B: 5632 = 4 x
    1408), which keeps parameters, FLOPs and weight bytes exact (the router then counts those
    extra columns, ``d_model`` each; the shared expert's 1-wide gate is left out). A shared width
    that is no whole multiple is refused; dense layers (``mlp_only_layers``, layers off
    ``decoder_sparse_step``) of ``intermediate_size`` make one kind per layer."""
    arch = qwen2(c)
    moe = c.whole("moe_intermediate_size")
    shared = c.whole("shared_expert_intermediate_size", default=0)
    if shared % moe:
        raise c.error(
            f"'shared_expert_intermediate_size' ({shared}) is not a whole multiple of "
            f"'moe_intermediate_size' ({moe}); roofcast cannot state this shared expert"
        )
    experts = _experts(c, "num_experts", "num_experts_per_tok")
    out = {**arch, "d_ff": moe, "n_experts": experts["n_experts"] + shared // moe,
           "experts_per_token": experts["experts_per_token"] + shared // moe}
    dense = c.data.get("mlp_only_layers") or []
    if not isinstance(dense, list):
        raise c.error("'mlp_only_layers' must be a list of layer numbers")
    step = c.whole("decoder_sparse_step", kind="layers", default=1)
    if dense or step != 1:
        routed = uniform_kind_of(out)
        mlp = MLP(arch["d_ff"], True, arch["activation"], arch["mlp_bias"])
        base = arch.get("layers") or (routed,) * arch["n_layers"]
        out["layers"] = tuple(
            k if i not in dense and (i + 1) % step == 0 else replace(k, ffn=mlp)
            for i, k in enumerate(replace(b, ffn=routed.ffn) for b in base))
    return out


def uniform_kind_of(fields: dict[str, Any]) -> LayerKind:
    """The uniform layer kind of reader ``fields``."""
    return LLMArch(name="", family="", **{k: v for k, v in fields.items()
                                          if k not in ("layers", "notes")}).uniform_kind


@reader("gemma")
def gemma(c: ConfigFields) -> dict[str, Any]:
    """Gemma: explicit ``head_dim`` (256 for gemma-7b, 16 x 256 != 3072), GeGLU MLP with the
    tanh GELU (``hidden_activation``; the released configs say ``hidden_act: "gelu"`` but
    ``GemmaMLP`` runs the tanh approximation unless ``hidden_activation`` says otherwise), tied
    embeddings."""
    arch = _llama_like(c)
    arch["head_dim"] = c.whole("head_dim")
    arch["activation"] = c.activation("hidden_activation", default="gelu_tanh")
    arch["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return arch


@reader("gpt2")
def gpt2(c: ConfigFields) -> dict[str, Any]:
    """GPT-2: ``n_embd``/``n_head``/``n_layer``, MLP ``n_inner`` (null: ``4 * n_embd``),
    ``gelu_new`` (tanh GELU), learned positions (``n_positions``), LayerNorm, biases, tied head."""
    d = c.whole("n_embd", "hidden_size")
    heads = c.whole("n_head", "num_attention_heads", kind="heads")
    return {
        "n_layers": c.whole("n_layer", "num_hidden_layers", kind="layers"),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": heads,
        "head_dim": _head_dim(c, d, heads, "n_head"),
        "d_ff": c.whole("n_inner", default=4 * d),
        "vocab": c.whole("vocab_size", kind="vocab"),
        "max_context": c.whole("n_positions", "max_position_embeddings", kind="context"),
        "gated_mlp": False,
        "activation": c.activation("activation_function", default="gelu_tanh"),
        "norm": "layernorm",
        "positions": "learned",
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "qkv_bias": True,
        "mlp_bias": True,
    }


@reader("gptj")
def gptj(c: ConfigFields) -> dict[str, Any]:
    """GPT-J: GPT-2 names, one LayerNorm feeding attention and MLP in parallel, rotary on
    ``rotary_dim`` of each head, no attention biases, MLP biases, untied head."""
    d = c.whole("n_embd", "hidden_size")
    heads = c.whole("n_head", "num_attention_heads", kind="heads")
    head_dim = _head_dim(c, d, heads, "n_head")
    if c.whole("rotary_dim", default=head_dim) > head_dim:
        raise c.error(f"'rotary_dim' exceeds the head dimension ({head_dim})")
    return {
        "n_layers": c.whole("n_layer", "num_hidden_layers", kind="layers"),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": heads,
        "head_dim": head_dim,
        "d_ff": c.whole("n_inner", default=4 * d),
        "vocab": c.whole("vocab_size", kind="vocab"),
        "max_context": c.whole("n_positions", "max_position_embeddings", kind="context"),
        "gated_mlp": False,
        "activation": c.activation("activation_function", default="gelu_tanh"),
        "norm": "layernorm",
        "tied_embeddings": c.flag("tie_word_embeddings", False),
        "parallel_block": True,
        "mlp_bias": True,
    }


@reader("gpt_neox")
def gpt_neox(c: ConfigFields) -> dict[str, Any]:
    """GPT-NeoX / Pythia: LayerNorm, rotary on ``rotary_pct`` of each head, biases
    (``attention_bias``, default true), parallel attention + MLP when
    ``use_parallel_residual`` (default true), untied head."""
    d = c.whole("hidden_size")
    heads = c.whole("num_attention_heads", kind="heads")
    c.fraction("rotary_pct", 0.25)
    return {
        "n_layers": c.whole("num_hidden_layers", kind="layers"),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": heads,
        "head_dim": _head_dim(c, d, heads, "num_attention_heads"),
        "d_ff": c.whole("intermediate_size"),
        "vocab": c.whole("vocab_size", kind="vocab"),
        "max_context": c.whole("max_position_embeddings", kind="context"),
        "gated_mlp": False,
        "activation": c.activation("hidden_act", default="gelu"),
        "norm": "layernorm",
        "tied_embeddings": c.flag("tie_word_embeddings", False),
        "parallel_block": c.flag("use_parallel_residual", True),
        "qkv_bias": c.flag("attention_bias", True),
        "mlp_bias": True,
    }


@reader("opt")
def opt(c: ConfigFields) -> dict[str, Any]:
    """OPT: ``ffn_dim`` ReLU MLP, learned positions, LayerNorm, biases (``enable_bias``), tied
    head. A ``word_embed_proj_dim`` other than ``hidden_size`` (opt-350m projects 512 <-> 1024)
    is refused: the embedding projections are not modelled."""
    d = c.whole("hidden_size")
    heads = c.whole("num_attention_heads", kind="heads")
    proj = c.whole("word_embed_proj_dim", default=d)
    if proj != d:
        raise c.error(
            f"'word_embed_proj_dim' ({proj}) differs from 'hidden_size' ({d}); roofcast does "
            "not model OPT's embedding projections (opt-350m); use another OPT size"
        )
    bias = c.flag("enable_bias", True)
    return {
        "n_layers": c.whole("num_hidden_layers", kind="layers"),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": heads,
        "head_dim": _head_dim(c, d, heads, "num_attention_heads"),
        "d_ff": c.whole("ffn_dim"),
        "vocab": c.whole("vocab_size", kind="vocab"),
        "max_context": c.whole("max_position_embeddings", kind="context"),
        "gated_mlp": False,
        "activation": c.activation("activation_function", default="relu"),
        "norm": "layernorm",
        "positions": "learned",
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "qkv_bias": bias,
        "mlp_bias": bias,
    }


@reader("falcon", "RefinedWeb", "RefinedWebModel")
def falcon(c: ConfigFields) -> dict[str, Any]:
    """Falcon (7B/40B/180B; ``RefinedWeb*`` are the pre-transformers names): key/value heads
    from ``num_kv_heads`` under ``new_decoder_architecture``, 1 under ``multi_query`` (default
    true), else one per head; parallel attention + MLP (``parallel_attn``, default true); RoPE
    or ALiBi (``alibi``); GELU MLP of ``ffn_hidden_size`` (default ``4 * hidden_size``); biases
    per ``bias``; tied head. ``max_position_embeddings`` defaults to 2048 as in
    ``FalconConfig`` (Falcon's released configs omit it)."""
    d = c.whole("hidden_size", "n_embed")
    heads = c.whole("num_attention_heads", "n_head", kind="heads")
    if c.flag("new_decoder_architecture", False):
        kv = _kv_heads(c, heads, "num_kv_heads", "n_head_kv", heads_key="num_attention_heads")
    elif c.flag("multi_query", True):
        kv = 1
    else:
        kv = heads
    bias = c.flag("bias", False)
    return {
        "n_layers": c.whole("num_hidden_layers", "n_layer", kind="layers"),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": kv,
        "head_dim": _head_dim(c, d, heads, "num_attention_heads"),
        "d_ff": c.whole("ffn_hidden_size", default=4 * d),
        "vocab": c.whole("vocab_size", kind="vocab"),
        "max_context": c.whole("max_position_embeddings", kind="context", default=2048),
        "gated_mlp": False,
        "activation": c.activation("activation", default="gelu"),
        "norm": "layernorm",
        "positions": "alibi" if c.flag("alibi", False) else "rope",
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "parallel_block": c.flag("parallel_attn", True),
        "qkv_bias": bias,
        "mlp_bias": bias,
    }


@reader("bloom")
def bloom(c: ConfigFields) -> dict[str, Any]:
    """BLOOM: ALiBi (no position table), LayerNorm, tanh-GELU MLP of ``4 * hidden_size``,
    biases, tied head. ALiBi sets no hard context limit; ``max_context`` is the training length
    ``seq_length`` (2048 for every released BLOOM, the default here). The extra LayerNorm on the
    embeddings (``2 * hidden_size`` parameters) is not counted."""
    d = c.whole("hidden_size", "n_embed")
    heads = c.whole("n_head", "num_attention_heads", kind="heads")
    return {
        "n_layers": c.whole("n_layer", "num_hidden_layers", kind="layers"),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": heads,
        "head_dim": _head_dim(c, d, heads, "n_head"),
        "d_ff": 4 * d,
        "vocab": c.whole("vocab_size", kind="vocab"),
        "max_context": c.whole("seq_length", kind="context", default=2048),
        "gated_mlp": False,
        "activation": "gelu_tanh",
        "norm": "layernorm",
        "positions": "alibi",
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "qkv_bias": True,
        "mlp_bias": True,
    }


@reader("phi")
def phi(c: ConfigFields) -> dict[str, Any]:
    """Phi-1/1.5/2: one LayerNorm feeding attention and MLP in parallel, partial rotary
    (``partial_rotary_factor``), ``gelu_new`` MLP with biases, Q/K/V biases, untied head."""
    d = c.whole("hidden_size")
    heads = c.whole("num_attention_heads", kind="heads")
    c.fraction("partial_rotary_factor", 0.5)
    return {
        "n_layers": c.whole("num_hidden_layers", kind="layers"),
        "d_model": d,
        "n_heads": heads,
        "n_kv_heads": _kv_heads(c, heads, "num_key_value_heads", heads_key="num_attention_heads"),
        "head_dim": _head_dim(c, d, heads, "num_attention_heads"),
        "d_ff": c.whole("intermediate_size"),
        "vocab": c.whole("vocab_size", kind="vocab"),
        "max_context": c.whole("max_position_embeddings", kind="context"),
        "gated_mlp": False,
        "activation": c.activation("hidden_act", default="gelu_tanh"),
        "norm": "layernorm",
        "tied_embeddings": c.flag("tie_word_embeddings", False),
        "parallel_block": True,
        "qkv_bias": True,
        "mlp_bias": True,
    }


#: model types roofcast knows but cannot state as one ``LLMArch`` -> why (data, not branches)
UNREPRESENTABLE: dict[str, str] = {
    "minimax_m1": ("MiniMax-M1 runs lightning (linear) attention in 7 of 8 layers; roofcast "
                   "costs softmax attention with a KV cache only"),
    "minimax_text_01": ("MiniMax-Text-01 runs lightning (linear) attention in 7 of 8 layers; "
                        "roofcast costs softmax attention with a KV cache only"),
    "mamba": "Mamba is a state-space model with no attention and no KV cache",
    "mamba2": "Mamba-2 is a state-space model with no attention and no KV cache",
    "jamba": "Jamba mixes Mamba and attention layers",
    "t5": "T5 is an encoder-decoder model; roofcast's LLM serving models decoder-only transformers",
    "bert": "BERT is an encoder; roofcast's LLM serving models decoder-only transformers",
}


def read_family(data: dict[str, Any], model_type: str, where: str) -> tuple[str, dict[str, Any]]:
    """(family, ``LLMArch`` fields) of a config object whose ``model_type`` is registered."""
    family, fn = READERS[model_type]
    fields = ConfigFields(data, family, where)
    out = fn(fields)
    return family, {**out, "notes": tuple(fields.notes)} if fields.notes else out


def known_model_types() -> tuple[str, ...]:
    return tuple(sorted(READERS))
