"""HardwareSpec: SI conversion, peak lookup with fallback tiers, what-if by replace()."""

from __future__ import annotations

import dataclasses
import math
import pickle

import pytest

from roofcast.graph_import.types import Engine
from roofcast.hw_catalog import HardwareSpecError
from roofcast.hw_catalog.schema import spec_to_doc
from roofcast.hw_catalog.spec import FALLBACKS, canonical_dtype


@pytest.fixture
def old(catalog):
    return catalog.devices["fixture-oldgpu"]


def test_toml_units_become_si(gpu):
    assert gpu.mem_bw_Bps == 3350e9
    assert gpu.mem_capacity_bytes == 80 * 2**30
    assert gpu.l2_bytes == 50 * 2**20
    assert gpu.l1_per_unit_bytes == 256 * 1024
    assert gpu.clock_Hz == 1980e6
    assert gpu.launch_overhead_s == pytest.approx(4.0e-6)
    assert gpu.host_link_Bps == 64e9
    assert gpu.device_link_Bps == 900e9
    assert gpu.peak_flops[("matrix", "bf16")] == pytest.approx(989.4e12)
    assert gpu.ridge_point_flop_per_byte[("matrix", "bf16")] == pytest.approx(989.4e12 / 3350e9)


def test_exact_peak_has_no_note(gpu):
    lookup = gpu.peak(Engine.MATRIX, "bfloat16")
    assert (lookup.flops_per_s, lookup.engine_used, lookup.dtype_used) == (
        pytest.approx(989.4e12), "matrix", "bf16")
    assert not lookup.is_fallback


@pytest.mark.parametrize(("engine", "dtype", "used", "tera", "note"), [
    # no fp32 matrix unit -> vector fp32
    ("matrix", "float", ("vector", "fp32"), 66.9, "no fp32 matrix unit; using vector fp32"),
    # int32 elementwise -> vector fp32 rate
    ("vector", "int64", ("vector", "fp32"), 66.9, "no int64 vector unit"),
    # fp8 on the vector engine -> fastest 16-bit vector path
    ("vector", "float8e4m3fn", ("vector", "fp16"), 133.8, "no fp8 vector unit"),
    # int4 -> int8 matrix
    ("matrix", "int4", ("matrix", "int8"), 1978.9, "no int4 matrix unit"),
])
def test_fallbacks_on_a_modern_gpu(gpu, engine, dtype, used, tera, note):
    lookup = gpu.peak(engine, dtype)
    assert (lookup.engine_used, lookup.dtype_used) == used
    assert lookup.flops_per_s == pytest.approx(tera * 1e12)
    assert note in lookup.note


@pytest.mark.parametrize(("dtype", "unit"), [("nvfp4", "fp4"), ("mxfp4", "fp4"),
                                            ("fp8_block", "fp8")])
def test_a_block_scaled_format_uses_its_element_unit(gpu, dtype, unit):
    with_fp4 = dataclasses.replace(gpu, peak_flops={**gpu.peak_flops, ("matrix", "fp4"): 4e15})
    lookup = with_fp4.peak("matrix", dtype)
    assert (lookup.dtype_used, lookup.note) == (unit, "")


def test_a_narrow_format_on_a_wider_unit_says_math_and_storage(gpu, old):
    # fixture-gpu (H100-like) has fp8 but no fp4 matrix unit: nvfp4 math at fp8
    lookup = gpu.peak("matrix", "nvfp4")
    assert (lookup.dtype_used, lookup.flops_per_s) == ("fp8", pytest.approx(1978.9e12))
    assert lookup.note == ("Fixture GPU 80GB has no fp4 matrix unit; using matrix fp8 (math at "
                           "fp8; nvfp4 tensors stay stored at 0.5625 B/element)")
    # an fp8 request on a device without fp8 units computes at 16 or 32 bits, stored 1 B
    assert "fp8 tensors stay stored at 1 B/element" in old.peak("matrix", "fp8").note
    # 16-bit formats keep the short note (a wider unit is the usual path, not a quantisation)
    assert "stored" not in old.peak("matrix", "fp16").note


