"""Sweep scaling: cells/s of ``run_sweep`` locally and on a Dask LocalCluster of 1 and 2 workers,
10^3 to 10^5 cells, and on paper the time of 10^7 cells on a 32-worker cluster.

Run: ``python benchmarks/sweep_scale.py [--sizes 1000,10000,100000] [--workers 1,2] [--mix]``
(``--check`` also asserts every scheduler's table equals the local one, cell for cell;
``--compare DIR DIR`` only compares two sweep output folders).

**Grids.** Size N is the smallest grid of this shape with >= N cells: zoo models (in
``zoo.list_models()`` order) x the first 50 catalog devices x 8 batches (1..128) x 4 precisions
(fp32, tf32, fp16, bf16: both runtimes run them) x runtimes (``torch-compile``, then
``pytorch-eager``, which does not run on CPU-kind devices: per-cell errors) x modes (infer,
then train); axes are filled in that order — 10^3: 1 model x 32 devices (1,024 cells); 10^4:
7 models (11,200); 10^5: 17 models x 2 runtimes x 2 modes
(108,800, the acceptance sweep ``benchmarks/data/sweeps/acceptance_100k.toml``).

**Mixed grid** (``--mix``): graph, LLM serving and parallel-plan cells in one spec
(``mix_grid``): zoo models (``zoo.list_models()`` order) and the LLM configs ``MIX_LLMS``
(``llm:gpt2``, ``llama-3.1-8b``) on catalog GPUs plus ``system:hgx-h100``, plans ``single``,
``tp2``, ``tp4``, ``tp8``, modes ``infer`` and ``serve``, precisions fp16/bf16, 512 prompt +
128 generated tokens. A graph model makes graph cells (its GPUs, ``single``) and parallel cells
(every entry, the tp plans); an LLM makes serving cells (every entry and plan, ``serve``) and
parallel cells (``infer``). The grid grows its GPUs (to ``N_DEVICES``), then its graph
models, then its batches (1, 8, then 32, 128), then adds mode ``train``, prompts of 128 and
256 tokens (gpt2 holds 1,024) and precision fp32, until it has >= N cells (10^3: 12 GPUs,
1,036 cells; 10^4: 11 graph models on 43 GPUs, 10,516; 10^5: every axis widened, 109,416).
Refused combinations (tp8 does not divide gpt2's 12 heads, dp does not divide a global
batch) are error cells, counted per family. Beside the scheduler table it prints **cells/s
per family**: the tasks of the grid run once more one after the other in this process, caches
cold (``family_rates``), each task timed; rate = the family's cells / the seconds of its
tasks.

**What is timed.** ``SweepResult.elapsed_s``: planning + running + checking, as a user waits
for it. Each run starts cold: the local run clears the process's caches first (every
family module's ``lru_cache`` caches and ``graph_memo``: ``clear_caches``); a
``dask-local:N`` run starts its own LocalCluster (``startup_s`` = the time to start and stop an
idle cluster of N workers, measured once per N, is inside that wall time), whose fresh worker
processes import the predictor and the graphs they need. ``cells/s`` = cells / wall;
``speedup`` = local wall / this wall. The machine's load average is printed: on shared cores
the multi-worker figures are bounded by the cores actually free, not by Dask.

**Extrapolation (on paper, not measured)** to N = 10^7 cells on W = 32 workers::

    T = startup_32 + N / (W x r1 x e) + N x b / B + N x k

r1 = the 1-worker rate on the largest grid with its startup taken out (cells/s per worker);
e = the measured 2-worker efficiency (speedup over 1 worker / 2, at most 1; it can only fall
with more workers, so this T is a lower bound); b = bytes per cell in pandas at the client
(measured: ``DataFrame.memory_usage(deep=True)`` / cells), B = 1.25e9 B/s (10 Gbit/s to the
client: every cell still travels to it); k = the client's per-cell time to check each task's
frame, fill its speedups and stream it into the Parquet writer with the summary and the
Pareto front (``stream.TaskLedger`` -> ``output.DatasetWriter``, timed on the largest local
result split by task, as ``roofcast sweep SPEC.toml --output DIR`` runs it);
startup_32 = the 2-worker startup (workers start in parallel).

**Client memory.** The client streams: it holds one task's frame, at most
``output.ROWS_PER_PART`` buffered cells (one Parquet part), the summary's groups and the
front's candidates — not N x b bytes. The printed bound is min(N, ROWS_PER_PART) x b.
Measured with ``benchmarks/sweep_memory.py --scheduler dask-local:1 --rows-per-part 1000``
(the client only collects; each mode in a fresh process; load average 2-3 on 2 cores), peak
of the client's ``tracemalloc`` / ``ru_maxrss``, on ``grid(N)``:

==========  ====================  ====================
cells       cells in memory       streamed
==========  ====================  ====================
1,024       24.8 MB / 198 MB      25.3 MB / 196 MB
11,200      31.9 MB / 223 MB      27.3 MB / 204 MB
20,800      39.1 MB / 248 MB      27.9 MB / 205 MB
==========  ====================  ====================

In memory the peak grows ~0.7 kB (tracemalloc) / ~2.5 kB (RSS) per cell (b = 375 B held, plus
the concatenation, sort, summary and front over the whole table); streamed it stays within
~3 MB / ~9 MB over this range (the summary's groups and the front grow with hardware x models,
not cells). Not measured: the default ``ROWS_PER_PART`` (10^5) buffer, ~10^5 x 0.7 kB; and
10^7 cells, where the in-memory path would extrapolate to ~7 GB / ~25 GB.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.sweeps import tasks as sweep_tasks
from roofcast.predictor.sweeps.output import ROWS_PER_PART, DatasetWriter
from roofcast.predictor.sweeps.schedulers import run_sweep
from roofcast.predictor.sweeps.stream import SpeedupFiller, TaskLedger
from roofcast.predictor.sweeps.types import SweepResult, SweepSpec
from roofcast.training_data import zoo

N_DEVICES = 50
#: the grids' devices: the first 50 catalog devices when the figures were recorded, as listed
#: by the acceptance spec (the catalog has grown since; the grids stay comparable)
ACCEPTANCE = Path(__file__).parent / "data" / "sweeps" / "acceptance_100k.toml"


def fixed_devices(kind: str | None = None) -> tuple[str, ...]:
    """The acceptance spec's devices (of ``kind`` if given), in its order."""
    from roofcast.predictor.sweeps.spec import read_spec

    ids = read_spec(ACCEPTANCE).devices
    return tuple(d for d in ids if kind is None or get_device(d).kind == kind)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
