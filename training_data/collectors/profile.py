"""Parse an ONNX Runtime profiler JSON (Chrome trace format) into per-run kernel times.

The file holds ``Session`` events (``model_run`` once per ``session.run``: ``ts`` start and
``dur`` in microseconds) and ``Node`` events per executed kernel, named
``<optimised node name>_kernel_time`` (plus ``_fence_before`` / ``_fence_after`` markers, which
are not kernel time), with ``args.op_name`` (the kernel's op type) and ``args.provider``.

A kernel event belongs to the run whose ``model_run`` window contains its start. Kernels of
nested subgraphs (Loop/If/Scan bodies) have names that are not top-level nodes; their time is
already inside their parent's event, and callers decide what to do with them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

KERNEL_SUFFIX = "_kernel_time"
US_TO_S = 1e-6


@dataclass(frozen=True)
class KernelEvent:
    """One kernel execution: optimised node name, ORT op type, provider, duration (s)."""

    node: str
    op_name: str
    provider: str
    dur_s: float


@dataclass(frozen=True)
class ProfiledRun:
    """One ``session.run``: its ORT-internal duration (s) and its kernel events."""

    run_s: float
    kernels: tuple[KernelEvent, ...]


def parse_profile(path: str | Path) -> list[ProfiledRun]:
    """Runs in time order, each with the kernel events inside its ``model_run`` window."""
    events = json.loads(Path(path).read_text())
    if isinstance(events, dict):  # some versions wrap the list
        events = events.get("traceEvents", [])
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])
    windows = [(float(r["ts"]), float(r["ts"]) + float(r["dur"])) for r in runs]
    per_run: list[list[KernelEvent]] = [[] for _ in runs]
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith(KERNEL_SUFFIX):
            continue
        ts = float(e["ts"])
        idx = _window_index(windows, ts)
        if idx is None:
            continue
        args = e.get("args", {})
        per_run[idx].append(KernelEvent(
            node=e["name"][: -len(KERNEL_SUFFIX)], op_name=str(args.get("op_name", "")),
            provider=str(args.get("provider", "")), dur_s=float(e.get("dur", 0)) * US_TO_S))
    return [ProfiledRun(float(r["dur"]) * US_TO_S, tuple(k))
            for r, k in zip(runs, per_run, strict=True)]


def _window_index(windows: list[tuple[float, float]], ts: float) -> int | None:
    lo, hi = 0, len(windows) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        start, end = windows[mid]
        if ts < start:
            hi = mid - 1
        elif ts > end:
            lo = mid + 1
        else:
            return mid
    return None
