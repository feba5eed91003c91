"""A fast slice of the independent hostile corpus (``benchmarks/hostile_corpus.py``): a few
inputs of each surface, each forked from a warm interpreter under 4 GiB and 60 s in its own
sandbox, must end clean (exit 0 or 2, no traceback, one error line, no hang, the canary tree
outside the given paths unchanged). The whole corpus (> 600 inputs) is the benchmark's."""

from __future__ import annotations

import pytest

from tests.scripts import load_benchmark

PER_SURFACE = 2


@pytest.fixture(scope="module")
def corpus():
    return load_benchmark("hostile_corpus")


def _slice(corpus) -> list:
    """``PER_SURFACE`` cases of each surface, spread over its list (fixed: the same each run)."""
    picked = []
    for surface in corpus.SURFACES:
        cases = corpus.cases((surface,))
        step = max(len(cases) // PER_SURFACE, 1)
        picked += cases[::step][:PER_SURFACE]
    return picked


def test_corpus_has_600_inputs_over_every_surface(corpus):
    cases = corpus.cases()
    assert len(cases) >= 600
    assert {c.surface for c in cases} == set(corpus.SURFACES)


@pytest.mark.timeout(300)
def test_a_slice_of_every_surface_ends_clean(corpus):
    picked = _slice(corpus)
    results = corpus.run_all(picked, jobs=2)
    assert len(results) == len(picked) == PER_SURFACE * len(corpus.SURFACES)
    bad = [f"{r.case.surface}: {r.case.name!a} rc={r.rc} {r.problems} {r.last!a}"
           for r in results if r.problems]
    assert bad == [], "\n".join(bad)


def test_the_judge_sees_what_is_not_clean(corpus):
    case = corpus.Case("x", "x")
    same = {"fence": {"a": "1"}}
    warned = "roofcast x: warning: skipped: syntax error: y\nroofcast x: error: bad\n"
    assert corpus.judge(case, 2, False, warned, same, same) == []
    assert corpus.judge(case, 1, False, "", same, same) == ["exit 1"]
    assert "traceback" in corpus.judge(case, 2, False, "Traceback (most recent", same, same)
    assert corpus.judge(case, 2, False, "roofcast x: error: a\n b\n", same, same) == [
        "2 error lines"]
    assert corpus.judge(case, 0, True, "", same, same) == ["hang (> 60 s)"]
    assert corpus.judge(case, 0, False, "", same, {"fence": {}}) == ["changed outside: fence"]
