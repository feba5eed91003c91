"""Parallel cells: one step of a plan over several devices (``predictor.parallel.engine``).

A ``parallel`` task: one model (a graph, or an LLM config whose layer kinds come from
``decoder_of``) x one runtime x hardware entries x global batches, precisions, modes, plans
and tokens. Per cell, as ``roofcast.parallel_api.predict_parallel`` does it: the plan's
degrees checked against the model first (``check_model_degrees``, ``sharding``'s rules), the
system resolved (a missing ``dp`` fills a ``system:`` entry), ``check_plan``, the source's
``build`` at the micro-batch, the kernels timed, ``engine.assemble``. Sources and builds are
cached and a task's builds timed on all its devices together; errors land on their own
cells only. Sizing fits: docs/design/decoder.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from roofcast.graph_import.dims import model_dim_names
from roofcast.hw_catalog.catalog import get_device
from roofcast.models import load_model
from roofcast.predictor.parallel.engine import (
    PARALLEL_ESTIMATOR,
    StackedWorkloads,
    TimedWorkload,
    assemble,
    stack_workloads,
    time_stacked,
    time_stacked_devices,
)
from roofcast.predictor.parallel.llm_source import TRAINING_RUNTIME, LLMParallelSource
from roofcast.predictor.parallel.plan import check_model_degrees, check_plan, complete_plan
from roofcast.predictor.parallel.types import (
    ParallelPlan,
    ParallelPlanError,
    ParallelPrediction,
    ParallelSource,
    ShardedWorkload,
)
from roofcast.predictor.runtimes.catalog import resolve_runtime
from roofcast.predictor.sweeps.cells import columns, concat, error_rows, key_columns, message
from roofcast.predictor.sweeps.families import register_family
from roofcast.predictor.sweeps.loaders import llm_cache, model_source, system_cache
from roofcast.predictor.sweeps.plans import parse_plan
from roofcast.predictor.sweeps.types import DEFAULT_RUNTIME, SYSTEM_PREFIX, CellKey, SweepTask

#: sources kept per process (an LLM source holds its builds: a few MB each)
SOURCE_CACHE_SIZE = 32
#: the parts of a step, in ``dominant_bound``'s tie order
STEP_PARTS: tuple[tuple[str, str], ...] = (("compute", "compute_s"), ("comm", "exposed_comm_s"),
                                           ("bubble", "bubble_s"), ("optimizer", "optimizer_s"))


# ----------------------------------------------------------------------------- caches
@lru_cache(maxsize=SOURCE_CACHE_SIZE)
def _graph_dims(model: str, root: str, dims: tuple[tuple[str, int], ...]
                ) -> tuple[tuple[str, int], ...]:
    """The spec's dims the graph model names (``batch`` aside: the plan sets it)."""
    names = model_dim_names(load_model(model_source(model, root)).graph)
    return tuple((k, v) for k, v in dims if k in names and k != "batch")


@lru_cache(maxsize=SOURCE_CACHE_SIZE)
def source_cache(model: str, root: str, llm: bool, mode: str, precision: str, runtime: str,
                 seq_tokens: int, dims: tuple[tuple[str, int], ...]) -> ParallelSource:
    """The model's ``ParallelSource`` (per-process cache; ``mode`` is "" for an LLM: its source
    builds both modes). ``runtime``: the profile's name (already resolved)."""
    if llm:
        return LLMParallelSource(llm_cache(model, root), seq_tokens=seq_tokens, precision=precision,
                                 runtime=runtime)
    from roofcast.predictor.model_source import parallel_source

    return parallel_source(str(model_source(model, root)), mode=mode, precision=precision,
                           runtime=runtime, dims=dict(_graph_dims(model, root, dims)) or None)


# ----------------------------------------------------------------------------- cells
@dataclass(frozen=True)
class _Ready:
    """A checked cell waiting for its build to be timed: the build and how to assemble it."""

    cell: CellKey
    source: ParallelSource
    work: ShardedWorkload
    system: Any
    plan: ParallelPlan
    notes: tuple[str, ...]
    hardware_name: str


def _runtime(task: SweepTask, hardware: str) -> str:
    """The profile a cell on ``hardware`` models: the task's runtime, or the default (LLMs:
    Megatron-LM, ``TRAINING_RUNTIME``; graphs: the device kind's), refused where it does not
    run on the device's kind / vendor."""
    hw = get_device(system_cache(hardware, None).device if hardware.startswith(SYSTEM_PREFIX)
                    else hardware)
    name = task.runtime if task.runtime != DEFAULT_RUNTIME else (
        TRAINING_RUNTIME if task.llm else None)
    return resolve_runtime(name, hw.kind, hw.vendor).name


