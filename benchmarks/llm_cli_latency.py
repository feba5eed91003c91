"""LLM CLI latency: wall time of the issue-15 one-command answer, in a fresh process each run.

Run: ``python benchmarks/llm_cli_latency.py [--repeats 5] [--roofcast PATH] [--profile]``.
Times ``roofcast llm llama-3.1-70b --hw h100-sxm,h200,mi300x --input-tokens 2048
--output-tokens 256 --weights fp8`` (target: under 2 s), the simulated ``--rate 5`` answer of
three devices (target 3 s) and a one-device run, each
``--repeats`` times after one untimed warm-up (``cli_latency.measure``: median, minimum and
CPU seconds; ``ok`` compares the minimum, the figure least inflated by other load, with the
target). ``--profile``: also run the three-device command once in this process under
``cProfile`` and print the 25 functions with the largest cumulative time (where the time goes:
imports, model loading, the serving model).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_latency import Case, measure, print_table, roofcast_script

ONE_COMMAND = ("llm", "llama-3.1-70b", "--hw", "h100-sxm,h200,mi300x", "--input-tokens", "2048",
               "--output-tokens", "256", "--weights", "fp8")
#: issue 28's simulated-serving answer (target 3 s).
RATE_COMMAND = ("llm", "llama-3.1-70b", "--hw", "h100-sxm,h200,b200", "--rate", "5",
                "--slo-ttft", "1000", "--slo-tpot", "50")
COMMANDS: tuple[Case, ...] = (
    Case(ONE_COMMAND, 2.0),
    Case(RATE_COMMAND, 3.0),
    Case(("llm", "llama-3.1-8b", "--hw", "h100-sxm")),
    Case(("llm", "--list")),
)


def profile(argv: tuple[str, ...], top: int = 25) -> str:
    """The ``top`` functions by cumulative time of one in-process run of ``roofcast argv``."""
    from roofcast.app.cli import main

    prof = cProfile.Profile()
    with redirect_stdout(io.StringIO()):
        prof.runcall(main, list(argv))
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per command (default 5)")
    ap.add_argument("--roofcast", metavar="PATH", help="the roofcast executable to time")
    ap.add_argument("--profile", action="store_true",
                    help="also profile the three-device command in-process")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    script = args.roofcast or roofcast_script()
    load = os.getloadavg()[0]
    rows = [row for case in COMMANDS for row in measure({"this": script}, case, args.repeats)]
    print_table(rows, args.repeats, load)
    if args.profile:
        print("\n" + profile(ONE_COMMAND))
    return 0 if rows[0]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
