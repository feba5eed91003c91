"""The event loop: preemption, closed loops, static batches, full admission, prefix cache."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.sim.engine import run_continuous, run_static
from roofcast.predictor.llm.sim.metrics import summarise
from roofcast.predictor.llm.sim.policies import get_policy
from roofcast.predictor.llm.sim.workload import Lengths, closed_loop, open_loop

from .conftest import affine_table


def test_preemption_when_kv_is_short_and_every_request_still_finishes(table):
    req = closed_loop(400, 64, Lengths("fixed", 256), Lengths("fixed", 512))
    # 64 x 768 tokens would need 3,072 blocks; give a third of it
    tr = run_continuous(req, get_policy("vllm-v1"), 1024, table)
    assert tr.preemptions > 0
    assert np.isfinite(tr.finish_s).all()
    assert np.isfinite(tr.first_s).all()
    assert (tr.finish_s >= tr.first_s).all()
    assert (tr.first_s > tr.arrival_s).all()
    assert tr.series["kv_used"].max() <= 1.0
    roomy = run_continuous(req, get_policy("vllm-v1"), 10_000, table)
    assert roomy.preemptions == 0
    assert summarise(tr).requests_per_s < summarise(roomy).requests_per_s


def test_closed_loop_keeps_its_clients_in_flight(table):
    for c in (1, 7, 100):
        req = closed_loop(max(40, 8 * c), c, Lengths("uniform", 300, 200),
                          Lengths("lognormal", 100, 0.5), seed=c)
        m = summarise(run_continuous(req, get_policy("vllm-v1"), 50_000, table))
        assert m.in_flight == pytest.approx(c, rel=1e-9)


def test_concurrency_above_the_running_cap_queues_instead_of_failing(table):
    policy = get_policy("vllm-v1").with_limits(max_seqs=16)
    req = closed_loop(400, 64, Lengths("fixed", 128), Lengths("fixed", 64))
    tr = run_continuous(req, policy, 50_000, table)
    m = summarise(tr)
    assert m.in_flight == pytest.approx(64, rel=1e-9)
    assert tr.series["running"].max() == 16
    assert tr.series["queued"].max() >= 48
    assert np.isfinite(list(m.latency["ttft_s"].values())).all()
    # queueing is in TTFT: ~3 rounds of 64 tokens wait before a slot frees
    assert m.latency["ttft_s"]["p50"] > 60 * table(16, 160, 0)


def test_full_admission_never_preempts_and_admits_fewer(table):
    req = closed_loop(300, 64, Lengths("fixed", 256), Lengths("fixed", 512))
    full = run_continuous(req, replace(get_policy("vllm-v1"), admission="full"), 1024, table)
    assert full.preemptions == 0
    assert full.series["running"].max() <= 1024 * 16 // 768


def test_static_batches_finish_together_and_prefill_together(table):
    policy = get_policy("static").with_limits(max_seqs=8)
    req = closed_loop(32, 8, Lengths("fixed", 100), Lengths("fixed", 50))
    tr = run_static(req, policy, 10_000, table)
    assert len(np.unique(np.round(tr.first_s, 12))) == 4  # 4 batches of 8
    assert len(np.unique(np.round(tr.finish_s, 12))) == 4
    one = table(0, 0, 800) + 49 * table(8, 125, 0)
    assert tr.finish_s.max() == pytest.approx(4 * one, rel=1e-3)


def test_a_shared_prefix_shortens_first_tokens_where_the_policy_caches_it(table):
    req = open_loop(300, 2.0, Lengths("fixed", 4000), Lengths("fixed", 32), seed=3)
    on = summarise(run_continuous(req, get_policy("sglang"), 50_000, table, 3000))
    off = summarise(run_continuous(req, get_policy("vllm-v0"), 50_000, table, 3000))
    assert on.latency["ttft_s"]["p50"] < 0.5 * off.latency["ttft_s"]["p50"]


def test_a_request_longer_than_the_kv_pool_is_refused(table):
    req = open_loop(10, 1.0, Lengths("fixed", 4000), Lengths("fixed", 200))
    with pytest.raises(PredictionError, match="does not fit the KV pool"):
        run_continuous(req, get_policy("vllm-v1"), 100, table)


def test_chunked_prefill_splits_long_prompts_and_unchunked_waits():
    table = affine_table()
    req = open_loop(20, 0.5, Lengths("fixed", 20_000), Lengths("fixed", 4), seed=1)
    chunked = run_continuous(req, get_policy("vllm-v1"), 100_000, table)
    whole = run_continuous(req, get_policy("tensorrt-llm-1"), 100_000, table)
    assert chunked.steps > whole.steps  # 20k prompts take 3 chunks of 8,192
    assert np.isfinite(whole.finish_s).all()
