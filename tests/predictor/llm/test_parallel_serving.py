"""Tensor / pipeline / expert parallel serving: checks, per-device shapes and memory,
communication through the collectives, calibration on compute only, plan search."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from roofcast.hw_catalog import get_device
from roofcast.hw_catalog.systems import derive_system, get_system, system_from_device
from roofcast.predictor.collectives import collective_time_s, engine_time_s
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.comm import LOGIT_BYTES
from roofcast.predictor.llm.kernels import busiest_share, expected_experts, expected_max_binomial
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.serving import predict_many, predict_serving
from roofcast.predictor.llm.serving_plan import serving_plan_search, splits
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.memory.decoder import kv_bytes_per_token, weights_bytes
from roofcast.predictor.memory.serving import device_kv_bytes_per_token, serving_memory
from roofcast.predictor.parallel.types import ParallelPlanError
from roofcast.predictor.sharding import Sharding, check_sharding, local_arch

A100 = "a100-40gb-sxm"


@pytest.fixture(scope="module")
def a100():
    return get_device(A100)


def _cfg(**kw) -> ServingConfig:
    base = {"input_tokens": 512, "output_tokens": 64, "batch": 8, "runtime": "tensorrt-llm"}
    return ServingConfig(**{**base, **kw})


# --- checks ---------------------------------------------------------------------------------


def test_tp_not_dividing_heads_is_refused_with_the_degrees_that_work(archs):
    with pytest.raises(ParallelPlanError, match=r"tp=3 does not divide the 32 attention heads of "
                       r"llama-2-7b; use 1, 2, 4, 8, 16 or 32"):
        check_sharding(archs["llama-2-7b"], Sharding(tp=3))


def test_tp_must_divide_or_replicate_kv_heads(archs):
    odd = replace(archs["llama-2-7b"], name="odd", n_heads=12, n_kv_heads=4)
    with pytest.raises(ParallelPlanError, match="tp=6 is not a multiple of the 4 KV heads of odd"):
        check_sharding(odd, Sharding(tp=6))
    check_sharding(archs["llama-3.1-70b"], Sharding(tp=16))  # 8 KV heads, each on 2 devices
    assert local_arch(archs["llama-3.1-70b"], Sharding(tp=16)).n_kv_heads == 1


@pytest.mark.parametrize(("arch", "sh", "match"), [
    ("llama-2-7b", Sharding(pp=33), "pp=33 exceeds the 32 layers"),
    ("llama-2-7b", Sharding(tp=2, ep=2),
     "ep=2 needs a mixture-of-experts model; llama-2-7b is dense"),
    ("mixtral-8x7b", Sharding(tp=2, ep=4), "ep=4 does not divide tp = 2 .* use ep in 1 or 2"),
    ("mixtral-8x7b", Sharding(tp=4, ep=3), "use 1, 2 or 4"),
])
def test_bad_layouts_are_refused(archs, arch, sh, match):
    with pytest.raises(ParallelPlanError, match=match):
        check_sharding(archs[arch], sh)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_config_degrees_must_be_positive_integers(archs, a100, bad):
    with pytest.raises(ParallelPlanError, match="tp must be a positive integer"):
        predict_serving(archs["llama-2-7b"], a100, _cfg(tp=bad))


def test_system_of_another_device_or_too_small_is_refused(archs, a100):
    with pytest.raises(PredictionError, match="made of a100-80gb-sxm, not a100-40gb-sxm"):
        predict_serving(archs["llama-2-7b"], a100, _cfg(tp=2), system=get_system("dgx-a100"))
    with pytest.raises(ParallelPlanError, match="= 8 devices exceed the 4"):
        predict_serving(archs["llama-2-7b"], a100, _cfg(tp=4, pp=2),
                        system=system_from_device(A100, 4))


# --- per-device shapes and memory -------------------------------------------------------------


def test_local_arch_splits_heads_ff_and_vocab(archs):
    a = archs["llama-2-7b"]
    assert local_arch(a, Sharding()) is a
    loc = local_arch(a, Sharding(tp=4))
    assert (loc.n_heads, loc.n_kv_heads, loc.d_ff, loc.vocab, loc.n_layers) == (
        8,
        8,
        2752,
        8000,
        32,
    )
    moe = local_arch(archs["mixtral-8x7b"], Sharding(tp=4, ep=2))  # moe_tp = 2
    assert (moe.d_ff, moe.n_experts) == (14336 // 2, 8)


def test_weights_and_kv_per_device(archs, a100):
    a, dt = archs["llama-2-7b"], TensorDtypes.of(_cfg())
    full = serving_memory(a, a100, _cfg(), 1, None)
    assert full.weights_bytes == weights_bytes(a, dt)
    end = a.vocab * a.d_model * 2.0  # the embedding or the LM head at fp16 (vocab-parallel)
    norms = 2 * a.d_model * 2.0  # a layer's two RMSNorm weights, replicated on every device
    final = a.d_model * 2.0  # the final norm, replicated
    split = full.weights_bytes - 2 * end - final - a.n_layers * norms  # the split projections
    for tp, pp in ((2, 1), (1, 4), (2, 2)):
        m = serving_memory(a, a100, _cfg(tp=tp, pp=pp), 1, None)
        layers = split / (tp * pp) + a.n_layers / pp * norms
        want = layers + (2 * end / tp + final if pp == 1 else end / tp + final)
        assert m.weights_bytes == pytest.approx(want, rel=1e-6)
        assert device_kv_bytes_per_token(a, _cfg(tp=tp, pp=pp)) == pytest.approx(
            device_kv_bytes_per_token(a, _cfg()) / (tp * pp))
    # 8 KV heads at tp=16: every device keeps one KV head -> 1/8 of the KV, not 1/16
    g = archs["llama-3.1-70b"]
    kv = device_kv_bytes_per_token(g, _cfg(tp=16))
    assert kv == pytest.approx(kv_bytes_per_token(g, dt) / 8)


def test_tensor_parallel_makes_a_model_fit_and_says_by_how_much_otherwise(archs, a100):
    g = archs["llama-3.1-70b"]
    two = predict_serving(g, a100, _cfg(tp=2))
    assert two.max_batch == 0
    assert math.isnan(two.tpot_s)
    over = two.memory.total_bytes - two.memory.capacity_bytes
    assert any(f"{over / 2**30:.1f} GiB over" in n for n in two.notes)
    eight = predict_serving(g, a100, _cfg(tp=8), system=system_from_device(A100, 8))
    assert eight.max_batch > 0
    assert eight.tpot_s > 0
    assert eight.devices == 8


# --- expert parallel load --------------------------------------------------------------------


def test_expected_max_binomial_matches_simulation():
    rng = np.random.default_rng(0)
    for n, p, g in ((2, 0.25, 4), (256, 0.25, 4), (40, 0.5, 2)):
        sim = rng.binomial(n, p, size=(200_000, g)).max(axis=1).mean()
        assert expected_max_binomial(n, p, g) == pytest.approx(sim, rel=0.01)


def test_busiest_expert_group():
    assert busiest_share(8, 2, 16, 1) == (expected_experts(8, 2, 16), 32.0)
    # one token, 2 of 8 experts, 4 groups of 2: both picks in one group with probability 1/7
    experts, pairs = busiest_share(8, 2, 1, 4)
    assert experts == pytest.approx(8 / 7, rel=0.03)
    assert experts > 0.5  # more than the mean share: the step waits for the busiest group
    _, pairs = busiest_share(8, 2, 4096, 4)
    assert 2048 < pairs < 1.05 * 2048


def test_expert_parallel_decode_is_slower_than_tensor_parallel_at_batch_1(archs, a100):
    """At batch 1 a group holding a picked expert reads all of it (busiest group) while tp
    splits every expert four ways (Argonne Fig 5a measures EP 1.7x slower than TP)."""
    m, sysm = archs["mixtral-8x7b"], system_from_device(A100, 4)
    tp = predict_serving(m, a100, _cfg(batch=1, tp=4), system=sysm)
    ep = predict_serving(m, a100, _cfg(batch=1, tp=4, ep=4), system=sysm)
    assert ep.tpot_s > 1.3 * tp.tpot_s
    assert ep.memory.weights_bytes == pytest.approx(tp.memory.weights_bytes, rel=0.01)


# --- time, communication, calibration ---------------------------------------------------------


def test_tensor_parallel_speeds_up_decode_and_pays_its_all_reduces(archs, a100):
    a = archs["llama-2-7b"]
    one = predict_serving(a, a100, _cfg())
    sysm = system_from_device(A100, 2)
    two = predict_serving(a, a100, _cfg(tp=2), system=sysm)
    assert two.tpot_s < one.tpot_s
    assert two.ttft_s < one.ttft_s
    assert one.comm_tpot_s == 0.0
    assert one.devices == 1
    # decode step: 8 tokens -> 2 all-reduces per layer of 8 x 4096 x 2 bytes (TensorRT-LLM's
    # one-shot kernel: 2 ranks on NVSwitch, 64 KiB < 16e6) + the logits' NCCL all-gather
    want = (2 * 32 * engine_time_s("all_reduce", "one_shot", 8 * 4096 * 2.0, 2, sysm)
            + collective_time_s("all_gather", 8 * 32000 * LOGIT_BYTES, 2, sysm))
    assert two.comm_tpot_s == pytest.approx(want)
    assert two.as_dict()["devices"] == 2
    assert two.as_dict()["parallel_comm"]["tpot_ms"] == pytest.approx(want * 1e3)


def test_calibration_multiplies_compute_only(archs):
    """vLLM's decode factor on MI300X is far from 1: a slower fabric must add exactly its extra
    communication to TPOT, not that times the factor."""
    hw = get_device("mi300x")
    a, cfg = archs["llama-2-7b"], _cfg(runtime="vllm", tp=4)
    fast = get_system("mi300x-8")
    slow = derive_system(fast, link_GBps=fast.fabric.link_GBps / 20, fabric_latency_us=50)
    pf, ps = (predict_serving(a, hw, cfg, system=s) for s in (fast, slow))
    assert ps.comm_tpot_s > 2 * pf.comm_tpot_s
    assert ps.tpot_s - pf.tpot_s == pytest.approx(ps.comm_tpot_s - pf.comm_tpot_s, rel=1e-9)
    assert ps.ttft_s - pf.ttft_s == pytest.approx(ps.comm_ttft_s - pf.comm_ttft_s, rel=1e-9)


def test_pipeline_static_batch_passes_stages_in_turn(archs, a100):
    a = archs["llama-2-7b"]
    one = predict_serving(a, a100, _cfg())
    sysm = system_from_device(A100, 4)
    four = predict_serving(a, a100, _cfg(pp=4), system=sysm)
    sends = 3 * collective_time_s("send_recv", 8 * 4096 * 2.0, 2, sysm)
    assert four.comm_tpot_s == pytest.approx(sends)
    # same kernels (the LM head's vocab is whole at tp=1), plus three sends
    assert four.tpot_s == pytest.approx(one.tpot_s + sends, rel=1e-6)


def test_pipeline_continuous_batching_keeps_micro_batches_in_flight(archs, a100, engine):
    a = archs["llama-2-7b"]
    sysm = system_from_device(A100, 2)
    cfg = ServingConfig(512, 64, concurrency=32, runtime=engine)
    one, two = predict_serving(a, a100, cfg), predict_serving(a, a100, replace(cfg, pp=2),
                                                               system=sysm)
    # two micro-batches of 16: each round is one pass of 16 requests through both stages
    half = predict_serving(a, a100, replace(cfg, concurrency=16))
    assert two.tpot_s == pytest.approx(half.tpot_s + two.comm_tpot_s, rel=1e-6)
    assert two.output_tokens_per_s > one.output_tokens_per_s


def test_default_system_is_one_node_of_the_device(archs, a100):
    p = predict_serving(archs["llama-2-7b"], a100, _cfg(tp=2))
    assert any(f"of {A100}-x2 (nvswitch" in n for n in p.notes)


def test_predict_many_takes_the_system(archs, a100):
    sysm = system_from_device(A100, 2)
    many = predict_many(archs["llama-2-7b"], [a100], _cfg(tp=2), [1, 8], system=sysm,
                        kernels=False)
    single = predict_serving(archs["llama-2-7b"], a100, _cfg(tp=2, batch=8), system=sysm)
    assert [p.batch for p in many] == [1, 8]
    assert many[1].tpot_s == pytest.approx(single.tpot_s)


# --- plan search ------------------------------------------------------------------------------


def test_splits_cover_every_divisor_pair():
    got = splits(8)
    assert len(got) == len(set(got)) == 10
    assert all(8 % (tp * pp) == 0 for tp, pp in got)


def test_plan_search_ranks_fitting_plans_by_throughput(archs):
    sysm = get_system("hgx-h100")
    table = serving_plan_search(archs["llama-3.1-70b"], sysm, ServingConfig(1024, 256))
    assert len(table) == 10
    assert list(table["rank"]) == list(range(1, 11))
    fits = table[table.fits]
    assert len(fits) > 0
    assert (fits.index < table[~table.fits].index.min()).all()
    assert fits.tokens_per_s.is_monotonic_decreasing
    assert np.allclose(fits.tokens_per_s, fits.replica_tokens_per_s * fits.replicas)
    single = table[table.plan == "tp1 pp1 x8"].iloc[0]
    assert not single.fits
    assert single.over_GiB > 40


def test_plan_search_keeps_refused_splits_with_their_reason(archs):
    qwen = replace(archs["llama-2-7b"], name="qwen-like", n_heads=28, n_kv_heads=4)
    table = serving_plan_search(qwen, get_system("dgx-a100"), _cfg(runtime=None, batch=4))
    refused = table[table.tp == 8]
    assert len(refused) == 1
    assert not refused.fits.iloc[0]
    assert "tp=8 does not divide the 28 attention heads" in refused.notes.iloc[0]


def test_plan_search_fills_a_static_engine_to_its_max_batch(archs, static_engine):
    table = serving_plan_search(archs["llama-2-7b"], get_system("dgx-a100"),
                                ServingConfig(512, 64, runtime=static_engine))
    fits = table[table.fits]
    assert len(fits) == 10
    assert (fits.batch == fits.max_batch).all()
    # more devices per replica hold more requests each
    by_devices = fits.groupby("devices_per_replica").max_batch.min()
    assert by_devices.is_monotonic_increasing


def test_engine_all_reduce_kernels_follow_the_profile_and_fall_back_to_nccl(archs, a100):
    """TensorRT-LLM (AUTO) on 4 x A100 NVSwitch: one-shot below 1e6 B, two-shot up to 8e6 B,
    NCCL above; an engine without the table, or a PCIe fabric, runs NCCL."""
    a = archs["llama-2-7b"]
    sysm = system_from_device(A100, 4)
    trt = predict_serving(a, a100, _cfg(tp=4), system=sysm)
    assert any("decode all-reduces: one-shot" in n for n in trt.notes)
    want = (2 * 32 * engine_time_s("all_reduce", "one_shot", 8 * 4096 * 2.0, 4, sysm)
            + collective_time_s("all_gather", 8 * 32000 * LOGIT_BYTES, 4, sysm))
    assert trt.comm_tpot_s == pytest.approx(want)
    mii = predict_serving(a, a100, _cfg(tp=4, runtime="deepspeed-mii", batch=8), system=sysm)
    nccl = (2 * 32 * collective_time_s("all_reduce", 8 * 4096 * 2.0, 4, sysm)
            + collective_time_s("all_gather", 8 * 32000 * LOGIT_BYTES, 4, sysm))
    assert mii.comm_tpot_s == pytest.approx(nccl)
    assert trt.comm_tpot_s < mii.comm_tpot_s
    pcie = derive_system(sysm, fabric="pcie-switch", link_GBps=32)
    on_pcie = predict_serving(a, a100, _cfg(tp=4), system=pcie)
    assert any("decode all-reduces: nccl" in n for n in on_pcie.notes)
