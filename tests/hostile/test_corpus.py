"""The whole hostile corpus (``tests/hostile/corpus.py``, about 400 inputs) through the CLI, each
in a subprocess under a 2 GiB address-space limit and 30 s, exactly as
``benchmarks/hostile_inputs.py`` runs it: every input must end clean (a correct result, or exit
2 with one line and no traceback), with no user file lost and nothing written outside the
sandbox. A failure lists each case that did not end clean and how it ended."""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "hostile_inputs.py"


def _runner():
    spec = importlib.util.spec_from_file_location("hostile_inputs", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_hostile_input_ends_clean():
    bench = _runner()
    corpus = bench.cases()
    assert len(corpus) >= 300
    with ThreadPoolExecutor(max_workers=2) as pool:  # the work is in the subprocesses
        results = list(pool.map(lambda c: bench.run_case(c, 2.0, 30.0), corpus))
    bad = [f"{r.outcome} rc={r.rc} {r.surface}: {r.name[:80]} -- {r.detail[:200]}"
           for r in results if r.outcome != "clean"]
    assert bad == [], "\n".join(bad)
    assert {r.outcome for r in results} == {"clean"}