def test_p4_like_fp16_uses_vector_fp32_not_slow_fp16(old):
    # fixture-oldgpu: vector fp16 0.086 TF (1/64 rate), vector fp32 5.5 TF -> the faster path
    lookup = old.peak("matrix", "float16")
    assert (lookup.engine_used, lookup.dtype_used) == ("vector", "fp32")
    assert lookup.flops_per_s == pytest.approx(5.5e12)
    assert lookup.note == "Fixture Old GPU has no fp16 matrix unit; using vector fp32"


def test_int8_without_matrix_unit_uses_dp4a_vector_int8(old):
    lookup = old.peak("matrix", "int8")
    assert (lookup.engine_used, lookup.flops_per_s) == ("vector", pytest.approx(22e12))


def test_bf16_without_any_bf16_unit_does_not_borrow_fp16_tensor_cores(old, gpu):
    # a V100-like device: matrix fp16 only. bf16 must not get the fp16 tensor-core peak.
    v100_like = dataclasses.replace(
        old, peak_flops={("matrix", "fp16"): 125e12, ("vector", "fp32"): 15.7e12})
    assert v100_like.peak("matrix", "bf16").dtype_used == "fp32"
    # a Gaudi-like device with bf16 matrix only: fp16 models run in bf16 (last tier)
    bf16_only = dataclasses.replace(old, peak_flops={("matrix", "bf16"): 432e12})
    lookup = bf16_only.peak("matrix", "fp16")
    assert (lookup.dtype_used, lookup.flops_per_s) == ("bf16", 432e12)


def test_data_and_free_engines_have_no_compute_bound(gpu):
    for engine in (Engine.DATA, Engine.FREE):
        lookup = gpu.peak(engine, "float")
        assert math.isinf(lookup.flops_per_s)
        assert 0.0 / lookup.flops_per_s == 0.0


def test_missing_peak_without_fallback_is_a_clear_error(old):
    no_fp64 = dataclasses.replace(old, peak_flops={("vector", "fp32"): 5.5e12})
    with pytest.raises(HardwareSpecError, match=r"has no vector fp64 peak and no fallback path "
                                                r"\(it has: vector fp32\)"):
        no_fp64.peak("vector", "double")


def test_unknown_dtype_and_engine(gpu):
    with pytest.raises(HardwareSpecError, match="unknown dtype 'float13'"):
        gpu.peak("matrix", "float13")
    with pytest.raises(HardwareSpecError, match="unknown engine 'tensor'"):
        gpu.peak("tensor", "float")


def test_replace_makes_a_what_if_device_and_rechecks(gpu):
    fast = dataclasses.replace(gpu, mem_bw_Bps=2 * gpu.mem_bw_Bps)
    assert fast.mem_bw_Bps == 6700e9
    assert gpu.mem_bw_Bps == 3350e9
    assert fast.peak("matrix", "fp16") == gpu.peak("matrix", "fp16")
    with pytest.raises(HardwareSpecError, match="mem_bw_Bps must be positive"):
        dataclasses.replace(gpu, mem_bw_Bps=0.0)


def test_spec_is_immutable_hashable_and_picklable(gpu):
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu.mem_bw_Bps = 1.0
    with pytest.raises(TypeError):
        gpu.peak_flops[("matrix", "fp16")] = 1.0
    assert pickle.loads(pickle.dumps(gpu)) == gpu
    assert hash(gpu) == hash(dataclasses.replace(gpu))


def test_spec_to_doc_round_trips(gpu):
    doc = spec_to_doc(gpu)
    assert doc["memory"]["bandwidth_GBps"] == 3350
    assert doc["peak_TOPS"]["matrix"]["bf16"] == 989.4
    assert doc["cache"]["l2_MB"] == 50


def test_fallback_table_is_consistent():
    for (engine, dtype), tiers in FALLBACKS.items():
        assert canonical_dtype(dtype) == dtype
        for tier in tiers:
            assert tier, f"empty tier for {engine} {dtype}"
            assert (engine, dtype) not in tier, "a path does not fall back to itself"


def test_engine_names_match_graph_import():
    from roofcast.hw_catalog.spec import ENGINES, NO_COMPUTE_ENGINES

    assert set(ENGINES) | set(NO_COMPUTE_ENGINES) == {e.value for e in Engine}