def _source(task: SweepTask, cell: CellKey, runtime: str,
            memo: dict[tuple, ParallelSource | Exception]) -> ParallelSource:
    """The cell's source (``source_cache``) with its facts, held in the task's ``memo`` (so a
    task needing more sources than the LRU keeps does not rebuild them per hardware entry); a
    source that failed (a model that does not import, tokens past the context, a precision the
    runtime refuses) fails the other cells that need it without being tried again."""
    llm = task.llm
    key = (task.model, task.model_root, llm, "" if llm else cell.mode, cell.precision, runtime,
           cell.tokens[0] if llm else 0, () if llm else task.dims)
    if key not in memo:
        try:
            source = source_cache(*key)
            source.facts  # noqa: B018 (a graph source imports the model here)
            memo[key] = source
        except Exception as exc:
            memo[key] = exc
    got = memo[key]
    if isinstance(got, Exception):
        raise got
    return got


def _prepare(task: SweepTask, cell: CellKey, runtime: str,
             memo: dict[tuple, ParallelSource | Exception]) -> _Ready:
    """Steps 1-3 of the module docstring up to the build; raises for a cell that cannot run."""
    given = parse_plan(cell.plan)
    source = _source(task, cell, runtime, memo)
    facts = source.facts
    check_model_degrees(facts, **{k: int(given[k]) for k in ("tp", "pp", "ep") if k in given})
    if cell.hardware.startswith(SYSTEM_PREFIX):
        system = system_cache(cell.hardware, None)
        plan = complete_plan(system.n_devices, **given)
        name = cell.hardware.removeprefix(SYSTEM_PREFIX)
    else:
        plan = complete_plan(int(given.get("dp", 1)) * int(given.get("tp", 1))
                             * int(given.get("pp", 1)), **given)
        system = system_cache(cell.hardware, plan.n_devices)
        # the contract: "" for one device, else the ad-hoc system's name
        name = f"{plan.n_devices} x {cell.hardware}" if plan.n_devices > 1 else ""
    notes = check_plan(plan, facts, n_devices=system.n_devices, global_batch=cell.batch,
                       mode=cell.mode, devices_per_node=system.devices_per_node)
    work = source.build(tp=plan.tp, ep=plan.ep,
                        micro_batch=cell.batch // (plan.dp * plan.micro_batches),
                        sequence_parallel=plan.sequence_parallel, mode=cell.mode)
    if plan.pp > max(work.layers, 1):
        raise ParallelPlanError(f"pp={plan.pp} exceeds the {work.layers} layer slots "
                                f"{facts.name} was built with; use pp <= {max(work.layers, 1)}")
    return _Ready(cell, source, work, system, plan, notes, name)


def _time(works: Sequence[ShardedWorkload], hw: Any, estimator: Any,
          stacks: dict[tuple[int, ...], StackedWorkloads]) -> dict[int, TimedWorkload | str]:
    """id(work) -> its timed workload (or the error text): all together (``stacks``: the
    device-independent half, shared by the devices that time the same builds), each alone if
    that raises."""
    key = tuple(id(w) for w in works)
    try:
        if key not in stacks:
            stacks[key] = stack_workloads(works)
        timed = time_stacked(stacks[key], hw, estimator)
        return {id(w): t for w, t in zip(works, timed, strict=True)}
    except Exception as exc:
        if len(works) == 1:
            return {id(works[0]): message(exc)}
    out: dict[int, TimedWorkload | str] = {}
    for w in works:
        out.update(_time([w], hw, estimator, stacks))
    return out


def _time_task(by_device: dict[str, list[_Ready]], hws: dict[str, Any], estimator: Any
               ) -> dict[str, dict[int, TimedWorkload | str]]:
    """device -> id(work) -> its timed workload (or the error text). The task's distinct builds
    are stacked once and timed on all its devices together (``engine.time_stacked_devices``: one
    ``evaluate`` per precision and mode); if that raises, each device times its own builds
    (``_time``)."""
    devices = list(by_device)
    if devices:
        works = list({id(r.work): r.work for d in devices for r in by_device[d]}.values())
        try:
            per_device = time_stacked_devices(stack_workloads(works), [hws[d] for d in devices],
                                              estimator)
            return {d: {id(w): t for w, t in zip(works, timed, strict=True)}
                    for d, timed in zip(devices, per_device, strict=True)}
        except Exception:  # each device alone below, so the failure lands where it belongs
            pass
    stacks: dict[tuple[int, ...], StackedWorkloads] = {}
    return {d: _time(list({id(r.work): r.work for r in by_device[d]}.values()), hws[d],
                     estimator, stacks) for d in devices}


