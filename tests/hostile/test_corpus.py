"""Half the hostile corpus (``tests/hostile/corpus.py``, about 400 inputs) through the CLI, each
in its own process under a 2 GiB address-space limit and 30 s, classified exactly as
``benchmarks/hostile_inputs.py`` does: every input must end clean (a correct result, or exit 2
with one line and no traceback), with no user file lost and nothing written outside the sandbox.
A failure lists each case that did not end clean and how it ended. The processes are forked
from warm interpreters (``helpers.ForkServer``: the start-up imports paid once, not per
case); a sample of cases also runs as a real ``python -m`` subprocess and must end the same way."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.hostile.helpers import fork_pool
from tests.scripts import load_benchmark

MEM_GIB, TIMEOUT_S = 2.0, 30.0


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("hostile_inputs")


def _forked(bench, corpus, jobs: int = 2):
    """Every case's Result, each run in a child forked from one of ``jobs`` warm servers."""
    with fork_pool(jobs) as servers, ThreadPoolExecutor(max_workers=jobs) as pool:
        launch_in_subprocess = bench._run_cli
        bench._run_cli = servers.run_cli  # run_case's only way of starting the CLI
        try:
            return list(pool.map(lambda c: bench.run_case(c, MEM_GIB, TIMEOUT_S), corpus))
        finally:
            bench._run_cli = launch_in_subprocess


def _half_per_surface(corpus: list) -> list:
    """Every other case of each surface, in corpus order: the suite's share of the corpus (the
    whole of it is ``benchmarks/hostile_inputs.py``, ~4 min on 2 cores; the suite's budget is
    12 min). Deterministic, so a failure repeats."""
    seen: dict[str, int] = {}
    half = []
    for case in corpus:
        seen[case.surface] = seen.get(case.surface, -1) + 1
        if seen[case.surface] % 2 == 0:
            half.append(case)
    return half


def test_every_hostile_input_ends_clean(bench):
    corpus = _half_per_surface(bench.cases())
    assert len(corpus) >= 200
    assert len({c.surface for c in corpus}) == len({c.surface for c in bench.cases()})
    results = _forked(bench, corpus)
    assert len(results) == len(corpus)
    bad = [f"{r.outcome} rc={r.rc} {r.surface}: {r.name[:80]} -- {r.detail[:200]}"
           for r in results if r.outcome != "clean"]
    assert bad == [], "\n".join(bad)
    assert {r.outcome for r in results} == {"clean"}


def test_forked_run_ends_as_a_real_subprocess(bench):
    """One case per surface, both ways: same outcome, same exit code, same last stderr line."""
    sample = list({c.surface: c for c in reversed(bench.cases())}.values())
    forked = _forked(bench, sample, jobs=1)
    real = [bench.run_case(c, MEM_GIB, TIMEOUT_S) for c in sample]
    assert len(sample) >= 6
    assert [_ending(r) for r in forked] == [_ending(r) for r in real]


def _ending(result) -> tuple[str, str, int | None, str]:
    """How a case ended, its sandbox folder's random name blanked (it differs per run)."""
    return (result.name, result.outcome, result.rc,
            re.sub(r"hostile-[A-Za-z0-9_]+", "hostile-*", result.detail))
