"""Memory of models whose layers differ: MLA's latent cache, sliding-window caps (ring
buffers), weights summed over layer kinds, the fullest pipeline stage."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofcast.graph_import.llm.load import load_llm
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.memory.decoder import (
    device_weights_bytes,
    kv_bytes_per_token,
    kv_tokens,
    request_kv_bytes,
    weights_bytes,
)
from roofcast.predictor.memory.serving import (
    device_kv_bytes,
    device_kv_bytes_per_token,
    device_share,
)

FP16 = TensorDtypes.of(ServingConfig())


def test_mla_kv_bytes_per_token_is_the_latent_in_every_layer():
    """(kv_lora_rank + qk_rope_head_dim) x layers x bytes: 61 x 576 x 2 B for DeepSeek-V3."""
    a = load_llm("deepseek-v3")
    assert kv_bytes_per_token(a, FP16) == 61 * (512 + 64) * 2


def test_mla_latent_is_replicated_across_tensor_ranks():
    a = load_llm("deepseek-v3")
    one = device_kv_bytes_per_token(a, ServingConfig(tp=1))
    assert device_kv_bytes_per_token(a, ServingConfig(tp=8)) == one
    gqa = load_llm("llama-3.1-70b")  # 8 KV heads: split 8 ways
    assert device_kv_bytes_per_token(gqa, ServingConfig(tp=8)) == \
        device_kv_bytes_per_token(gqa, ServingConfig()) / 8


def test_sliding_window_layers_keep_a_ring_buffer():
    """gpt-oss: 18 layers keep min(T, 128) tokens, 18 keep T; 2 x 8 KV heads x 64 each."""
    a = load_llm("gpt-oss-120b")
    per_layer_token = 2 * 8 * 64 * 2
    for tokens in (100, 10_000):
        want = (18 * min(tokens, 128) + 18 * tokens) * per_layer_token
        assert request_kv_bytes(a, FP16, tokens) == want
        assert device_kv_bytes(a, ServingConfig(), tokens) == want
    assert request_kv_bytes(a, FP16, 10_000, batch=3) == 3 * request_kv_bytes(a, FP16, 10_000)


def test_gemma_3_cache_grows_in_its_global_layers_only():
    a = load_llm("gemma-3-27b")
    step = request_kv_bytes(a, FP16, 20_001) - request_kv_bytes(a, FP16, 20_000)
    assert step == 10 * 2 * 16 * 128 * 2  # 10 global layers of 62


def test_uniform_models_keep_the_old_formula():
    mistral = load_llm("mistral-7b")
    for tokens in (100, 9000):
        assert request_kv_bytes(mistral, FP16, tokens) == \
            kv_tokens(mistral, tokens) * kv_bytes_per_token(mistral, FP16)


@pytest.mark.parametrize("name", ["deepseek-v3", "gpt-oss-20b", "llama-4-scout", "glm-4.5-air",
                                  "gemma-3-12b", "qwen3-30b-a3b", "mixtral-8x7b"])
def test_fp16_weights_are_two_bytes_per_parameter(name):
    """Weights summed over the layer kinds agree with the parameter count (MLA matrices,
    shared experts, sinks, qk-norm gains, dense layers)."""
    a = load_llm(name)
    assert weights_bytes(a, FP16) == pytest.approx(2 * a.params, rel=1e-12)


def test_fp8_weights_halve_the_projections():
    a = load_llm("deepseek-v3")
    fp8 = TensorDtypes.of(ServingConfig(weights="fp8"))
    ratio = weights_bytes(a, fp8) / weights_bytes(a, FP16)
    assert 0.5 < ratio < 0.505  # embeddings, norms, router stay at 16 bits


def test_pipeline_share_is_the_fullest_stage():
    """DeepSeek-V3 over 2 stages of ceil(61 / 2) = 31 layers: the second (30 MoE layers)
    outweighs the first (3 dense + 28 MoE)."""
    a = load_llm("deepseek-v3")
    share = device_share(a, ServingConfig(pp=2))
    assert share.layers == 30
    assert all(k.moe is not None for k in share.local.kinds)
    first = replace(a, n_layers=31, layers=a.layers[:31])
    assert device_weights_bytes(share.local, FP16, layers=30, experts=256, pp=2) > \
        device_weights_bytes(first, FP16, layers=31, experts=256, pp=2)
