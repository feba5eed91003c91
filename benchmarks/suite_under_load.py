"""The test suite several times in a row under a background CPU load (issue 27's acceptance).

Run: ``python benchmarks/suite_under_load.py [--runs 3] [--burners 2] [--timeout-s 3600]
[--python PATH] [--log-dir DIR]`` from a checkout whose ``.venv`` the README's test command
built. ``--burners`` busy-loop processes (a load of one each) run for the whole benchmark; each
run is the README's pytest (``python -m pytest -q -p no:cacheprovider``: no cache folder
written into the checkout), killed after ``--timeout-s`` (a hang shows as rc 124). Printed, a
row per run: exit code, wall seconds, the 1-minute load average at its end and pytest's last
line; each run's whole output goes to ``DIR/run<N>.log`` (default: a temporary folder, named).
Exit status: 0 when every run passed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _burn() -> None:
    """A load of one: spin until killed."""
    while True:
        pass


def one_run(python: str, log: Path, timeout_s: float) -> dict[str, object]:
    """The suite once; its exit code (124: timed out), wall seconds, load and last line."""
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen([python, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            rc = 124
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return {"rc": rc, "wall_s": round(time.perf_counter() - start),
            "load_1min": os.getloadavg()[0], "last_line": lines[-1] if lines else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--burners", type=int, default=2, help="busy-loop processes (load)")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="per run")
    parser.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("--log-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    logs = args.log_dir or Path(tempfile.mkdtemp(prefix="roofcast-suite-load-"))
    logs.mkdir(parents=True, exist_ok=True)
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.burners)]
    for b in burners:
        b.start()
    rows = []
    try:
        for n in range(1, args.runs + 1):
            row = one_run(args.python, logs / f"run{n}.log", args.timeout_s)
            rows.append(row)
            print(f"run {n}: rc {row['rc']}  {row['wall_s']} s  load {row['load_1min']:.1f}  "
                  f"{row['last_line']}", flush=True)
    finally:
        for b in burners:
            b.kill()
    print(f"{sum(r['rc'] == 0 for r in rows)} of {len(rows)} runs passed under {args.burners} "
          f"burners; logs in {logs}")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
