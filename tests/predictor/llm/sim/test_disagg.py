"""Prefill/decode disaggregation on a synthetic step table: every request finishes, Little's
law holds, TTFT carries the prefill pool's queue, the KV crosses the fabric before decode."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from roofcast.hw_catalog.systems import system_from_device
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.sim.disagg import Disagg, KvLink, kv_link, parse_disagg, run_disagg
from roofcast.predictor.llm.sim.metrics import summarise
from roofcast.predictor.llm.sim.policies import get_policy
from roofcast.predictor.llm.sim.workload import Lengths, Requests, closed_loop, open_loop

LINK = KvLink(50e9, 5e-6, "test link")
KV_BYTES = 131072.0  # per token per device: llama-3.1-8b's fp16 KV


def _run(table, req, d, policy="vllm-v1"):
    return run_disagg(req, get_policy(policy), 40_000, table, d, LINK, KV_BYTES)


@pytest.mark.parametrize(("split", "rate", "policy"), list(itertools.product(
    ((1, 1), (1, 3), (2, 2)), (5.0, 40.0), ("vllm-v1", "sglang", "tensorrt-llm-1"))))
def test_every_request_finishes_and_littles_law_holds(table, split, rate, policy):
    req = open_loop(600, rate, Lengths("lognormal", 512, 0.5), Lengths("lognormal", 96, 0.6),
                    seed=1)
    tr, transfer = _run(table, req, Disagg(*split), policy)
    assert np.isfinite(tr.first_s).all()
    assert np.isfinite(tr.finish_s).all()
    assert (tr.first_s >= tr.arrival_s).all()
    assert (tr.finish_s >= tr.first_s + np.where(req.output_tokens > 1, transfer, 0)).all()
    assert abs(summarise(tr).little_error) < 0.02


def test_transfer_is_kv_bytes_over_the_link_plus_latency(table):
    req = Requests(np.array([0.0, 0.0]), np.array([1000, 4000]), np.array([8, 8]))
    _, transfer = _run(table, req, Disagg(1, 1))
    assert transfer == pytest.approx(req.input_tokens * KV_BYTES / 50e9 + 5e-6)


def test_ttft_includes_the_prefill_queue(table):
    burst = Requests(np.zeros(64), np.full(64, 4096), np.full(64, 16))
    one, _ = _run(table, burst, Disagg(1, 1))
    two, _ = _run(table, burst, Disagg(2, 1))
    assert np.max(one.first_s) > 5 * np.min(one.first_s)  # the last waited for the others
    assert np.max(two.first_s) < np.max(one.first_s)  # a second prefill replica halves it


def test_more_decode_replicas_lower_tpot_under_load(table):
    req = open_loop(800, 60.0, Lengths("fixed", 256), Lengths("fixed", 256), seed=2)
    tpot = [summarise(_run(table, req, Disagg(2, d))[0]).latency["tpot_s"]["p50"]
            for d in (1, 4)]
    assert tpot[1] < tpot[0]


def test_closed_loop_and_static_policy_refused(table):
    req = closed_loop(40, 8, Lengths("fixed", 128), Lengths("fixed", 16))
    with pytest.raises(PredictionError, match="open loops"):
        _run(table, req, Disagg(1, 1))
    req = open_loop(10, 1.0, Lengths("fixed", 128), Lengths("fixed", 16))
    with pytest.raises(PredictionError, match="continuous"):
        _run(table, req, Disagg(1, 1), "static")


@pytest.mark.parametrize("text", ["1", "0:2", "a:b", "1:2:3", "-1:2", ""])
def test_bad_disagg_refused(text):
    with pytest.raises(PredictionError):
        parse_disagg(text)


def test_link_is_nvlink_within_a_node_and_nics_across():
    hgx = system_from_device("h100-sxm", 8)
    inside = kv_link(hgx, 2, Disagg(1, 3))
    assert inside.bytes_per_s == pytest.approx(hgx.fabric.link_GBps * 1e9)
    multi = system_from_device("h100-sxm", 16)
    across = kv_link(multi, 4, Disagg(1, 3))
    nic = multi.nic
    assert across.bytes_per_s == pytest.approx(
        nic.count_per_node * nic.GBps / multi.devices_per_node * 1e9)
    assert across.bytes_per_s < inside.bytes_per_s
