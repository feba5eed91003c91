"""Weights, KV cache, activations, reserve; the largest batch; devices needed."""

from __future__ import annotations

import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.llm.precision import INT4_GROUP, TensorDtypes
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.memory.decoder import kv_bytes_per_token, weights_bytes
from roofcast.predictor.memory.serving import (
    DEFAULT_MEMORY_UTILIZATION,
    device_kv_bytes_per_token,
    devices_needed,
    max_batch,
    serving_memory,
)
from roofcast.predictor.runtimes import get_runtime

GIB = 2**30


def test_unquantised_weights_are_params_times_bytes(archs):
    for a in archs.values():
        assert weights_bytes(a, TensorDtypes("fp16")) == 2 * a.params
        assert weights_bytes(a, TensorDtypes("fp32")) == 4 * a.params


def test_int4_weights_carry_group_scales(archs):
    a = archs["llama-2-7b"]
    proj = a.n_layers * (a.attention_params + a.expert_params)
    rest = a.params - proj
    expected = proj * (0.5 + 2.5 / INT4_GROUP) + rest * 2
    assert weights_bytes(a, TensorDtypes("int4")) == pytest.approx(expected)
    assert weights_bytes(a, TensorDtypes("int4")) / GIB == pytest.approx(3.6, abs=0.05)


def test_kv_bytes_per_token(archs):
    # Llama-2-7B: 2 x 32 layers x 32 heads x 128 x 2 B = 512 KiB; Llama-3.1-70B GQA: 320 KiB
    assert kv_bytes_per_token(archs["llama-2-7b"], TensorDtypes()) == 512 * 1024
    assert kv_bytes_per_token(archs["llama-3.1-70b"], TensorDtypes()) == 320 * 1024
    assert kv_bytes_per_token(archs["llama-3.1-70b"], TensorDtypes("fp16", "fp8")) == 160 * 1024


def test_breakdown_and_sliding_window(archs, engine):
    h100 = get_device("h100-sxm")
    cfg = ServingConfig(1024, 1024)
    m = serving_memory(archs["llama-2-7b"], h100, cfg, 4, engine)
    assert m.kv_cache_bytes == 4 * 2048 * 512 * 1024
    assert m.other_bytes == pytest.approx((1 - 0.9) * h100.mem_capacity_bytes)
    assert m.total_bytes == pytest.approx(m.weights_bytes + m.kv_cache_bytes
                                          + m.activations_bytes + m.other_bytes)
    long = ServingConfig(8000, 2000)
    mw = serving_memory(archs["mistral-7b"], h100, long, 1, engine)
    assert mw.kv_cache_bytes == 4096 * device_kv_bytes_per_token(
        archs["mistral-7b"], long
    )  # the window caps the cache
    # without a [serving] table the documented default utilisation applies
    eager = get_runtime("pytorch-eager")
    assert eager.serving is None
    assert serving_memory(archs["llama-2-7b"], h100, cfg, 1, eager).other_bytes == \
        pytest.approx((1 - DEFAULT_MEMORY_UTILIZATION) * h100.mem_capacity_bytes)


def test_max_batch_is_the_largest_that_fits(archs, engine):
    a100 = get_device("a100-80gb-sxm")
    a = archs["llama-2-7b"]
    cfg = ServingConfig(1024, 1024)
    mb = max_batch(a, a100, cfg, engine)
    assert serving_memory(a, a100, cfg, mb, engine).fits
    assert not serving_memory(a, a100, cfg, mb + 1, engine).fits
    # closed form: ~(0.9 x 80 GiB - 12.6 GiB weights) / 1 GiB of KV per request, less activations
    assert 50 <= mb <= 59
    # quantised KV doubles the room
    assert max_batch(a, a100, ServingConfig(1024, 1024, kv_cache="fp8"), engine) > 1.8 * mb


def test_too_large_model_needs_more_devices(archs, engine):
    a = archs["llama-3.1-70b"]
    cfg = ServingConfig(2048, 256)
    h100 = get_device("h100-sxm")
    assert max_batch(a, h100, cfg, engine) == 0
    assert devices_needed(a, h100, cfg, engine) == 2  # 131 GiB of fp16 weights / 72 GiB usable
    assert devices_needed(a, h100, ServingConfig(2048, 256, weights="fp8"), engine) == 1
    assert max_batch(a, h100, ServingConfig(2048, 256, weights="fp8"), engine) > 0
