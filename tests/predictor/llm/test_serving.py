"""Serving metrics: static and continuous identities, fit, validation, JSON record."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.phases import request_model_times, sample_contexts
from roofcast.predictor.llm.precision import KV_CONVERT_OPS
from roofcast.predictor.llm.serving import check_request, predict_serving, serving_table
from roofcast.predictor.llm.types import ServingConfig


@pytest.fixture(scope="module")
def h100():
    return get_device("h100-sxm")


def test_static_identities(archs, engine, h100):
    n, m, b = 1024, 256, 8
    p = predict_serving(archs["llama-2-7b"], h100,
                        ServingConfig(n, m, batch=b, runtime=engine))
    assert p.batch == b
    assert p.max_batch >= b
    assert p.e2e_latency_s == pytest.approx(p.ttft_s + (m - 1) * p.tpot_s)
    assert p.output_tokens_per_s == pytest.approx(b * m / p.e2e_latency_s)
    assert p.total_tokens_per_s == pytest.approx(b * (n + m) / p.e2e_latency_s)
    r = request_model_times(archs["llama-2-7b"], h100, ServingConfig(n, m, runtime=engine), b)
    assert p.ttft_s == pytest.approx(r.prefill_s)  # identity calibration
    assert p.tpot_s == pytest.approx(r.decode_total_s / (m - 1))
    for k in ("ttft_s", "tpot_s", "e2e_latency_s", "output_tokens_per_s"):
        assert p.lower[k] <= getattr(p, k) <= p.upper[k]


def test_continuous_identities(archs, engine, h100):
    n, m, c = 512, 128, 16
    p = predict_serving(archs["llama-2-7b"], h100,
                        ServingConfig(n, m, concurrency=c, runtime=engine))
    assert p.output_tokens_per_s == pytest.approx(c / p.tpot_s)
    assert p.total_tokens_per_s == pytest.approx(p.output_tokens_per_s * (n + m) / m)
    assert p.e2e_latency_s == pytest.approx(p.ttft_s + (m - 1) * p.tpot_s)
    # a mixed step decodes 16 requests and prefills 16 x 512 / 128 = 64 prompt tokens
    dec = p.kernels[p.kernels["phase_step"] == "decode"]
    assert dec.loc[dec["node"] == "qkv", "gemm_m"].iloc[0] == c + 64
    top = predict_serving(archs["llama-2-7b"], h100,
                          ServingConfig(n, m, concurrency="max", runtime=engine))
    assert top.batch == top.max_batch > c
    assert top.output_tokens_per_s > p.output_tokens_per_s
    assert top.tpot_s > p.tpot_s


def test_decode_interpolation_matches_every_step(archs, engine, h100):
    a = archs["llama-2-7b"]
    cfg = ServingConfig(1024, 512, runtime=engine)
    few = request_model_times(a, h100, cfg, 4)
    every = request_model_times(a, h100, cfg, 4, points=10**6)
    assert len(few.contexts) == 3
    assert len(every.contexts) == 511
    assert few.decode_total_s == pytest.approx(every.decode_total_s, rel=2e-3)
    assert list(sample_contexts(np.arange(5, 7))) == [5, 6]


def test_batch_beyond_memory_runs_in_waves(archs, engine):
    a100 = get_device("a100-80gb-sxm")
    a = archs["llama-2-7b"]
    one = predict_serving(a, a100, ServingConfig(1024, 1024, batch=32, runtime=engine))
    big = predict_serving(a, a100, ServingConfig(1024, 1024, batch=64, runtime=engine))
    assert big.max_batch < 64
    assert any("2 waves of 32" in n for n in big.notes)
    assert big.e2e_latency_s == pytest.approx(2 * one.e2e_latency_s)
    assert big.output_tokens_per_s == pytest.approx(one.output_tokens_per_s)


def test_model_too_large_gives_no_numbers(archs, engine, h100):
    p = predict_serving(archs["llama-3.1-70b"], h100,
                        ServingConfig(2048, 256, runtime=engine))
    assert p.max_batch == 0
    assert p.devices_needed == 2
    assert math.isnan(p.ttft_s)
    assert math.isnan(p.output_tokens_per_s)
    assert p.usd_per_million_tokens is None
    assert p.tokens_per_joule is None
    assert any("needs at least 2" in n for n in p.notes)
    rec = p.as_dict()
    assert rec["ttft_ms"] is None
    assert rec["max_batch"] == 0
    json.dumps(rec, allow_nan=False)


def test_json_record(archs, engine, h100):
    p = predict_serving(archs["llama-2-7b"], h100, ServingConfig(512, 64, runtime=engine))
    rec = p.as_dict()
    for key in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "output_tokens_per_s",
                "total_tokens_per_s", "max_batch", "memory_GiB"):
        assert key in rec
    assert rec["ttft_ms"] == pytest.approx(p.ttft_s * 1e3)
    assert rec["memory_GiB"]["weights"] == pytest.approx(p.memory.weights_bytes / 2**30)
    assert rec["usd_per_million_tokens"] == pytest.approx(
        h100.price_usd / (3 * 365 * 86400) / p.output_tokens_per_s * 1e6)
    assert rec["tokens_per_joule"] == pytest.approx(p.output_tokens_per_s / h100.tdp_W)
    json.dumps(rec, allow_nan=False)


def test_fp8_without_fp8_units_says_so(archs, engine):
    a = archs["llama-2-7b"]
    cfg = ServingConfig(512, 64, weights="fp8", runtime=engine)
    a100 = predict_serving(a, get_device("a100-80gb-sxm"), cfg)
    h100 = predict_serving(a, get_device("h100-sxm"), cfg)
    assert any("no fp8 matrix unit" in n for n in a100.notes)
    assert not any("fp8" in n for n in h100.notes)
    # bytes stay 8-bit on the A100: its fp8 decode beats its fp16 decode
    fp16 = predict_serving(a, get_device("a100-80gb-sxm"), replace(cfg, weights="fp16"))
    assert a100.tpot_s < 0.75 * fp16.tpot_s
    assert a100.memory.weights_bytes < 0.55 * fp16.memory.weights_bytes


def test_quantised_weights_speed_up_decode(archs, engine, h100):
    a = archs["llama-2-7b"]
    tp = {w: predict_serving(a, h100, ServingConfig(512, 64, weights=w, runtime=engine)).tpot_s
          for w in ("fp16", "int8", "int4")}
    assert tp["int4"] < tp["int8"] < tp["fp16"]


def test_serving_table_rows(archs, engine):
    devs = [get_device(d) for d in ("h100-sxm", "h200", "mi300x")]
    cfg = ServingConfig(2048, 256, weights="fp8", runtime=engine)
    df = serving_table(archs["llama-3.1-70b"], devs, cfg, [1, 8, "max"])
    assert len(df) == 9
    assert list(df["device"]) == ["h100-sxm"] * 3 + ["h200"] * 3 + ["mi300x"] * 3
    assert {"ttft_ms", "tpot_ms", "output_tokens_per_s", "mem_weights_GiB", "fits",
            "max_batch", "devices_needed"} <= set(df.columns)
    # 66 GiB of fp8 weights leave the H100 room for a few requests only: batch 8 runs in waves
    h100 = df[df["device"] == "h100-sxm"].set_index("batch")
    assert 1 <= h100.loc[1, "max_batch"] < 8
    assert list(h100["fits"]) == [True, False, True]
    assert df[df["device"] != "h100-sxm"]["fits"].all()
    one = df[df["batch"] == 1].set_index("device")
    assert one.loc["h200", "tpot_ms"] < one.loc["h100-sxm", "tpot_ms"]  # more bandwidth
    assert one["ttft_ms"].notna().all()


@pytest.mark.parametrize(("cfg", "match"), [
    (ServingConfig(4000, 200), "4200 exceed llama-2-7b's maximum context of 4096"),
    (ServingConfig(0, 10), "input tokens must be a positive integer"),
    (ServingConfig(10, -1), "output tokens must be a positive integer"),
    (ServingConfig(10, 10, batch=0), "batch must be a positive integer"),
    (ServingConfig(10, 10, concurrency="all"), "concurrency must be a positive integer"),
    (ServingConfig(10, 10, batch=2, concurrency=2), "not both"),
    (ServingConfig(10, 10, weights="int3"), "weights dtype 'int3' is not supported"),
    (ServingConfig(10, 10, kv_cache="int4"), "kv_cache dtype 'int4' is not supported"),
])
def test_request_validation(archs, engine, cfg, match):
    with pytest.raises(PredictionError, match=match):
        check_request(archs["llama-2-7b"], cfg, engine)


def test_engine_dtype_and_batching_refusals(archs, engine, static_engine):
    a = archs["llama-2-7b"]
    narrow = replace(engine, name="narrow", serving=replace(engine.serving, kv_cache=("fp16",)))
    with pytest.raises(PredictionError, match=r"engine 'narrow' does not run fp8 KV cache "
                                              r"\(it runs fp16\); engines that do: "):
        check_request(a, ServingConfig(10, 10, kv_cache="fp8"), narrow)
    with pytest.raises(PredictionError, match="batches statically"):
        check_request(a, ServingConfig(10, 10, concurrency=4), static_engine)
    nvidia_only = replace(engine, vendors=("NVIDIA",))
    with pytest.raises(PredictionError, match=r"engine 'test-engine' runs on NVIDIA devices "
                                              r"only, not AMD; for a gpu by AMD choose one "
                                              r"of: .*vllm"):
        predict_serving(a, get_device("mi300x"), ServingConfig(10, 10, runtime=nvidia_only))


def test_chunked_prefill_ttft(archs, static_engine, engine, h100):
    a = archs["llama-2-7b"]
    cont = replace(engine, serving=replace(engine.serving, max_prefill_tokens=512))
    p = predict_serving(a, h100, ServingConfig(2048, 128, concurrency=8, runtime=cont))
    ttft = p.kernels[p.kernels["phase_step"] == "ttft"]
    assert ttft.loc[ttft["node"] == "qkv", "gemm_m"].iloc[0] == 7 + 512  # 4 chunks of 512
    s = predict_serving(a, h100, ServingConfig(2048, 128, batch=2, runtime=static_engine))
    assert s.ttft_s > 0
    assert math.isfinite(s.tpot_s)


def test_fp8_kv_cache_notes(archs, engine):
    a = archs["llama-2-7b"]
    cfg = ServingConfig(512, 64, kv_cache="fp8", runtime=engine)
    a100 = predict_serving(a, get_device("a100-80gb-sxm"), cfg)
    h100 = predict_serving(a, get_device("h100-sxm"), cfg)
    assert any("emulated in software (no fp8 units) to fp16" in n for n in a100.notes)
    assert not any("in software" in n for n in h100.notes)
    assert any("fp8 KV cache: attention reads 1 byte per element" in n for n in h100.notes)
    # the note states the charged count (the test engine converts once per KV head)
    ops = KV_CONVERT_OPS["fp8"]["fp8-units"]
    assert any(f"at {ops:g} lane operations, once per kv head" in n for n in h100.notes)
    plain = predict_serving(a, get_device("h100-sxm"), replace(cfg, kv_cache=None))
    assert not any("KV cache:" in n for n in plain.notes)


def test_prefill_bound_steady_state(archs, engine, h100):
    a = archs["llama-2-7b"]
    capped = replace(engine, serving=replace(engine.serving, max_prefill_tokens=256))
    n, m, c = 2048, 16, 32  # needs 32 x 2048 / 16 = 4096 prompt tokens per step, gets 256
    p = predict_serving(a, h100, ServingConfig(n, m, concurrency=c, runtime=capped))
    decoding = 256 * m / n  # requests entering (and leaving) per step x M steps each
    assert p.output_tokens_per_s == pytest.approx(decoding / p.tpot_s)
    assert any("prefill-bound" in note for note in p.notes)
    free = predict_serving(a, h100, ServingConfig(n, m, concurrency=c, runtime=engine))
    assert free.output_tokens_per_s == pytest.approx(c / free.tpot_s)
    assert not any("prefill-bound" in note for note in free.notes)


def test_table_without_kernel_tables_keeps_the_notes(archs, engine):
    a = archs["llama-2-7b"]
    devs = [get_device("a100-80gb-sxm"), get_device("h100-sxm")]
    cfg = ServingConfig(256, 32, weights="fp8", runtime=engine)
    df = serving_table(a, devs, cfg, [1, 4]).set_index(["device", "batch"])
    assert "no fp8 matrix unit" in df.loc[("a100-80gb-sxm", 4), "notes"]
    assert "no fp8 matrix unit" not in df.loc[("h100-sxm", 4), "notes"]
    full = predict_serving(a, devs[0], replace(cfg, batch=4))
    assert full.kernels is not None
    assert df.loc[("a100-80gb-sxm", 4), "tpot_ms"] == pytest.approx(full.tpot_s * 1e3)


def test_the_archs_notes_reach_the_prediction(archs, engine, h100):
    arch = replace(archs["llama-2-7b"], notes=("the config has no 'num_key_value_heads': ...",))
    p = predict_serving(arch, h100, ServingConfig(128, 16, batch=1, runtime=engine))
    assert p.notes[0] == arch.notes[0]