RUNTIMES = ("torch-compile", "pytorch-eager")
MODES = ("infer", "train")
DIMS = {"sequence": 128}
#: the extrapolation's target
TARGET_CELLS = 10**7
TARGET_WORKERS = 32
#: client link bandwidth in the extrapolation (10 Gbit/s), bytes/s
CLIENT_BPS = 1.25e9
#: the mixed grid's axes (module docstring)
MIX_LLMS = ("llm:gpt2", "llama-3.1-8b")
MIX_SYSTEMS = ("system:hgx-h100",)
MIX_PLANS = ("single", "tp2", "tp4", "tp8")
MIX_MODES = ("infer", "serve")
MIX_PRECISIONS = ("fp16", "bf16")
MIX_BATCHES = ((1, 8), (1, 8, 32, 128))
#: what the mixed grid widens last, in this order, past its batches
MIX_MODES_WIDE = ("infer", "train", "serve")
MIX_INPUT_TOKENS_WIDE = (128, 256, 512)
MIX_PRECISIONS_WIDE = ("fp16", "bf16", "fp32")


def grid(n_cells: int) -> SweepSpec:
    """The smallest grid of the module docstring's shape with >= ``n_cells`` cells."""
    models = tuple(zoo.list_models())
    devices = fixed_devices()[:N_DEVICES]
    per_device = len(BATCHES) * len(PRECISIONS)
    base = SweepSpec(models=models[:1], devices=devices[:1], batches=BATCHES,
                     precisions=PRECISIONS, runtimes=RUNTIMES[:1], dims=DIMS,
                     name=f"scale-{n_cells}")
    n_dev = min(len(devices), max(1, math.ceil(n_cells / per_device)))
    spec = replace(base, devices=devices[:n_dev])
    if spec.n_cells >= n_cells:
        return spec
    per_model = spec.n_cells
    spec = replace(spec, models=models[:min(len(models), math.ceil(n_cells / per_model))])
    for axis, values in (("runtimes", RUNTIMES), ("modes", MODES)):
        if spec.n_cells < n_cells:
            spec = replace(spec, **{axis: values})
    if spec.n_cells < n_cells:
        raise ValueError(f"the largest grid here has {spec.n_cells:,} cells; asked {n_cells:,}")
    return spec


