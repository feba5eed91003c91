"""Bundled Hugging Face configs -> ``LLMArch``: every bundled file loads, its structure is the
family's, and its parameter count matches the published size."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from roofcast.graph_import.llm.arch import ACTIVATIONS, NORMS, POSITIONS
from roofcast.graph_import.llm.families import READERS, reader
from roofcast.graph_import.llm.hf_fields import HF_ACTIVATIONS
from roofcast.graph_import.llm.load import bundled_llm_info, bundled_llms, load_llm

CONFIGS = resources.files("roofcast.graph_import.llm.configs")

#: published parameter counts (model cards / papers; total, and active for MoE)
PUBLISHED = {
    "llama-7b": 6.74e9,
    "llama-2-7b": 6.74e9,
    "llama-2-13b": 13.0e9,
    "llama-2-70b": 69.0e9,
    "llama-3-8b": 8.03e9,
    "llama-3-70b": 70.6e9,
    "llama-3.1-8b": 8.03e9,
    "llama-3.1-70b": 70.6e9,
    "llama-3.1-405b": 405.9e9,
    "codellama-34b": 33.7e9,
    "aquila-7b": 7.3e9,
    "internlm-20b": 20e9,
    "mistral-7b": 7.24e9,
    "mixtral-8x7b": 46.7e9,
    "qwen1.5-7b": 7.72e9,
    "qwen2-7b": 7.62e9,
    "qwen2-72b": 72.7e9,
    "qwen2.5-7b": 7.62e9,
    "qwen2.5-72b": 72.7e9,
    "qwen-72b": 72.3e9,
    "gemma-7b": 8.54e9,
    "gpt2": 124e6,
    "gpt-j-6b": 6.05e9,
    "gpt-neox-20b": 20.55e9,
    "opt-6.7b": 6.7e9,
    "bloom-7b1": 7.07e9,
    "falcon-180b": 179e9,
    "phi-2": 2.78e9,
    "qwen1.5-moe-a2.7b": 14.3e9,
    # today's families: totals as their model cards / reports state them (MTP layers and
    # vision encoders excluded where the card counts them apart)
    "deepseek-v3": 671e9,  # DeepSeek-V3 report: 671B total (+14B MTP module), 37B active
    "deepseek-r1": 671e9,
    "kimi-k2": 1.04e12,  # Kimi K2 report: 1.04T total, 32B activated
    "qwen3-8b": 8.2e9,
    "qwen3-32b": 32.8e9,
    "qwen3-30b-a3b": 30.5e9,
    "qwen3-235b-a22b": 235e9,
    "gpt-oss-20b": 20.91e9,  # gpt-oss model card: 20.91B total, 3.61B active
    "gpt-oss-120b": 116.83e9,  # 116.83B total, 5.13B active
    "llama-4-scout": 109e9,  # Meta: 109B total, 17B active
    "llama-4-maverick": 400e9,  # Meta: 400B total, 17B active
    "gemma-2-9b": 9.24e9,
    "gemma-2-27b": 27.2e9,
    "gemma-3-12b": 11.77e9,  # Gemma 3 report: 1,012M embedding + 10,759M non-embedding
    "gemma-3-27b": 27.0e9,  # 1,416M embedding + 25,600M non-embedding (vision apart)
    "glm-4.5": 355e9,  # GLM-4.5: 355B total, 32B active
    "glm-4.5-air": 106e9,  # 106B total, 12B active
    "minimax-m2": 230e9,  # MiniMax-M2: 230B total, 10B active
}
REQUIRED = (
    "llama-2-7b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
    "mistral-7b", "mixtral-8x7b", "qwen2.5-7b", "qwen2.5-72b", "gpt-j-6b", "falcon-180b",
)  # fmt: skip


def test_required_models_are_bundled():
    assert set(REQUIRED) <= set(bundled_llms())


def test_index_and_files_agree():
    index = json.loads(CONFIGS.joinpath("index.json").read_text())
    files = {p.name[:-5] for p in CONFIGS.iterdir() if p.name.endswith(".json")} - {"index"}
    assert files == set(index)
    for name, entry in index.items():
        assert entry["hf_ids"], name
        assert entry["source"].startswith("https://"), name


@pytest.mark.parametrize("name", bundled_llms())
def test_every_bundled_config_loads(name):
    arch = load_llm(name)
    assert arch.name == name
    assert arch.source == f"bundled:{name}"
    assert arch.family in {family for family, _ in READERS.values()}
    assert arch.activation in ACTIVATIONS
    assert arch.norm in NORMS
    assert arch.positions in POSITIONS
    assert arch.n_heads % arch.n_kv_heads == 0
    assert 1 <= arch.experts_per_token <= arch.n_experts
    assert arch.max_context >= 1024


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_published_size(name):
    assert load_llm(name).params == pytest.approx(PUBLISHED[name], rel=0.02)


def test_every_bundled_model_has_a_published_size_checked():
    # falcon-7b/-40b: published only as "7B"/"40B"; their counts are checked by hand below
    assert set(bundled_llms()) - set(PUBLISHED) == {"falcon-7b", "falcon-40b"}


def test_falcon_counts_by_hand():
    f7 = load_llm("falcon-7b")  # MQA: one K/V head of 64
    d, hd, ff = 4544, 64, 4 * 4544
    layer = d * (d + 2 * hd) + d * d + 2 * d * ff + 2 * d
    assert f7.params == 32 * layer + 65024 * d + d
    assert load_llm("falcon-40b").n_kv_heads == 8


def test_qwen_moe_shared_expert_counts_as_always_on_experts():
    arch = load_llm("qwen1.5-moe-a2.7b")  # 60 routed of 1408 (top 4) + a shared 5632 = 4 x 1408
    assert (arch.n_experts, arch.experts_per_token, arch.d_ff) == (64, 8, 1408)
    assert arch.active_params == pytest.approx(2.7e9, rel=0.02)


def test_mixtral_active_parameters():
    arch = load_llm("mixtral-8x7b")
    assert (arch.n_experts, arch.experts_per_token) == (8, 2)
    assert arch.active_params == pytest.approx(12.9e9, rel=0.02)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("llama-2-7b", {"n_kv_heads": 32, "max_context": 4096, "vocab": 32000}),
        ("llama-2-70b", {"n_kv_heads": 8, "d_ff": 28672, "n_layers": 80}),
        ("llama-3.1-405b", {"n_kv_heads": 8, "max_context": 131072, "n_layers": 126}),
        ("mistral-7b", {"sliding_window": 4096, "n_kv_heads": 8}),
        ("mixtral-8x7b", {"sliding_window": 0, "n_experts": 8}),
        ("qwen2.5-7b", {"qkv_bias": True, "sliding_window": 0, "n_kv_heads": 4}),
        ("gemma-7b", {"head_dim": 256, "activation": "gelu_tanh", "tied_embeddings": True}),
        (
            "gpt2",
            {
                "d_ff": 3072,
                "positions": "learned",
                "norm": "layernorm",
                "tied_embeddings": True,
                "activation": "gelu_tanh",
                "gated_mlp": False,
                "qkv_bias": True,
            },
        ),
        ("gpt-j-6b", {"d_ff": 16384, "parallel_block": True, "qkv_bias": False, "mlp_bias": True}),
        ("gpt-neox-20b", {"parallel_block": True, "activation": "gelu_tanh", "qkv_bias": True}),
        ("opt-6.7b", {"activation": "relu", "positions": "learned", "d_ff": 16384}),
        ("falcon-180b", {"n_kv_heads": 8, "head_dim": 64, "d_ff": 59392, "parallel_block": True}),
        ("falcon-7b", {"n_kv_heads": 1}),
        ("bloom-7b1", {"positions": "alibi", "max_context": 2048}),
        ("qwen-72b", {"d_ff": 24576, "n_kv_heads": 64, "max_context": 32768}),
        ("phi-2", {"parallel_block": True, "activation": "gelu_tanh"}),
    ],
)
def test_family_structure(name, expected):
    arch = load_llm(name)
    assert {k: getattr(arch, k) for k in expected} == expected


def test_kv_cache_per_token_of_llama_3_70b():
    # 2 (K, V) x 80 layers x 8 KV heads x 128 = 163840 elements per token
    assert load_llm("llama-3-70b").kv_elements_per_token() == 2 * 80 * 8 * 128


def test_bundled_info_names_the_hf_id_and_source():
    info = bundled_llm_info("meta-llama/Meta-Llama-3-8B")
    assert info.name == "llama-3-8b"
    assert info.hf_ids[0] == "meta-llama/Meta-Llama-3-8B"
    assert info.source == "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"


def test_activation_map_targets_known_activations():
    assert set(HF_ACTIVATIONS.values()) <= set(ACTIVATIONS)


def test_reader_registry_refuses_a_second_reader_for_a_type():
    with pytest.raises(ValueError, match="two readers"):
        reader("llama")(lambda c: {})


def test_every_family_but_decilm_has_a_bundled_model():
    # DeciLM-7B varies its KV heads per layer and is refused; the deci reader is tested on bytes
    families = {family for family, _ in READERS.values()}
    bundled = {load_llm(name).family for name in bundled_llms()}
    assert families - bundled == {"decilm"}
