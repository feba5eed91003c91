"""Hostile inputs to the surfaces of issue 27 through the real CLI, each in a subprocess with a
time limit: sweep specs and their output folders, and ``data export`` targets. Every case must
end clean (exit 0, or exit 2 with one line on stderr, never a traceback or an escape sequence),
with every user file intact and nothing written outside the case's sandbox (``fence/`` beside it
stays as it was)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SPEC = "[sweep]\nmodels=['resnet50']\ndevices=['t4']\n"
MARKER = "_roofcast_sweep.json"
KEEP = "keep me\n"


def _spec(sb: Path, body: str) -> None:
    (sb / "s.toml").write_text(body)


def _sweep(*extra: str) -> list[str]:
    return ["sweep", "s.toml", *extra]


def stray_marker(sb: Path) -> list[str]:
    _spec(sb, SPEC)
    (sb / "d").mkdir()
    (sb / "d" / MARKER).write_text("{}")
    (sb / "d" / "notes.txt").write_text(KEEP)
    return _sweep("--output", "d")


def marker_in_home(sb: Path) -> list[str]:
    _spec(sb, SPEC)
    (sb / MARKER).write_text('{"files": []}')
    (sb / "notes.txt").write_text(KEEP)
    return _sweep("--output", str(sb))


def marker_in_cwd(sb: Path) -> list[str]:
    _spec(sb, SPEC)
    (sb / MARKER).write_text("{}")
    return _sweep("--output", ".")


def link_as_output(sb: Path) -> list[str]:
    _spec(sb, SPEC)
    (sb / "real").mkdir()
    (sb / "real" / "notes.txt").write_text(KEEP)
    (sb / "l").symlink_to(sb / "real")
    return _sweep("--output", "l")


def notebook_in_earlier_sweep(sb: Path) -> list[str]:
    _spec(sb, SPEC)
    (sb / "out").mkdir()
    (sb / "out" / MARKER).write_text('{"files": ["part-00000.parquet"]}')
    (sb / "out" / "part-00000.parquet").write_bytes(b"old")
    (sb / "out" / "analysis.ipynb").write_text(KEEP)
    return _sweep("--output", "out")


def _named(name: str) -> Callable[[Path], list[str]]:
    def prepare(sb: Path) -> list[str]:
        _spec(sb, SPEC + f"name = {name}\n")
        return _sweep()
    return prepare


def _body(body: str) -> Callable[[Path], list[str]]:
    def prepare(sb: Path) -> list[str]:
        _spec(sb, body)
        return _sweep()
    return prepare


def _export(kind: str) -> Callable[[Path], list[str]]:
    def prepare(sb: Path) -> list[str]:
        target = sb / "t.csv"
        target.write_text(KEEP)
        if kind == "link":
            (sb / "out.csv").symlink_to(target)
        elif kind == "fifo":
            os.mkfifo(sb / "out.csv")
        elif kind == "dir":
            (sb / "out.csv").mkdir()
        return ["data", "export", "out.csv"]
    return prepare


CASES: dict[str, Callable[[Path], list[str]]] = {
    "stray marker beside notes": stray_marker,
    "marker in the home folder": marker_in_home,
    "--output . with a marker": marker_in_cwd,
    "--output a link": link_as_output,
    "notebook in an earlier sweep": notebook_in_earlier_sweep,
    "absolute name": _named('"/tmp/../' + "fence/x" + '"'),
    "climbing name": _named('"../fence/pwned"'),
    "escape sequence name": _named('"evil\\u001b]0;pwned\\u0007\\u001b[31m"'),
    "list of lists": _body(SPEC + "batches=[[1]]\n"),
    "arrays 5000 deep": _body(SPEC + "batches=" + "[" * 5000 + "]" * 5000 + "\n"),
    "dotted key 60 kB": _body(SPEC + "a" + ".a" * 30_000 + " = 1\n"),
    "llm: path outside": _body("[sweep]\nmodels=['llm:../fence/config.json']\n"
                               "devices=['t4']\n"),
    "upper-case JSON outside": _body("[sweep]\nmodels=['../fence/config.JSON']\n"
                                     "devices=['t4']\n"),
    "export through a link": _export("link"),
    "export to a FIFO": _export("fifo"),
    "export to a folder": _export("dir"),
}


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"")
            for p in sorted(folder.rglob("*")) if not p.is_fifo()}


def _run(case: str, root: Path) -> str | None:
    """None when ``case`` ends clean, else what went wrong."""
    base = root / case.replace(" ", "_").replace("/", "_")
    sb, fence = base / "sandbox", base / "fence"
    sb.mkdir(parents=True)
    fence.mkdir()
    (fence / "config.json").write_text('{"model_type": "llama"}')
    (fence / "config.JSON").write_text('{"model_type": "llama"}')
    args = CASES[case](sb)
    before_fence, before_sb = _snapshot(fence), _snapshot(sb)
    env = {**os.environ, "HOME": str(sb), "ROOFCAST_DATA_DIR": str(sb / ".data"),
           "ROOFCAST_HW_DIR": str(sb / ".hw"), "ROOFCAST_RUNTIME_DIR": str(sb / ".rt")}
    try:
        proc = subprocess.run([sys.executable, "-m", "roofcast.app.cli", *args], cwd=sb,
                              env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "hung (over 120 s)"
    err = proc.stderr.strip()
    if proc.returncode not in (0, 2) or "Traceback" in proc.stderr:
        return f"rc={proc.returncode}: {err[-300:]}"
    if proc.returncode == 2 and len(err.splitlines()) != 1:
        return f"more than one line: {err[-300:]}"
    if "\x1b" in proc.stdout + proc.stderr:
        return "an escape sequence was printed"
    if _snapshot(fence) != before_fence:
        return "wrote outside the sandbox"
    after = _snapshot(sb)
    lost = [k for k, v in before_sb.items() if after.get(k) != v and not k.startswith(".")]
    if lost:
        return f"user files changed or lost: {lost}"
    if (sb / "l").exists() and not (sb / "l").is_symlink():
        return "the output link was replaced"
    return None


def test_every_hostile_sweep_or_export_input_ends_clean(tmp_path):
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(CASES, pool.map(lambda c: _run(c, tmp_path), CASES), strict=True))
    bad = [f"{case}: {why}" for case, why in results.items() if why is not None]
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("case", ["stray marker beside notes"])
def test_the_issue_case_refuses_and_keeps_the_notes(tmp_path, case):
    assert _run(case, tmp_path) is None
    notes = next(tmp_path.rglob("notes.txt"))
    assert notes.read_text() == KEEP