def mix_grid(n_cells: int) -> SweepSpec:
    """The smallest mixed grid (module docstring) with >= ``n_cells`` cells."""
    graph_models = tuple(zoo.list_models())
    gpus = fixed_devices("gpu")[:N_DEVICES]
    base = SweepSpec(models=(graph_models[0], *MIX_LLMS), llms=MIX_LLMS,
                     devices=(gpus[0], *MIX_SYSTEMS), batches=MIX_BATCHES[0],
                     precisions=MIX_PRECISIONS, modes=MIX_MODES, plans=MIX_PLANS, dims=DIMS,
                     input_tokens=(512,), output_tokens=(128,), name=f"mix-{n_cells}")
    candidates = [replace(base, devices=(*gpus[:n], *MIX_SYSTEMS))
                  for n in range(1, len(gpus) + 1)]
    widest = candidates[-1]
    candidates += [replace(widest, models=(*graph_models[:k], *MIX_LLMS))
                   for k in range(2, len(graph_models) + 1)]
    for axis, values in (("batches", MIX_BATCHES[1]), ("modes", MIX_MODES_WIDE),
                         ("input_tokens", MIX_INPUT_TOKENS_WIDE),
                         ("precisions", MIX_PRECISIONS_WIDE)):
        candidates.append(replace(candidates[-1], **{axis: values}))
    for spec in candidates:
        if spec.n_cells >= n_cells:
            return spec
    raise ValueError(f"the largest mixed grid has {candidates[-1].n_cells:,} cells; "
                     f"asked {n_cells:,}")


def clear_caches() -> None:
    """Forget what this process keeps between tasks: every family module's ``lru_cache`` caches
    (graphs, LLM configs, parallel sources, systems) and ``graph_memo``."""
    import importlib

    from roofcast.predictor import graph_memo
    from roofcast.predictor.sweeps.families import FAMILY_SPECS

    for family in FAMILY_SPECS.values():
        module = importlib.import_module(family.module)
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
        if callable(getattr(module, "clear_caches", None)):
            module.clear_caches()  # what a family keeps beyond its lru_caches
    graph_memo.clear()


def family_rates(spec: SweepSpec) -> pd.DataFrame:
    """Cells/s per family: the tasks of ``spec`` run one after the other in this process,
    caches cold, each timed (module docstring). One row per family: tasks, cells, errors,
    seconds, cells/s, ms per cell."""
    clear_caches()
    rows = []
    for task in sweep_tasks.plan_tasks(spec):
        t0 = time.perf_counter()
        cells = sweep_tasks.run_task(task)
        rows.append({"family": task.family, "tasks": 1, "cells": len(cells),
                     "errors": int((cells["error"] != "").sum()),
                     "seconds": time.perf_counter() - t0})
    df = pd.DataFrame(rows).groupby("family", sort=False).sum().reset_index()
    df["cells_per_s"] = df["cells"] / df["seconds"]
    df["ms_per_cell"] = 1e3 * df["seconds"] / df["cells"]
    return df


@dataclass(frozen=True)
class Run:
    scheduler: str
    result: SweepResult
    startup_s: float


def cluster_startup_s(n_workers: int) -> float:
    """Seconds to start and stop an idle LocalCluster of ``n_workers`` (as dask-local:N)."""
    import logging

    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False):
        pass
    return time.perf_counter() - t0


