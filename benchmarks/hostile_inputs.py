"""Hostile-inputs benchmark: every case of ``tests/hostile/corpus.py`` through the CLI, each in a
subprocess under a memory and a time limit, classified by how it ended.

Usage::

    .venv/bin/python benchmarks/hostile_inputs.py            # the whole corpus (~400 cases)
    .venv/bin/python benchmarks/hostile_inputs.py --quick    # ~60 cases
    .venv/bin/python benchmarks/hostile_inputs.py --list     # the cases, nothing run

Each case runs ``python -m roofcast.app.cli ARGS`` in a new session with
``RLIMIT_AS = --mem-gib`` (2 GiB) and a ``--timeout`` (30 s) wall-clock limit, in a temp sandbox:
``HOME``, ``TMPDIR``, ``ROOFCAST_DATA_DIR`` and ``ROOFCAST_HW_DIR`` all point inside it and the
current folder is an empty folder of it. Outcomes (first that applies):

``hang``       still running at the time limit (the process group is killed)
``memory``     killed by a signal, or ``MemoryError`` / ``bad_alloc`` / "Cannot allocate memory"
``traceback``  "Traceback" on stderr
``data_lost``  a user file put in the data or device folder beforehand changed or vanished
``outside``    a file appeared outside the sandbox: in a sentinel folder beside it, the current
               folder, the repository root, or ``/dev/null-*`` (SQLite's journal of a store
               given as ``/dev/null``)
``silent_wrong`` exit 0 with JSON output holding a time (``*_ms``/``*_s``) that is NaN/inf,
               negative or absurd (> 1e9 ms)
``other_exit`` an exit code other than 0 and 2 (e.g. 1: an unexpected error, logged)
``clean``      exit 0 (sane output) or exit 2 with no traceback (the CLI's one-line refusal)

The table is surface x outcome; then the five inputs with the highest peak memory (max RSS of
the child, from ``os.wait4``) and the five slowest, and every non-clean case with the last line
of its stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile.corpus import KEEP_FILE, Case, Sandbox, cases, quick  # noqa: E402

OUTCOMES = ("clean", "traceback", "hang", "memory", "silent_wrong", "data_lost", "outside",
            "other_exit")
WATCHED = (Path("/dev/null-journal"), Path("/dev/null-wal"), Path("/dev/null-shm"))
KEEP_DEVICE = 'id = "keep-me"\nbase = "h100-sxm"\nmem_bw_scale = 2\n'
_MEMORY = ("MemoryError", "bad_alloc", "Cannot allocate memory", "std::length_error")


@dataclass(frozen=True)
class Result:
    surface: str
    name: str
    outcome: str
    rc: int | None
    seconds: float
    peak_mib: float
    detail: str


def _limits(mem_bytes: int):
    def apply() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Relative path -> content of every regular file below ``folder`` (None for other kinds)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")) if folder.exists() else ():
        rel = str(path.relative_to(folder))
        out[rel] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return out


def _times(doc, path: str = "") -> list[tuple[str, float]]:
    """Every number under a key ending in ``_ms`` or ``_s`` in a JSON document."""
    if isinstance(doc, dict):
        out = []
        for key, value in doc.items():
            if isinstance(value, (int, float)) and str(key).endswith(("_ms", "_s")):
                out.append((f"{path}{key}", float(value)))
            else:
                out += _times(value, f"{path}{key}.")
        return out
    if isinstance(doc, list):
        return [t for item in doc for t in _times(item, path)]
    return []


def _silent_wrong(stdout: str) -> str:
    """For JSON output: a time that is NaN/inf, negative, or over 1e9 ms (11 days)."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        return ""  # tables show NaN for a missing catalog figure; the corpus asks JSON of predict
    for key, value in _times(doc):
        limit = 1e9 if key.endswith("_ms") else 1e6
        if not math.isfinite(value) or value < 0 or value > limit:
            return f"{key} = {value}"
    return ""


