"""``roofcast.llm(..., rate=...)`` and ``roofcast.plan(..., rate=...)``: the simulated road
from Python, and its arguments refused in one line naming the argument."""

from __future__ import annotations

import math

import pytest

import roofcast


def test_rate_gives_one_row_per_device_with_percentiles():
    df = roofcast.llm("llama-3.1-8b", ["h100-sxm", "l40s"], rate=3, requests=150,
                      output_tokens=24, slo_ttft_ms=2000, slo_tpot_ms=100)
    assert list(df["device"]) == ["h100-sxm", "l40s"]
    assert (df["ttft_p50_ms"] <= df["ttft_p99_ms"]).all()
    assert (df["goodput_per_s"] <= df["requests_per_s"] + 1e-12).all()
    assert df["road"].str.startswith("simulated: vllm-v1 policy").all()


def test_simulate_with_concurrency_is_a_closed_loop():
    df = roofcast.llm("llama-3.1-8b", "h100-sxm", concurrency=12, simulate=True,
                      output_tokens=16, requests=60)
    assert df["in_flight"].iloc[0] == pytest.approx(12, rel=1e-9)


def test_a_static_batch_runs_the_static_policy():
    df = roofcast.llm("llama-3.1-8b", "h100-sxm", batch=4, rate=2, requests=40,
                      output_tokens=8)
    assert df["policy"].iloc[0] == "static"


@pytest.mark.parametrize(("kwargs", "error", "needle"), [
    ({"rate": 0}, ValueError, "rate (requests/s) must be a finite number > 0"),
    ({"rate": math.nan}, ValueError, "rate (requests/s) must be a finite number > 0"),
    ({"rate": math.inf}, ValueError, "rate (requests/s) must be a finite number > 0"),
    ({"rate": "5"}, TypeError, "rate (requests/s) must be a number"),
    ({"rate": 1, "slo_ttft_ms": -1}, ValueError, "slo_ttft_ms (ms) must be a finite"),
    ({"rate": 1, "slo_tpot_ms": "fast"}, TypeError, "slo_tpot_ms (ms) must be a number"),
    ({"rate": 1, "requests": 0}, ValueError, "requests must be an integer >= 1"),
    ({"rate": 1, "policy": "orca"}, ValueError, "unknown scheduler policy"),
    ({"rate": 1, "engine_max_seqs": 2.5}, TypeError, "max running sequences"),
    ({"rate": 1, "warp": 9}, TypeError, "unknown keyword(s) warp"),
    ({"slo_ttft_ms": 100}, TypeError, "need rate=, trace= or simulate=True"),
    ({"requests": 10}, TypeError, "need rate=, trace= or simulate=True"),
    ({"rate": 1, "concurrency": 4}, ValueError, "not rate and concurrency"),
    ({"trace": "/nonexistent/t.csv"}, ValueError, "not a readable file"),
])
def test_bad_simulation_arguments_are_one_line(kwargs, error, needle):
    with pytest.raises(error) as exc:
        roofcast.llm("llama-3.1-8b", "h100-sxm", **kwargs)
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_plan_with_a_rate_names_the_cheapest_meeting_the_slos():
    df = roofcast.plan("llama-3.1-8b", hw=["h100-sxm", "l40s"], rate=2, slo_ttft_ms=1000,
                       slo_tpot_ms=60, output_tokens=16)
    assert df["rank"].tolist() == list(range(1, len(df) + 1))
    met = df[df["meets"]]
    assert len(met)
    assert met["cost_usd"].is_monotonic_increasing
    assert (met["attainment"] >= 0.9).all()


@pytest.mark.parametrize(("kwargs", "error", "needle"), [
    ({"rate": 2}, ValueError, "give slo_ttft_ms= and/or slo_tpot_ms="),
    ({"rate": -2, "slo_ttft_ms": 100}, ValueError, "rate (requests/s) must be a finite"),
    ({"slo_ttft_ms": 100}, TypeError, "need rate="),
    ({"rate": 1, "slo_tpot_ms": 50, "spec_decode": "mtp:2"}, TypeError,
     "spec_decode= must be None or a SpecDecode"),
])
def test_bad_plan_arguments_are_one_line(kwargs, error, needle):
    with pytest.raises(error, match=None) as exc:
        roofcast.plan("llama-3.1-8b", hw="h100-sxm", **kwargs)
    assert needle in str(exc.value)


def test_llm_spec_decode_of_the_wrong_type_is_one_line():
    with pytest.raises(TypeError) as exc:
        roofcast.llm("llama-3.1-8b", hw="h100-sxm", spec_decode=42)
    assert "spec_decode= must be None or a SpecDecode" in str(exc.value)
    assert "\n" not in str(exc.value)