def run(spec: SweepSpec, scheduler: str, startup_s: float = 0.0) -> Run:
    """One cold run of ``spec`` on ``scheduler`` (the local caches cleared first)."""
    clear_caches()
    return Run(scheduler, run_sweep(spec, scheduler), startup_s)


def same_table(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Whether two sweeps' cells are equal cell for cell (NaN = NaN, exact numbers)."""
    try:
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True),
                                      check_exact=True)
    except AssertionError:
        return False
    return True


def table(rows: list[tuple[int, Run]]) -> pd.DataFrame:
    """One row per (size, scheduler): cells, tasks, errors, wall, cells/s, speedup."""
    out = []
    local = {}
    for size, r in rows:
        if r.scheduler == "local":
            local[size] = r.result.elapsed_s
        out.append({"size": size, "scheduler": r.scheduler, "cells": len(r.result.cells),
                    "tasks": int(r.result.cells["task_id"].nunique()),
                    "errors": r.result.n_errors, "startup_s": r.startup_s,
                    "wall_s": r.result.elapsed_s, "cells_per_s": r.result.cells_per_s})
    df = pd.DataFrame(out)
    df["speedup"] = [local.get(s, float("nan")) / w for s, w in zip(df["size"], df["wall_s"],
                                                                    strict=True)]
    return df


def extrapolate(df: pd.DataFrame, bytes_per_cell: float, client_s_per_cell: float,
                n_cells: int = TARGET_CELLS, workers: int = TARGET_WORKERS) -> dict:
    """The module docstring's T for ``n_cells`` on ``workers`` from the measured table."""
    largest = df["size"].max()
    at = df[df["size"] == largest].set_index("scheduler")
    one, two = at.loc["dask-local:1"], at.loc["dask-local:2"]
    r1 = one["cells"] / (one["wall_s"] - one["startup_s"])
    efficiency = min(1.0, (one["wall_s"] / two["wall_s"]) / 2)
    compute_s = n_cells / (workers * r1 * efficiency)
    transfer_s = n_cells * bytes_per_cell / CLIENT_BPS
    client_s = n_cells * client_s_per_cell
    total = two["startup_s"] + compute_s + transfer_s + client_s
    return {"cells": n_cells, "workers": workers, "r1_cells_per_s": r1,
            "efficiency_2": efficiency, "startup_s": two["startup_s"], "compute_s": compute_s,
            "transfer_s": transfer_s, "client_s": client_s, "total_s": total,
            "cells_per_s": n_cells / total,
            "client_memory_GB": min(n_cells, ROWS_PER_PART) * bytes_per_cell / 1e9}


def client_seconds_per_cell(spec: SweepSpec, cells: pd.DataFrame) -> float:
    """The client's time per cell to check each task's frame, fill its speedups and stream it
    into a Parquet folder with the summary and the front (``stream.TaskLedger``,
    ``stream.SpeedupFiller``, ``output.DatasetWriter``: the CLI's path), timed on ``cells``
    split by task."""
    import shutil
    import tempfile
    from pathlib import Path

    tasks = {t.task_id: t for t in sweep_tasks.plan_tasks(spec)}
    frames = [(tasks[int(i)], g) for i, g in cells.groupby("task_id", sort=False)]
    folder = Path(tempfile.mkdtemp())
    try:
        t0 = time.perf_counter()
        writer = DatasetWriter(folder / "out", name=spec.name, spec=spec)
        filler = SpeedupFiller(list(tasks.values()), spec.baseline, writer.add)
        ledger = TaskLedger(list(tasks.values()), filler)
        for task, frame in frames:
            ledger.deliver(task, frame)
        ledger.finish()
        writer.close("local", 0.0)
        return (time.perf_counter() - t0) / len(cells)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def compare(a: str, b: str) -> int:
    """Print whether two sweep folders hold identical tables (0) or not (1)."""
    from roofcast.predictor.sweeps.output import read_dataset

    # parts are sorted each by cell_id, not across parts (tasks arrive in any order)
    left, right = (read_dataset(f).sort_values("cell_id", kind="stable") for f in (a, b))
    same = same_table(left, right)
    print(f"{a}: {len(left):,} cells ({int((left['error'] != '').sum()):,} errors); {b}: "
          f"{len(right):,} cells; identical: {'yes' if same else 'NO'}")
    return 0 if same else 1