def run_case(case: Case, mem_gib: float, timeout_s: float) -> Result:
    root = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        return _run_in(root, case, mem_gib, timeout_s)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run_in(root: Path, case: Case, mem_gib: float, timeout_s: float) -> Result:
    sb, home, cwd, tmp, fence = _sandbox(root)
    try:
        argv, extra_env = case.prepare(sb)
    except Exception as exc:  # the corpus itself failed: say so, never count it as clean
        return Result(case.surface, case.name, "other_exit", None, 0.0, 0.0,
                      f"corpus error: {type(exc).__name__}: {exc}")
    keep = {"data": _snapshot(sb.data), "hw": _snapshot(sb.hw)}
    fence_before, repo_before = _snapshot(fence), set(os.listdir(REPO))
    watched_before = {p for p in WATCHED if p.exists()}
    env = _case_env(sb, home, tmp, extra_env)
    out_path, err_path = root / "stdout", root / "stderr"
    rc, usage, hung, seconds = _run_cli(argv, cwd, env, (out_path, err_path), mem_gib, timeout_s)
    peak_mib = usage.ru_maxrss / 1024  # kB on Linux
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    last = stderr.strip().splitlines()[-1][:200] if stderr.strip() else ""
    made = [p for p in WATCHED if p.exists() and p not in watched_before]
    for p in made:  # made by this case: take it away again
        p.unlink(missing_ok=True)
    new_outside = [str(p) for p in made]
    new_outside += [str(REPO / n) for n in set(os.listdir(REPO)) - repo_before]
    new_outside += [str(cwd / n) for n in os.listdir(cwd)]
    lost = [f"{where}/{rel}" for where, folder in (("data", sb.data), ("hw", sb.hw))
            for rel, content in keep[where].items()
            if rel in (KEEP_FILE, "keep-me.toml") and _snapshot(folder).get(rel) != content]
    if hung:
        outcome, detail = "hang", f"killed after {timeout_s:.0f} s"
    else:
        fenced = ["fence changed"] if _snapshot(fence) != fence_before else []
        outcome, detail = _outcome(rc, stdout, stderr, last, lost, new_outside or fenced)
    return Result(case.surface, case.name, outcome, rc, seconds, peak_mib, detail)


def _sandbox(root: Path) -> tuple[Sandbox, Path, Path, Path, Path]:
    """(sandbox, home, cwd, tmp, fence) folders under ``root``, with the user's files to keep."""
    sb = Sandbox(inputs=root / "in", data=root / "data", hw=root / "hw", model=root / "model")
    home, cwd, tmp, fence = root / "home", root / "cwd", root / "tmp", root / "fence"
    for folder in (sb.inputs, sb.data, sb.hw, home, cwd, tmp, fence):
        folder.mkdir()
    (sb.data / KEEP_FILE).write_text("the user's notes\n")
    (sb.hw / KEEP_FILE).write_text("the user's notes\n")
    (sb.hw / "keep-me.toml").write_text(KEEP_DEVICE)
    (fence / "sentinel.txt").write_text("nothing may touch this\n")
    return sb, home, cwd, tmp, fence


