"""graph_import.llm.decoder: a model as a list of layer kinds, built once from an LLMArch."""

from __future__ import annotations

import json
from dataclasses import replace

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.decoder import MLP, Decoder, MoE, decoder_of, layer_kind
from roofcast.graph_import.llm.hf_config import arch_from_bytes

LLAMA = LLMArch("l", "llama", n_layers=4, d_model=256, n_heads=8, n_kv_heads=2, head_dim=32,
                d_ff=512, vocab=1000, max_context=2048)


def test_attention_variants():
    assert layer_kind(LLAMA).attention.variant == "GQA"
    assert layer_kind(replace(LLAMA, n_kv_heads=8)).attention.variant == "MHA"
    assert layer_kind(replace(LLAMA, n_kv_heads=1)).attention.variant == "MQA"
    attn = layer_kind(replace(LLAMA, sliding_window=4096)).attention
    assert (attn.window, attn.sinks, attn.group, attn.q_dim, attn.kv_dim) == (4096, 0, 4, 256, 64)


def test_a_uniform_model_is_one_kind_repeated_and_built_once():
    dec = decoder_of(LLAMA)
    assert dec is decoder_of(LLAMA)  # cached per arch
    assert len(dec.layers) == 4
    assert dec.uniform
    assert dec.groups() == ((layer_kind(LLAMA), 4),)
    kind = dec.layers[0]
    assert kind.ffn == MLP(512, gated=True, activation="silu", bias=False)
    assert kind.moe is None
    assert kind.mlp.up_width == 1024


def test_moe_layer_kind():
    kind = layer_kind(replace(LLAMA, n_experts=8, experts_per_token=2))
    assert isinstance(kind.ffn, MoE)
    assert (kind.ffn.n_experts, kind.ffn.top_k, kind.ffn.n_shared) == (8, 2, 0)
    assert kind.mlp is kind.ffn.expert


def test_non_uniform_layers_group_in_first_use_order():
    dense, moe = layer_kind(LLAMA), layer_kind(replace(LLAMA, n_experts=8, experts_per_token=2))
    local = replace(dense, attention=replace(dense.attention, window=128))
    dec = Decoder("mixed", (dense, moe, local, moe, local, moe), 256, 1000, 2048)
    assert not dec.uniform
    assert dec.groups() == ((dense, 1), (moe, 3), (local, 2))


def _config(**extra) -> bytes:
    base = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
            "num_hidden_layers": 2, "intermediate_size": 512, "vocab_size": 1000,
            "max_position_embeddings": 2048}
    return json.dumps({**base, **extra}).encode()


def test_missing_kv_heads_is_multi_head_attention_and_says_so():
    arch = arch_from_bytes(_config())
    assert arch.n_kv_heads == 8
    assert len(arch.notes) == 1
    assert "no 'num_key_value_heads': multi-head attention assumed" in arch.notes[0]
    assert arch_from_bytes(_config(num_key_value_heads=2)).notes == ()
