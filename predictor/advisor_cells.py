"""The advisor's predicted cells and step times (used by ``advisor`` and ``advisor_reasons``).

A *cell* is one (batch, precision, mode, fusion, threads) point: its per-op frame, the
sequential sum ``W`` and the critical path ``L`` of the step DAG. ``predict_cells`` builds the
workload and the step DAG once per (batch, precision, mode, fusion); only ``featurize`` +
``explain`` run per thread count (``simulate.evaluate``). ``step_time`` turns a cell into the
time of one step of a setting (see ``predictor.advisor``'s docstring for the formulas).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from roofcast.graph_import.types import Graph
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import run_config
from roofcast.predictor.features import thread_factors
from roofcast.predictor.kernel_rows import cell_sums, evaluate, step_rows
from roofcast.predictor.memory.graph import memory_footprint
from roofcast.predictor.runtimes import ExecutionProfile, resolve_runtime
from roofcast.predictor.simulate import critical_path_times, step_dag
from roofcast.predictor.workload import kernel_plan

#: a recommendation must be predicted at least this much better than the default (gain).
MIN_GAIN = 1.02
#: per-op columns kept for reasons and roofline trajectories.
PER_OP_COLUMNS: tuple[str, ...] = (
    "key", "node", "fused_nodes", "op_type", "family", "phase", "engine", "flops",
    "bytes_read", "bytes_written", "weight_bytes", "intensity_flop_per_byte", "time_s",
    "compute_s", "memory_s", "overhead_s", "bound", "lower_s", "upper_s", "peak_flops_per_s",
    "peak_engine", "peak_dtype", "mem_bw_Bps", "launch_overhead_s",
)

@dataclass(frozen=True)
class Cell:
    """Predicted per-op frame of one (batch, precision, mode, fusion, threads) point, with its
    sequential sum ``sequential_s`` and critical path ``critical_path_s``."""

    batch: int
    precision: str
    mode: str
    fusion: bool | None
    threads: int | None
    per_op: pd.DataFrame
    sequential_s: float
    critical_path_s: float
    memory_bytes: float
    critical_path: tuple[str, ...] = ()


def predict_cells(graphs: Mapping[int, Graph], hw, precisions: Sequence[str],
                  modes: Sequence[str], fusions: Sequence[bool | None],
                  threads: Sequence[int | None], estimator: Any,
                  profile: ExecutionProfile | None = None) -> dict[tuple, Cell]:
    """Every (batch, precision, mode, fusion, threads) cell of ``graphs`` (batch -> the model
    imported at that batch) on ``hw``: the workload and the step DAG are built once per
    (batch, precision, mode, fusion); only featurize + explain run per thread count.
    ``estimator``: an estimator object (or name); ``profile``: the execution profile (None: the
    device kind's default)."""
    profile = resolve_runtime(profile, get_device(hw).kind)
    cells: dict[tuple, Cell] = {}
    for batch, graph in graphs.items():
        for precision in precisions:
            for mode in modes:
                for fusion in fusions:
                    base = run_config(graph, precision=precision, mode=mode, fusion=fusion)
                    plan = kernel_plan(graph, base, profile)
                    work = step_rows(graph, base, profile, plan=plan)
                    dag = step_dag(graph, work)
                    mem = memory_footprint(graph, base, plan).total_bytes
                    for t in threads:
                        per_op = evaluate(work, hw, replace(base, threads=t), estimator,
                                          profile)
                        times = per_op["time_s"].to_numpy(float)
                        sequential_s = cell_sums(per_op, [len(per_op)])["time_s"][0]
                        lengths, path = critical_path_times(dag, times)
                        cols = [c for c in PER_OP_COLUMNS if c in per_op.columns]
                        names = tuple(f"{dag.nodes[i][1]}" for i in path
                                      if dag.nodes[i][0] == "F")
                        cells[(batch, precision, mode, fusion, t)] = Cell(
                            batch, precision, mode, fusion, t, per_op[cols].copy(),
                            float(sequential_s), float(lengths[0]), float(mem), names)
    return cells


def run_overhead_s(hw) -> float:
    """Fixed cost of one ``session.run`` (input/output binding, executor set-up) in seconds:
    the local calibration's ``dispatch.session_run_us_all_threads`` (a one-node graph's run);
    0 for devices without that measurement (the catalog has no such figure)."""
    try:
        return float(hw.calibration["dispatch"]["session_run_us_all_threads"]) * 1e-6
    except (KeyError, TypeError, ValueError):
        return 0.0


def step_time(cell: Cell, inter_op: bool, concurrency: int, hw) -> float:
    """Step time of a cell: ``run_overhead_s`` plus the sequential sum ``W``, or with inter-op
    parallelism on a CPU ``max(L, W_c)`` (``packed_time``) and the critical path ``L``
    elsewhere (module docstring)."""
    if not inter_op:
        graph_s = cell.sequential_s
    elif hw.kind == "cpu":
        graph_s = max(cell.critical_path_s, packed_time(cell, concurrency, hw))
    else:
        graph_s = cell.critical_path_s
    return run_overhead_s(hw) + graph_s


def packed_time(cell: Cell, concurrency: int, hw) -> float:
    """``W_c``: the ops packed on ``c`` concurrent workers of ``t`` threads each, sharing the
    machine: ``sum_i max(compute_i / c, memory_i * bw(t) / bw(c*t), overhead_i / c)``.

    Compute and dispatch run on each worker's own cores (c at a time); DRAM bandwidth is one
    shared pool that grows only up to its saturation (``features.thread_factors``), so
    memory-bound ops gain nothing from running side by side once ``t`` threads saturate it.
    """
    t = int(cell.threads or hw.units)
    _, bw_t, _ = thread_factors(hw, t)
    _, bw_all, _ = thread_factors(hw, t * concurrency)
    op = cell.per_op
    terms = np.maximum.reduce([op["compute_s"].to_numpy(float) / concurrency,
                               op["memory_s"].to_numpy(float) * bw_t / bw_all,
                               op["overhead_s"].to_numpy(float) / concurrency])
    return float(terms.sum())


