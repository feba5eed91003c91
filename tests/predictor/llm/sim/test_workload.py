"""Arrivals and lengths: seeded, with the asked means and spreads; bad values refused."""

from __future__ import annotations

import numpy as np
import pytest

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.sim.workload import Lengths, closed_loop, open_loop

FIX = Lengths("fixed", 100)


def test_poisson_arrivals_have_the_rate_and_are_reproducible():
    a = open_loop(20_000, 8.0, FIX, FIX, seed=1)
    b = open_loop(20_000, 8.0, FIX, FIX, seed=1)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    gaps = np.diff(a.arrival_s)
    assert gaps.mean() == pytest.approx(1 / 8, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)
    assert not np.array_equal(a.arrival_s, open_loop(20_000, 8.0, FIX, FIX, seed=2).arrival_s)


def test_gamma_arrivals_have_the_asked_burstiness():
    gaps = np.diff(open_loop(20_000, 5.0, FIX, FIX, process="gamma", cv=3.0).arrival_s)
    assert gaps.mean() == pytest.approx(0.2, rel=0.08)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)


@pytest.mark.parametrize("dist", [Lengths("fixed", 300), Lengths("uniform", 300, 200),
                                  Lengths("lognormal", 300, 1.5)])
def test_lengths_have_the_asked_mean_and_are_whole_tokens(dist):
    x = dist.sample(40_000, np.random.default_rng(0))
    assert x.dtype.kind == "i"
    assert x.min() >= 1
    assert x.mean() == pytest.approx(300, rel=0.05)


def test_a_closed_loop_starts_its_clients_together():
    r = closed_loop(50, 8, FIX, FIX)
    assert r.clients == 8
    assert (r.arrival_s[:8] == 0).all()
    assert np.isnan(r.arrival_s[8:]).all()


@pytest.mark.parametrize(("call", "needle"), [
    (lambda: open_loop(10, 0.0, FIX, FIX), "rate must be a finite number > 0"),
    (lambda: open_loop(10, float("nan"), FIX, FIX), "rate must be a finite number > 0"),
    (lambda: open_loop(10, float("inf"), FIX, FIX), "rate must be a finite number > 0"),
    (lambda: open_loop(10, 1.0, FIX, FIX, process="weibull"), "unknown arrival process"),
    (lambda: open_loop(10, 1.0, FIX, FIX, process="gamma", cv=0), "arrival cv"),
    (lambda: open_loop(10, 1.0, Lengths("zipf", 5), FIX), "unknown length distribution"),
    (lambda: open_loop(10, 1.0, Lengths("fixed", -5), FIX), "mean length"),
    (lambda: closed_loop(10, 0, FIX, FIX), "concurrency must be >= 1"),
])
def test_bad_workloads_are_refused(call, needle):
    with pytest.raises(PredictionError, match=needle):
        call()