def _case_env(sb: Sandbox, home: Path, tmp: Path, extra_env: dict[str, str]) -> dict[str, str]:
    """The environment of a case: no ROOFCAST_* of ours, every folder inside the sandbox."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROOFCAST_")}
    if "ROOFCAST_SHARED_DATA" in os.environ:
        env["ROOFCAST_SHARED_DATA"] = os.environ["ROOFCAST_SHARED_DATA"]
    env.update(HOME=str(home), TMPDIR=str(tmp), ROOFCAST_DATA_DIR=str(sb.data),
               ROOFCAST_HW_DIR=str(sb.hw), XDG_DATA_HOME=str(home / "share"),
               XDG_CONFIG_HOME=str(home / "config"), **extra_env)
    return env


def _run_cli(argv: list[str], cwd: Path, env: dict[str, str], out_err: tuple[Path, Path],
             mem_gib: float, timeout_s: float) -> tuple[int, resource.struct_rusage, bool, float]:
    """(exit code, rusage, hung, seconds) of the CLI run under a memory limit and a timeout."""
    out_path, err_path = out_err
    start = time.perf_counter()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "roofcast.app.cli", *argv], cwd=cwd,
                                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                preexec_fn=_limits(int(mem_gib * 2**30)))
        status, usage, hung = None, None, False
        while status is None:
            pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, usage = st, ru
            elif time.perf_counter() - start > timeout_s:
                hung = True
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
            else:
                time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage, hung, time.perf_counter() - start


def _outcome(rc: int, stdout: str, stderr: str, last: str, lost: list[str],
             new_outside: list[str]) -> tuple[str, str]:
    """(outcome, detail) of a finished run, worst first."""
    if rc < 0 or any(m in stderr for m in _MEMORY):
        return "memory", f"signal {-rc}" if rc < 0 else last
    if "Traceback" in stderr:
        return "traceback", last
    if lost:
        return "data_lost", "changed or gone: " + ", ".join(lost)
    if new_outside:
        return "outside", "new: " + ", ".join(new_outside)
    if rc == 0:
        wrong = _silent_wrong(stdout)
        return ("silent_wrong", wrong) if wrong else ("clean", "exit 0")
    if rc == 2:
        return "clean", last
    return "other_exit", last


def _table(results: list[Result]) -> str:
    surfaces = sorted({r.surface for r in results})
    width = max(len(s) for s in [*surfaces, "surface"])
    head = f"{'surface':<{width}}  " + "  ".join(f"{o:>12}" for o in OUTCOMES) + "  total"
    lines = [head, "-" * len(head)]
    for s in [*surfaces, "all"]:
        rows = [r for r in results if s in ("all", r.surface)]
        counts = [sum(r.outcome == o for r in rows) for o in OUTCOMES]
        lines.append(
            f"{s:<{width}}  " + "  ".join(f"{c:>12}" for c in counts) + f"  {len(rows):>5}"
        )
    return "\n".join(lines)


def _worst(results: list[Result], key: str, n: int = 5) -> str:
    top = sorted(results, key=lambda r: getattr(r, key), reverse=True)[:n]
    return "\n".join(f"  {r.peak_mib:8.0f} MiB  {r.seconds:6.1f} s  {r.outcome:<12} "
                     f"{r.surface}: {r.name[:90]}" for r in top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="about 60 cases instead of all")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--jobs", type=int, default=2, help="parallel cases (default 2)")
    ap.add_argument("--mem-gib", type=float, default=2.0, help="address-space limit per case")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    ap.add_argument("--match", default="", help="only cases whose surface/name contains this")
    ap.add_argument("--json", type=Path, help="also write every result to this JSON file")
    args = ap.parse_args(argv)
    corpus = cases()
    corpus = quick(corpus) if args.quick else corpus
    corpus = [c for c in corpus if args.match in f"{c.surface}/{c.name}"]
    if args.list:
        for c in corpus:
            print(f"{c.surface}: {c.name}")
        print(f"{len(corpus)} cases")
        return 0
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # the work is in the subprocesses
        futures = [pool.submit(run_case, c, args.mem_gib, args.timeout) for c in corpus]
        results = []
        for i, fut in enumerate(futures, 1):
            results.append(fut.result())
            if i % 25 == 0:
                print(f"  {i}/{len(futures)} cases, {time.perf_counter() - start:.0f} s",
                      file=sys.stderr, flush=True)
    print(f"{len(results)} hostile inputs through the CLI, limits {args.mem_gib:g} GiB "
          f"address space and {args.timeout:g} s each, {args.jobs} at a time "
          f"({time.perf_counter() - start:.0f} s in all)\n")
    print(_table(results))
    print("\nhighest peak memory (max RSS):")
    print(_worst(results, "peak_mib"))
    print("slowest:")
    print(_worst(results, "seconds"))
    bad = [r for r in results if r.outcome != "clean"]
    if bad:
        print(f"\nnot clean ({len(bad)}):")
        for r in bad:
            print(f"  {r.outcome:<12} rc={r.rc} {r.surface}: {r.name[:80]} -- {r.detail[:160]}")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
