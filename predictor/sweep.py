"""What-if sweeps: devices x batches x precisions x modes in one vectorised call.

``sweep(graph_source, devices, batches, precisions, modes, estimator)``: devices are grouped by
the runtime profile of their kind; the model is imported once per batch and its kernel rows
built once per (batch, precision, mode, profile) (kept per process: ``graph_memo``); for each
(precision, mode) the rows of all batches are stacked, featurized on all devices and timed by
one ``explain`` call, and ``kernel_rows.cell_sums`` sums each (cell, device). One row per cell
(``SWEEP_COLUMNS``): ``time_s`` (critical path with ``inter_op``, else the sum; seconds),
``speedup`` = baseline time / time in the same (batch, precision, mode), throughput = batch /
time_s (samples/s), memory and ``fits``, throughput per USD and per W (NaN where the catalog
has no price or TDP), ``lower_s``/``upper_s``, the time per bound label and the dominant bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import run_config
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import as_estimator
from roofcast.predictor.graph_memo import memo
from roofcast.predictor.kernel_rows import BOUNDS, NOTE_SEP, cell_sums, explain_rows, step_rows
from roofcast.predictor.memory.graph import GraphSource, memory_footprint
from roofcast.predictor.runtimes import ExecutionProfile, resolve_runtime
from roofcast.predictor.runtimes.rules import build_plan
from roofcast.predictor.simulate import critical_path_times, step_dag
from roofcast.predictor.workload import check_precision, forward_kernels

SWEEP_COLUMNS: tuple[str, ...] = (
    "model", "device", "runtime", "batch", "precision", "mode", "time_s", "total_s",
    "critical_path_s",
    "speedup", "baseline", "throughput_samples_per_s", "memory_bytes", "mem_capacity_bytes",
    "fits", "price_usd", "tdp_W", "throughput_per_usd", "throughput_per_W", "dominant_bound",
    "compute_s", "memory_s", "overhead_s", "kernels", "peak_notes", "lower_s", "upper_s",
    *(f"{b}_bound_s" for b in BOUNDS),
)


def _resolve_devices(devices: Sequence) -> list:
    specs = [get_device(d) for d in devices]
    if not specs:
        raise PredictionError("no devices to sweep; give at least one device id")
    ids = [s.id for s in specs]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise PredictionError(f"devices listed twice: {', '.join(dup)}; list each device once")
    return specs


def sweep(graph_source: GraphSource, devices: Sequence, batches: Sequence[int],
          precisions: Sequence[str] = ("fp32",), modes: Sequence[str] = ("infer",),
          estimator: Any = GRAPH_ESTIMATOR, *, baseline=None,
          fusion: bool | None = None, inter_op: bool = False, optimizer: str = "adam",
          threads: int | None = None, allow_incomplete: bool = False,
          runtime: str | ExecutionProfile | None = None) -> pd.DataFrame:
    """Predict every (device, batch, precision, mode) cell (see module docstring).

    ``graph_source(batch)``: the model imported at that batch (its other dims bound by the
    import, e.g. ``roofcast.load_model(path, sequence=128).at``); ``devices``: ids / inline
    what-if specs / HardwareSpec objects; ``estimator``: a name or an estimator object;
    ``baseline``: the device id speedups are relative to (default: the first device);
    ``runtime``: the execution profile (None: each device kind's default); ``fusion``: the
    runtime's fusion patterns on/off (None: its default).
    """
    specs = _resolve_devices(devices)
    if not batches:
        raise PredictionError("no batch sizes to sweep; give at least one batch size")
    base_id = specs[0].id if baseline is None else _baseline_id(baseline, specs)
    est = as_estimator(estimator)
    by_profile: dict[str, tuple[ExecutionProfile, list]] = {}
    by_kind: dict[str, ExecutionProfile] = {}  # one profile lookup per device kind
    for hw in specs:
        if hw.kind not in by_kind:
            by_kind[hw.kind] = resolve_runtime(runtime, hw.kind)
        prof = by_kind[hw.kind]
        by_profile.setdefault(prof.name, (prof, []))[1].append(hw)
    graphs = {b: graph_source(b) for b in dict.fromkeys(batches)}
    frames = []
    for precision in precisions:
        for mode in modes:
            configs = {b: run_config(g, precision=precision, mode=mode, threads=threads,
                                     inter_op=inter_op, fusion=fusion, optimizer=optimizer,
                                     runtime=runtime)
                       for b, g in graphs.items()}
            for prof, group in by_profile.values():
                frames.append(_profile_cells(graphs, configs, prof, group, est, inter_op,
                                             precision, mode, allow_incomplete))
    out = pd.concat(frames, ignore_index=True)
    order = {hw.id: i for i, hw in enumerate(specs)}
    out = out.assign(_p=out["precision"].map({p: i for i, p in enumerate(precisions)}),
                     _m=out["mode"].map({m: i for i, m in enumerate(modes)}),
                     _b=out["batch"].map({b: i for i, b in enumerate(graphs)}),
                     _d=out["device"].map(order))
    out = out.sort_values(["_p", "_m", "_b", "_d"], kind="stable").drop(
        columns=["_p", "_m", "_b", "_d"]).reset_index(drop=True)
    return _finish(out, base_id)


def _profile_cells(graphs, configs, profile: ExecutionProfile, specs: list, est, inter_op: bool,
                   precision: str, mode: str, allow_incomplete: bool) -> pd.DataFrame:
    """The cells of the devices running under ``profile`` for one (precision, mode)."""
    works, plans = [], {}
    for cell, (b, graph) in enumerate(graphs.items()):
        plans[b], w = memo(graph, ("workload", configs[b], profile, allow_incomplete),
                           lambda g=graph, c=configs[b]: _workload(g, c, profile,
                                                                   allow_incomplete))
        works.append(w.assign(_cell=cell))
    stack = pd.concat(works, ignore_index=True)
    cfg0 = next(iter(configs.values()))
    feats, expl = explain_rows(stack, specs, cfg0, est, profile)
    out = _cells(stack, feats, expl, graphs, configs, plans, profile, specs, inter_op,
                 precision, mode)
    return out.assign(runtime=profile.name)


def _workload(graph, config, profile: ExecutionProfile, allow_incomplete: bool):
    """(kernel plan, workload table) of one (graph, config, profile): device-independent, so
    a sweep builds it once per process (``graph_memo``)."""
    check_precision(profile, config.precision)
    # the plan does not depend on the precision or mode: one per (graph, profile, fusion)
    plan = memo(graph, ("plan", profile, config.fusion),
                lambda: build_plan(graph, profile, config.fusion))
    # the mapped forward rows do not depend on the mode: one per config with mode "infer"
    forward = memo(graph, ("forward", replace(config, mode="infer"), profile, allow_incomplete),
                   lambda: forward_kernels(graph, config, profile, allow_incomplete, plan))
    return plan, step_rows(graph, config, profile, allow_incomplete=allow_incomplete, plan=plan,
                           forward=forward)


def _baseline_id(baseline, specs: list) -> str:
    """The id of ``baseline`` (an id among the swept devices, a catalog name, or a spec)."""
    ids = [s.id for s in specs]
    wanted = baseline if baseline in ids else get_device(baseline).id
    if wanted not in ids:
        raise PredictionError(
            f"baseline {baseline!r} is not among the swept devices ({', '.join(ids)}); "
            "add it to the device list"
        )
    return wanted


def _cells(stack, feats, expl, graphs, configs, plans, profile, specs, inter_op, precision, mode):
    n_cell, n_dev = len(graphs), len(specs)
    dev = np.repeat(np.arange(n_dev), len(stack))  # featurize is device-major
    idx = feats["_cell"].to_numpy() * n_dev + dev
    size = n_cell * n_dev
    time = expl["time_s"].to_numpy(float)
    sums = cell_sums(expl, np.bincount(stack["_cell"].to_numpy(), minlength=n_cell), n_dev)
    by_bound = np.stack([sums[f"{b}_bound_s"] for b in BOUNDS], axis=1)
    dominant = np.asarray(BOUNDS, dtype=object)[by_bound.argmax(axis=1)]
    notes = [""] * size
    has_note = feats["peak_note"].astype(str).to_numpy() != ""
    pairs = pd.DataFrame({"i": idx[has_note], "note": feats["peak_note"].to_numpy()[has_note]})
    for i, group in pairs.drop_duplicates().groupby("i"):
        notes[int(i)] = NOTE_SEP.join(sorted(group["note"]))
    crit = np.full(size, np.nan)
    if inter_op:
        n_rows = len(stack)
        for cell, graph in enumerate(graphs.values()):
            rows = np.flatnonzero(stack["_cell"].to_numpy() == cell)
            dag = step_dag(graph, stack.iloc[rows])
            # feats is device-major: device d's copy of stack row r is at d * n_rows + r
            t = time.reshape(n_dev, n_rows)[:, rows].T
            lengths, _ = critical_path_times(dag, t)
            crit[cell * n_dev + np.arange(n_dev)] = lengths
    # cell-major columns (row i = cell * n_dev + d), built whole rather than row by row
    mems = [memo(graph, ("memory", configs[b], profile),
                 lambda g=graph, c=configs[b], p=plans[b]: memory_footprint(g, c, p)).total_bytes
            for b, graph in graphs.items()]

    def per_cell(values) -> list:  # one value per cell, repeated for each device
        return [v for v in values for _ in range(n_dev)]

    def per_device(values) -> list:  # one value per device, repeated for each cell
        return list(values) * n_cell

    return pd.DataFrame({
        "model": per_cell(g.name for g in graphs.values()),
        "device": per_device(hw.id for hw in specs), "batch": per_cell(graphs),
        "precision": [precision] * size, "mode": [mode] * size, "total_s": sums["time_s"],
        "critical_path_s": crit, "memory_bytes": per_cell(mems),
        "mem_capacity_bytes": per_device(float(hw.mem_capacity_bytes) for hw in specs),
        "price_usd": per_device(np.nan if hw.price_usd is None else float(hw.price_usd)
                                for hw in specs),
        "tdp_W": per_device(np.nan if hw.tdp_W is None else float(hw.tdp_W) for hw in specs),
        "dominant_bound": dominant, "compute_s": sums["compute_s"],
        "memory_s": sums["memory_s"], "overhead_s": sums["overhead_s"],
        "kernels": sums["kernels"], "peak_notes": notes,
        "lower_s": sums["lower_s"], "upper_s": sums["upper_s"],
        **{f"{bound}_bound_s": sums[f"{bound}_bound_s"] for bound in BOUNDS},
    })


def _finish(out: pd.DataFrame, base_id: str) -> pd.DataFrame:
    out["time_s"] = out["critical_path_s"].where(out["critical_path_s"].notna(), out["total_s"])
    out["fits"] = out["memory_bytes"] <= out["mem_capacity_bytes"]
    out["throughput_samples_per_s"] = out["batch"] / out["time_s"]
    out["throughput_per_usd"] = out["throughput_samples_per_s"] / out["price_usd"]
    out["throughput_per_W"] = out["throughput_samples_per_s"] / out["tdp_W"]
    keys = ["batch", "precision", "mode"]
    base = out.loc[out["device"] == base_id, [*keys, "time_s"]].rename(
        columns={"time_s": "_base_s"})
    out = out.merge(base, on=keys, how="left")
    out["speedup"] = out["_base_s"] / out["time_s"]
    out["baseline"] = base_id
    return out[list(SWEEP_COLUMNS)]
