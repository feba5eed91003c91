"""Shared LLM architectures (HF config figures typed in, so these tests need no config reader)
and a serving engine profile that runs every dtype."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.predictor.runtimes import get_runtime
from roofcast.predictor.runtimes.profile import ServingSpec

ARCHS: dict[str, LLMArch] = {
    # meta-llama/Llama-2-7b-hf config.json
    "llama-2-7b": LLMArch("llama-2-7b", "llama", n_layers=32, d_model=4096, n_heads=32,
                          n_kv_heads=32, head_dim=128, d_ff=11008, vocab=32000,
                          max_context=4096),
    # meta-llama/Llama-3.1-70B: GQA 64 query heads, 8 KV heads
    "llama-3.1-70b": LLMArch("llama-3.1-70b", "llama", n_layers=80, d_model=8192, n_heads=64,
                             n_kv_heads=8, head_dim=128, d_ff=28672, vocab=128256,
                             max_context=131072),
    # mistralai/Mixtral-8x7B-v0.1: 8 experts, 2 per token
    "mixtral-8x7b": LLMArch("mixtral-8x7b", "mixtral", n_layers=32, d_model=4096, n_heads=32,
                            n_kv_heads=8, head_dim=128, d_ff=14336, vocab=32000,
                            max_context=32768, n_experts=8, experts_per_token=2),
    # mistralai/Mistral-7B-v0.1: sliding window 4096
    "mistral-7b": LLMArch("mistral-7b", "mistral", n_layers=32, d_model=4096, n_heads=32,
                          n_kv_heads=8, head_dim=128, d_ff=14336, vocab=32000,
                          max_context=32768, sliding_window=4096),
    # facebook/opt-1.3b-like shape: learned positions, LayerNorm, ReLU, biases, tied embeddings
    "opt-like": LLMArch("opt-like", "opt", n_layers=24, d_model=2048, n_heads=32, n_kv_heads=32,
                        head_dim=64, d_ff=8192, vocab=50272, max_context=2048, gated_mlp=False,
                        activation="relu", norm="layernorm", positions="learned",
                        tied_embeddings=True, qkv_bias=True, mlp_bias=True),
    # EleutherAI/gpt-j-6b-like: parallel block, tanh GELU, LayerNorm
    "gptj-like": LLMArch("gptj-like", "gptj", n_layers=28, d_model=4096, n_heads=16,
                         n_kv_heads=16, head_dim=256, d_ff=16384, vocab=50400,
                         max_context=2048, gated_mlp=False, activation="gelu_tanh",
                         norm="layernorm", parallel_block=True, mlp_bias=True),
}


@pytest.fixture(scope="session")
def archs() -> dict[str, LLMArch]:
    return ARCHS


ALL_SERVING = ServingSpec(weights=("fp32", "fp16", "bf16", "fp8", "int8", "int4"),
                          kv_cache=("fp32", "fp16", "bf16", "fp8", "int8"))


@pytest.fixture(scope="session")
def engine():
    """TensorRT's kernel mapping (fused attention, captured launches) as a serving engine
    that runs every weight and KV dtype on any vendor, continuous batching (no calibration
    fitted for it: the identity)."""
    return replace(get_runtime("tensorrt"), name="test-engine", serving=ALL_SERVING, vendors=())


@pytest.fixture(scope="session")
def static_engine():
    """The same engine batching statically, chunked prefill of 512 tokens."""
    return replace(get_runtime("tensorrt"), name="test-static",
                   serving=replace(ALL_SERVING, batching="static", max_prefill_tokens=512))
