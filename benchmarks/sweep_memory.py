"""The client's peak memory for one sweep, cells held in memory vs streamed to Parquet.

Run: ``python benchmarks/sweep_memory.py [--size 10000] [--scheduler local] [--mix]
[--rows-per-part N]``.

Each mode runs in a fresh child process (``python benchmarks/sweep_memory.py --child MODE``),
on ``sweep_scale.grid(size)`` (``--mix``: ``sweep_scale.mix_grid``), writing a Parquet folder
and computing the summary and the Pareto front, as ``roofcast sweep SPEC.toml`` does:

* ``memory``: ``run_sweep`` keeps every cell (``SweepResult.cells``), then ``write_dataset``,
  ``summary`` and ``pareto_front`` over the whole table (what the CLI did before streaming);
* ``stream``: ``run_sweep(..., sink=output.DatasetWriter(...))`` (what the CLI does now).

Two figures per mode: ``tracemalloc``'s peak over the run (the Python and numpy allocations,
pandas' blocks included; not pyarrow's own buffers) and the child's ``ru_maxrss`` (the whole
process: with ``--scheduler local`` it also predicts, so it carries the predictor's caches and
imports and the task's transient arrays in both modes; ``dask-local:1`` leaves the client only
the client's work, plus the in-process Dask scheduler). ``held_MB`` = the in-memory table's
``memory_usage(deep=True)``, what the memory mode must hold at least once. The machine's load
average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path


def child(mode: str, size: int, scheduler: str, mix: bool,
          rows_per_part: int | None = None) -> dict:
    """Run one sweep in this process in ``mode`` and return its memory figures."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import sweep_scale

    from roofcast.predictor.sweeps import output
    from roofcast.predictor.sweeps.output import (
        DatasetWriter,
        pareto_front,
        summary,
        write_dataset,
    )
    from roofcast.predictor.sweeps.schedulers import run_sweep

    if rows_per_part is not None:
        output.ROWS_PER_PART = rows_per_part
    spec = (sweep_scale.mix_grid if mix else sweep_scale.grid)(size)
    folder = Path(tempfile.mkdtemp()) / "out"
    tracemalloc.start()
    t0 = time.perf_counter()
    held = float("nan")
    if mode == "memory":
        result = run_sweep(spec, scheduler)
        write_dataset(result, folder, name=spec.name, spec=spec)
        table, front = summary(result.cells), pareto_front(result.cells)
        held = result.cells.memory_usage(deep=True).sum() / 1e6
    else:
        result = run_sweep(spec, scheduler, sink=DatasetWriter(folder, name=spec.name, spec=spec))
        table, front = result.summary, result.front
    wall = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    shutil.rmtree(folder.parent, ignore_errors=True)
    return {"mode": mode, "cells": result.n_cells, "summary_rows": len(table),
            "front_rows": len(front), "wall_s": wall, "tracemalloc_peak_MB": peak / 1e6,
            "maxrss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
            "held_MB": held, "rows_per_part": output.ROWS_PER_PART, "scheduler": scheduler}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--scheduler", default="local")
    ap.add_argument("--mix", action="store_true")
    ap.add_argument("--rows-per-part", type=int,
                    help="output.ROWS_PER_PART for both modes (default: the module's); the "
                         "streamed client buffers up to this many cells, so set it below the "
                         "grid's size to see the bound on a small grid")
    ap.add_argument("--child", choices=("memory", "stream"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.size, args.scheduler, args.mix,
                               args.rows_per_part)))
        return 0
    rows = []
    for mode in ("memory", "stream"):
        cmd = [sys.executable, __file__, "--child", mode, "--size", str(args.size),
               "--scheduler", args.scheduler, *(["--mix"] if args.mix else []),
               *([f"--rows-per-part={args.rows_per_part}"] if args.rows_per_part else [])]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}, "
          f"{os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
