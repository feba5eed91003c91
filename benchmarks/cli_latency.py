"""CLI latency: wall time of whole ``roofcast`` command lines, each run in a fresh process.

Run: ``python benchmarks/cli_latency.py [--repeats 5] [--roofcast PATH] [--baseline PATH]
[--match TEXT] [--format table|csv|json]``. Each command line of ``COMMANDS`` (``--match``:
those containing TEXT) runs ``--repeats`` times as a subprocess of the console script beside
this interpreter (or ``--roofcast PATH``; with ``--baseline PATH`` that one too, the runs
interleaved) after one untimed warm-up run (file cache, ``.pyc`` files). Printed: median and
minimum wall seconds beside the target (issue 13: ``--help`` < 0.3 s, ``inspect resnet50`` <
0.6 s; issue 26: ``predict resnet50 --hw h100-sxm`` < 1.0 s on an idle machine, the default
road and each road that may become it: ``time-roofline``, ``roofline+eff``, ``auto``); ``ok``
compares the minimum. ``cpu_s``/``median_cpu_s``, the least/median CPU time (user + system) of
the command, is what to compare between runs at different loads (``load``: the 1-minute load
average at the start). A command that exits non-zero stops the benchmark with its stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    """One command line (the arguments after ``roofcast``) and its target in seconds, if any."""

    args: tuple[str, ...]
    target_s: float | None = None


COMMANDS: tuple[Case, ...] = (
    Case(("--help",), 0.3),
    Case(("predict", "--help")),
    Case(("hw", "list")),
    Case(("hw", "show", "h100-sxm")),
    Case(("inspect", "resnet50"), 0.6),
    Case(("predict", "resnet50", "--hw", "a100-40gb-pcie")),
    Case(("compare", "resnet50", "--hw", "a100-40gb-pcie,h100-sxm")),
    Case(("predict", "resnet50", "--hw", "h100-sxm"), 1.0),
    *(Case(("predict", "resnet50", "--hw", "h100-sxm", "--estimator", road), 1.0)
      for road in ("time-roofline", "roofline+eff", "auto")),
)


CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def roofcast_script() -> str:
    """The ``roofcast`` console script installed beside this interpreter, else on PATH."""
    beside = Path(sys.executable).with_name("roofcast")
    if beside.is_file():
        return str(beside)
    found = shutil.which("roofcast")
    if found is None:
        sys.exit("no roofcast console script beside this python or on PATH: pip install -e .")
    return found


def time_once(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``cmd`` (output discarded); exits on a failing
    command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=CHILD_ENV)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def measure(scripts: dict[str, str], case: Case, repeats: int) -> list[dict[str, object]]:
    """One row per script (label -> executable) for ``case``; the scripts' runs interleave, so
    a load that changes during the benchmark weighs on each alike."""
    cmds = {label: [script, *case.args] for label, script in scripts.items()}
    for cmd in cmds.values():
        time_once(cmd)  # warm-up: file cache, .pyc files
    runs: dict[str, list[tuple[float, float]]] = {label: [] for label in cmds}
    for _ in range(repeats):
        for label, cmd in cmds.items():
            runs[label].append(time_once(cmd))
    return [_row(label, case, got) for label, got in runs.items()]


def _row(label: str, case: Case, runs: list[tuple[float, float]]) -> dict[str, object]:
    times = [wall for wall, _ in runs]
    best = min(times)
    return {
        "command": "roofcast " + " ".join(case.args),
        "build": label,
        "median_s": round(statistics.median(times), 3),
        "min_s": round(best, 3),
        "cpu_s": round(min(cpu for _, cpu in runs), 3),
        "median_cpu_s": round(statistics.median(cpu for _, cpu in runs), 3),
        "target_s": case.target_s,
        "ok": None if case.target_s is None else best < case.target_s,
    }


def print_table(rows: list[dict[str, object]], repeats: int, load: float) -> None:
    print(f"roofcast CLI wall time, {repeats} runs each (seconds); load average {load:.2f} on "
          f"{os.cpu_count()} CPUs")
    head = ("command", "build", "median_s", "min_s", "cpu_s", "median_cpu_s", "target_s", "ok")
    cells = [[_cell(r[k]) for k in head] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in
                    enumerate(zip(head, widths, strict=True))))
    for c in cells:
        print("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in
                        enumerate(zip(c, widths, strict=True))))


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per command (default 5)")
    ap.add_argument("--roofcast", metavar="PATH", help="the roofcast executable to time")
    ap.add_argument("--baseline", metavar="PATH",
                    help="also time this roofcast executable (e.g. main's), runs interleaved")
    ap.add_argument("--match", metavar="TEXT", default="",
                    help="time only the command lines containing TEXT")
    ap.add_argument("--format", choices=("table", "csv", "json"), default="table")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    script = args.roofcast or roofcast_script()
    load = os.getloadavg()[0]
    cases = [c for c in COMMANDS if args.match in " ".join(c.args)]
    if not cases:
        ap.error(f"no command line contains {args.match!r}")
    scripts = {"this": script, **({"baseline": args.baseline} if args.baseline else {})}
    rows = [row for case in cases for row in measure(scripts, case, args.repeats)]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    elif args.format == "csv":
        print(",".join(rows[0]))
        for r in rows:
            print(",".join("" if v is None else f'"{v}"' if k == "command" else str(v)
                           for k, v in r.items()))
    else:
        print_table(rows, args.repeats, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