def _progress(size: int, r: Run) -> None:
    """One line per finished run, at once (a long benchmark shows what it has so far)."""
    print(f"  grid {size:,}: {r.scheduler:<13} {len(r.result.cells):>9,} cells "
          f"{r.result.elapsed_s:>8.1f} s {r.result.cells_per_s:>8,.0f} cells/s "
          f"(load average {os.getloadavg()[0]:.1f})", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000",
                    help="comma-separated target cell counts (default 1000,10000,100000)")
    ap.add_argument("--workers", default="1,2",
                    help="LocalCluster sizes (default 1,2; empty: local only)")
    ap.add_argument("--mix", action="store_true",
                    help="mixed grids: graph, LLM serving and parallel-plan cells (mix_grid), "
                         "and cells/s per family")
    ap.add_argument("--check", action="store_true",
                    help="assert every scheduler's table equals the local one")
    ap.add_argument("--compare", nargs=2, metavar="DIR",
                    help="only compare two sweep output folders (e.g. the acceptance run with "
                         "--scheduler local and dask-local:2): identical tables or not")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    startups = {w: cluster_startup_s(w) for w in workers}
    rows: list[tuple[int, Run]] = []
    mismatches = []
    make_grid = mix_grid if args.mix else grid
    for size in sizes:
        spec = make_grid(size)
        local = run(spec, "local")
        rows.append((size, local))
        _progress(size, local)
        for w in workers:
            r = run(spec, f"dask-local:{w}", startups[w])
            rows.append((size, r))
            _progress(size, r)
            if args.check and not same_table(local.result.cells, r.result.cells):
                mismatches.append(f"{size}: dask-local:{w}")
    df = table(rows)
    with pd.option_context("display.float_format", "{:,.2f}".format, "display.width", 120):
        print(f"\nSweep scaling ({os.cpu_count()} cores, load average "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}):")
        print(df.to_string(index=False))
    if args.mix:
        for size in sizes:
            rates = family_rates(make_grid(size))
            with pd.option_context("display.float_format", "{:,.2f}".format):
                print(f"\nCells/s per family, grid {size:,} (one process, caches cold, load "
                      f"average {os.getloadavg()[0]:.1f}):")
                print(rates.to_string(index=False))
    if args.check:
        print("tables identical to local: " + ("yes" if not mismatches else
                                                f"NO ({'; '.join(mismatches)})"))
    if {"dask-local:1", "dask-local:2"} <= set(df["scheduler"]):
        largest = rows[-1 - len(workers)][1].result.cells
        per_cell = largest.memory_usage(deep=True).sum() / len(largest)
        ext = extrapolate(df, per_cell, client_seconds_per_cell(make_grid(sizes[-1]), largest))
        print(f"\nOn paper: {ext['cells']:,} cells on {ext['workers']} workers "
              f"(r1 = {ext['r1_cells_per_s']:,.0f} cells/s per worker, 2-worker efficiency "
              f"{ext['efficiency_2']:.2f}, {per_cell:,.0f} B per cell at the client):")
        n_tasks = int(df.loc[df["size"] == df["size"].max(), "tasks"].max())
        if n_tasks < 2:
            print(f"  (the largest grid has {n_tasks} task: 2 workers had nothing to share, so "
                  "the efficiency above is load noise, not scaling; run a larger --sizes)")
        for key in ("startup_s", "compute_s", "transfer_s", "client_s", "total_s"):
            print(f"  {key:<11} {ext[key]:>10,.1f}")
        print(f"  => {ext['cells_per_s']:,.0f} cells/s; the client streams, buffering at most "
              f"{ext['client_memory_GB']:.2f} GB of cells (one Parquet part)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
