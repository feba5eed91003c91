"""A speculative-decoding draft's weights and KV are counted in the serving memory."""

from __future__ import annotations

import pytest

from roofcast import api
from roofcast.predictor.llm.phases import engine_profile
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.sim.kvcache import kv_pool
from roofcast.predictor.llm.spec_decode import SpecDecode
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.memory.decoder import kv_bytes_per_token, layer_bytes, weights_bytes
from roofcast.predictor.memory.serving import (
    device_kv_bytes_per_token,
    max_batch,
    serving_memory,
)


@pytest.fixture(scope="module")
def setup():
    arch, hw = api.llm_arch("llama-3.1-70b"), api.device("h200")
    return arch, hw, engine_profile(None, hw)


def test_a_draft_model_adds_its_weights_and_cache_on_every_device(setup):
    arch, hw, profile = setup
    plain = ServingConfig(1024, 512, tp=2)
    spec = ServingConfig(1024, 512, tp=2, spec_decode=SpecDecode("draft", 4, 0.7,
                                                                 "llama-3.1-8b"))
    draft, dt = api.llm_arch("llama-3.1-8b"), TensorDtypes.of(plain)
    a, b = serving_memory(arch, hw, plain, 4, profile), serving_memory(arch, hw, spec, 4, profile)
    assert b.weights_bytes - a.weights_bytes == pytest.approx(weights_bytes(draft, dt))
    assert b.kv_cache_bytes - a.kv_cache_bytes == pytest.approx(
        4 * 1536 * kv_bytes_per_token(draft, dt))
    assert device_kv_bytes_per_token(arch, spec) - device_kv_bytes_per_token(arch, plain) == \
        pytest.approx(kv_bytes_per_token(draft, dt))
    assert max_batch(arch, hw, spec, profile) < max_batch(arch, hw, plain, profile)
    assert kv_pool(arch, hw, spec, profile).blocks < kv_pool(arch, hw, plain, profile).blocks


def test_an_mtp_layer_adds_one_layer_of_the_devices_shard(setup):
    arch, hw, profile = setup
    plain = ServingConfig(1024, 512, tp=2)
    spec = ServingConfig(1024, 512, tp=2, spec_decode=SpecDecode("mtp", 2, 0.8))
    a, b = serving_memory(arch, hw, plain, 1, profile), serving_memory(arch, hw, spec, 1, profile)
    # tp = 2 halves the layer's matrices (its norms are whole: within 1 %)
    one = layer_bytes(arch, TensorDtypes.of(plain), arch.n_experts) / 2
    assert b.weights_bytes - a.weights_bytes == pytest.approx(one, rel=0.01)
    assert b.kv_cache_bytes - a.kv_cache_bytes == pytest.approx(a.kv_cache_bytes / arch.n_layers)