def _row(ready: _Ready, pred: ParallelPrediction, hw: Any, llm: bool) -> dict[str, Any]:
    """The metric columns of one predicted cell (module docstring)."""
    n = ready.plan.n_devices
    price = np.nan if hw.price_usd is None else float(hw.price_usd) * n
    tdp = np.nan if hw.tdp_W is None else float(hw.tdp_W) * n
    rate = pred.samples_per_s
    parts = [(getattr(pred, attr), name) for name, attr in STEP_PARTS]
    return {
        "device": ready.system.device, "system": ready.hardware_name, "n_devices": n,
        "runtime": pred.runtime, "time_s": pred.step_s, "lower_s": pred.lower_s,
        "upper_s": pred.upper_s, "throughput_samples_per_s": rate,
        "tokens_per_s": pred.tokens_per_s if llm and pred.tokens_per_s is not None else np.nan,
        "memory_bytes": pred.memory.total_bytes, "mem_capacity_bytes": pred.memory.capacity_bytes,
        "fits": pred.memory.fits, "price_usd": price, "tdp_W": tdp,
        "usd_per_throughput": price / rate, "throughput_per_W": rate / tdp,
        "dominant_bound": max(parts, key=lambda p: p[0])[1], "error": "",
    }


@register_family("parallel")
def run_parallel(task: SweepTask) -> pd.DataFrame:
    """Predict every cell of a parallel ``task`` (module docstring); never raises for a bad
    cell."""
    estimator = task.estimator or PARALLEL_ESTIMATOR
    errors: dict[str, list[CellKey]] = defaultdict(list)
    runtimes = _runtimes(task, errors)
    by_device = _ready_by_device(task, runtimes, errors)
    hws = _hardware(by_device, errors)
    timed_on = _time_task(by_device, hws, estimator)
    rows = _assembled(task, by_device, hws, timed_on, errors)
    return _frames(task, errors, rows, estimator)


def _runtimes(task: SweepTask, errors: dict[str, list[CellKey]]) -> dict[str, str]:
    """hardware entry -> its runtime (``_runtime``); "" where that fails, its cells going to
    ``errors`` (an unknown device / system or runtime)."""
    runtimes: dict[str, str] = {}
    for hardware in task.devices:
        try:
            runtimes[hardware] = _runtime(task, hardware)
        except Exception as exc:  # an unknown device / system or runtime: its cells only
            runtimes[hardware] = ""
            errors[message(exc)] += [c for c in task.cells() if c.hardware == hardware]
    return runtimes


def _ready_by_device(task: SweepTask, runtimes: dict[str, str],
                     errors: dict[str, list[CellKey]]) -> dict[str, list[_Ready]]:
    """device -> the cells built on it (``_prepare``); a cell that cannot run goes to
    ``errors``."""
    by_device: dict[str, list[_Ready]] = defaultdict(list)
    memo: dict[tuple, ParallelSource | Exception] = {}
    for cell in task.cells():
        if not runtimes[cell.hardware]:
            continue
        try:
            ready = _prepare(task, cell, runtimes[cell.hardware], memo)
        except Exception as exc:
            errors[message(exc)].append(cell)
            continue
        by_device[ready.system.device].append(ready)
    return by_device


def _hardware(by_device: dict[str, list[_Ready]], errors: dict[str, list[CellKey]]
              ) -> dict[str, Any]:
    """device -> its spec; a device the catalog lacks leaves ``by_device``, its cells going
    to ``errors``."""
    hws: dict[str, Any] = {}
    for device in list(by_device):
        try:
            hws[device] = get_device(device)
        except Exception as exc:  # a system file naming a device the catalog lacks
            errors[message(exc)] += [r.cell for r in by_device.pop(device)]
    return hws


def _assembled(task: SweepTask, by_device: dict[str, list[_Ready]], hws: dict[str, Any],
               timed_on: dict[str, dict[int, TimedWorkload | str]],
               errors: dict[str, list[CellKey]]) -> list[tuple[CellKey, dict[str, Any]]]:
    """(cell, metric columns) of each timed cell (``engine.assemble``); a cell whose timing
    or assembly fails goes to ``errors``."""
    rows: list[tuple[CellKey, dict[str, Any]]] = []
    for device, cells in by_device.items():
        hw, timed = hws[device], timed_on[device]
        for r in cells:
            t = timed[id(r.work)]
            if isinstance(t, str):
                errors[t].append(r.cell)
                continue
            try:
                pred = assemble(t, r.source.facts, r.system, r.plan, global_batch=r.cell.batch,
                                mode=r.cell.mode, notes=r.notes)
                rows.append((r.cell, _row(r, pred, hw, task.llm)))
            except Exception as exc:
                errors[message(exc)].append(r.cell)
    return rows


def _frames(task: SweepTask, errors: dict[str, list[CellKey]],
            rows: list[tuple[CellKey, dict[str, Any]]], estimator: Any) -> pd.DataFrame:
    """The error rows (per message, in the order met) then the predicted rows."""
    frames = [error_rows(task, cells, text) for text, cells in errors.items()]
    if rows:
        keys = [c for c, _ in rows]
        metrics = pd.DataFrame([m for _, m in rows])
        frames.append(columns(pd.DataFrame({**key_columns(task, keys), "estimator": estimator,
                                            **{c: metrics[c].to_numpy() for c in metrics}})))
    return concat(frames)
