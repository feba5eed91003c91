"""Today's families as lists of layer kinds: structure of each bundled config, MLA's cache,
quantization_config and repack ids -> the weight dtype, one-line refusals."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm.load import load_llm
from roofcast.graph_import.llm.quantization import QUANT_METHODS, weight_dtype
from roofcast.graph_import.llm.repacks import split_repack


def refused(ref) -> str:
    with pytest.raises(LLMConfigError) as info:
        load_llm(ref)
    return str(info.value)


def test_deepseek_v3_is_mla_with_dense_first_layers_then_moe():
    a = load_llm("deepseek-v3")
    kinds = a.kinds
    assert [k.moe is None for k in kinds[:4]] == [True, True, True, False]
    assert kinds[0].mlp.d_ff == 18432
    moe = kinds[3].moe
    assert (moe.n_experts, moe.top_k, moe.n_shared, moe.expert.d_ff) == (256, 8, 1, 2048)
    lat = kinds[0].attention.latent
    assert (lat.kv_lora_rank, lat.q_lora_rank, lat.qk_rope_head_dim) == (512, 1536, 64)
    assert any("multi-token-prediction" in n for n in a.notes)


def test_mla_kv_cache_per_token_is_the_latent():
    """kv_lora_rank + qk_rope_head_dim per layer, not 2 x heads x head_dim."""
    a = load_llm("deepseek-v3")
    assert a.kv_elements_per_token() == 61 * (512 + 64)
    assert a.kv_elements_per_token() < 2 * 61 * 128 * 192 / 80


def test_active_parameters_of_deepseek_v3_match_the_published_37b():
    assert load_llm("deepseek-v3").active_params == pytest.approx(37e9, rel=0.02)


def test_kimi_k2_is_deepseek_v3_shaped():
    a = load_llm("moonshotai/Kimi-K2-Instruct")
    assert a.name == "kimi-k2"
    assert a.kinds[0].attention.variant == "MLA"
    assert Counter(k.moe is None for k in a.kinds) == {False: 60, True: 1}


def test_gpt_oss_alternates_windowed_and_full_attention_with_sinks():
    a = load_llm("gpt-oss-120b")
    windows = [k.attention.window for k in a.kinds]
    assert windows[:4] == [128, 0, 128, 0]
    assert Counter(windows) == {128: 18, 0: 18}
    assert all(k.attention.sinks == 1 and k.moe.expert.bias for k in a.kinds)
    assert a.weight_dtype == "mxfp4"


def test_gemma_3_is_five_local_to_one_global():
    windows = [k.attention.window for k in load_llm("gemma-3-27b").kinds]
    assert windows[:6] == [1024] * 5 + [0]
    assert windows.count(0) == 62 // 6


def test_gemma_2_alternates():
    assert [k.attention.window for k in load_llm("gemma-2-9b").kinds[:3]] == [4096, 0, 4096]


def test_llama_4_maverick_interleaves_moe_and_global_nope_layers():
    kinds = load_llm("llama-4-maverick").kinds
    assert [k.moe is not None for k in kinds[:4]] == [False, True, False, True]
    assert [k.attention.positions for k in kinds[:4]] == ["rope", "rope", "rope", "none"]
    assert kinds[0].attention.chunk == 8192
    assert kinds[3].attention.chunk == 0
    assert kinds[0].mlp.d_ff == 16384
    assert kinds[1].moe.n_shared == 1


def test_glm_and_qwen3_carry_qk_norm():
    glm = load_llm("glm-4.5")
    assert [k.moe is None for k in glm.kinds[:4]] == [True, True, True, False]
    assert glm.kinds[3].attention.qk_norm
    assert glm.kinds[3].attention.qkv_bias
    assert all(k.attention.qk_norm for k in load_llm("qwen3-30b-a3b").kinds)
    assert load_llm("qwen3-8b").uniform


@pytest.mark.parametrize(("q", "dtype"), [
    ({"quant_method": "fp8"}, "fp8"),
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8_block"),
    ({"quant_method": "mxfp4"}, "mxfp4"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
    ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}, "nvfp4"),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}}, "fp8"),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}}, "int4"),
    ({"quant_method": "awq", "bits": 4}, "int4"),
    ({"quant_method": "gptq", "bits": 8}, "int8"),
])
def test_quantization_config_sets_the_weight_dtype(q, dtype):
    assert weight_dtype({"quantization_config": q}, "config.json")[0] == dtype
    config = json.loads((load_llm.__globals__["resources"].files(
        "roofcast.graph_import.llm.configs") / "llama-3.1-8b.json").read_text())
    arch = load_llm(json.dumps({**config, "quantization_config": q}).encode())
    assert arch.weight_dtype == dtype
    assert any(dtype in n for n in arch.notes)


@pytest.mark.parametrize("q", [{"quant_method": "bitsandbytes"}, {"quant_method": "hqq"},
                               {"quant_method": "gptq", "bits": 3}, "fp8", {"bits": 4}])
def test_unknown_quantization_is_refused_in_one_line(q):
    config = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
              "max_position_embeddings": 128, "quantization_config": q}
    message = refused(json.dumps(config).encode())
    assert "quantization_config" in message
    assert "\n" not in message
    assert all(method in message for method in QUANT_METHODS)


@pytest.mark.parametrize(("ref", "base", "dtype"), [
    ("nvidia/Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b", "fp8"),
    ("nvidia/Llama-3.1-8B-Instruct-NVFP4", "llama-3.1-8b", "nvfp4"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "llama-3.1-8b", "fp8"),
    ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "llama-3.1-70b", "int4"),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "qwen2.5-7b", "int4"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "llama-3.1-8b", "int8"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", "llama-4-maverick", "fp8"),
])
def test_repack_ids_resolve_to_their_base_with_the_quantization(ref, base, dtype):
    arch = load_llm(ref)
    assert (arch.name, arch.weight_dtype) == (base, dtype)
    assert arch.params == load_llm(base).params
    assert any(ref in n and dtype in n for n in arch.notes)


def test_a_repack_of_an_unbundled_model_is_refused_with_close_names():
    assert split_repack("someone/Unknown-Model-7B-FP8") == ("Unknown-Model-7B", "fp8")
    message = refused("someone/Unknown-Model-7B-FP8")
    assert "no bundled LLM" in message
    assert "\n" not in message
    assert split_repack("meta-llama/Llama-3.1-8B") is None


def test_lightning_attention_is_refused_in_one_line():
    config = {"model_type": "minimax_m2", "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
              "max_position_embeddings": 128, "num_local_experts": 4, "num_experts_per_tok": 2,
              "attn_type_list": [0, 1]}
    message = refused(json.dumps(config).encode())
    assert "lightning" in message
    assert "\n" not in message


def test_errors_never_show_a_dataclass_repr():
    config = {"model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "vocab_size": 100, "max_position_embeddings": 128,
              "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8,
              "layer_types": ["sliding_attention"]}
    message = refused(json.dumps(config).encode())
    assert "'layer_types'" in message
    assert "Attention(" not in message
    assert "LayerKind" not in message
