"""Serving cells: an LLM config served in static batches (``predictor.llm.serving``).

A ``serving`` task: one LLM config x one runtime x hardware entries x batches, precisions,
plans and ``(input_tokens, output_tokens)``; mode ``serve``. Per cell a ``ServingConfig``
whose weights are the precision (activations ``bf16`` / ``fp32`` for those, else ``fp16``);
a plan ``tpT ppP epE dpD`` is one replica over ``T x P`` devices (``sharding.check_sharding``),
``D`` replicas on a device entry's system or filling a ``system:`` entry. Columns from one
replica's prediction: time_s = e2e latency, throughput = ``D x B / e2e``, tokens_per_s =
``D x`` output tokens/s, memory of the fullest device, dominant_bound ``decode`` / ``prefill``.
One ``predict_many`` call per (precision, plan, tokens) and engine; a failing call is split
until the error lands on its own cells. Sizing fits: docs/design/decoder.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import product
from typing import Any

import numpy as np
import pandas as pd

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.catalog import get_device, pinned_catalog
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.phases import engine_profile
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.serving import predict_many
from roofcast.predictor.llm.types import ServingConfig, ServingPrediction
from roofcast.predictor.parallel.plan import complete_plan
from roofcast.predictor.runtimes import ExecutionProfile
from roofcast.predictor.sharding import Sharding, check_sharding
from roofcast.predictor.sweeps.cells import columns, concat, error_rows, key_columns, message
from roofcast.predictor.sweeps.families import FAMILY_SPECS, register_family
from roofcast.predictor.sweeps.loaders import llm_cache, system_cache
from roofcast.predictor.sweeps.plans import parse_plan
from roofcast.predictor.sweeps.stream import hardware_of
from roofcast.predictor.sweeps.types import DEFAULT_RUNTIME, SYSTEM_PREFIX, CellKey, SweepTask

#: LLM configs kept per process (an ``LLMArch`` is a few hundred bytes)
ARCH_CACHE_SIZE = 64
#: systems kept per process ((hardware text, devices) -> SystemSpec)
SYSTEM_CACHE_SIZE = 1024
SERVE = "serve"
#: the plan parts (``ParallelPlan`` fields) a serving replica takes
SERVING_FIELDS: tuple[str, ...] = ("dp", "tp", "pp", "ep")
#: precision -> activation dtype where it is not fp16 (module docstring's precision rule)
ACTIVATIONS: dict[str, str] = {"bf16": "bf16", "fp32": "fp32"}
DEFAULT_ACTIVATIONS = "fp16"


class ServingCellError(PredictionError):
    """A serving cell cannot be set up (a plan part serving does not take)."""


def activations_of(precision: str) -> str:
    """The activation (and KV-cache) dtype served with ``precision`` weights."""
    return ACTIVATIONS.get(precision, DEFAULT_ACTIVATIONS)


def serving_plan(text: str) -> dict[str, int]:
    """The dp/tp/pp/ep a plan text gives ({} for ``single``); ``ServingCellError`` for a part
    serving does not take."""
    given = parse_plan(text)
    if any(k not in SERVING_FIELDS for k in given):
        parts = [p for p in text.replace(",", " ").split() if not p.startswith(SERVING_FIELDS)]
        raise ServingCellError(f"plan {text!r}: {' '.join(parts)!r} (micro-batches, ZeRO, sp, "
                               "rc) apply to infer/train step cells, not to serving; serving "
                               "plans take dpN, tpN, ppN, epN")
    return {k: int(v) for k, v in given.items()}


# ----------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class _Entry:
    """A hardware entry that resolved: its text, device, engine profile (``engine_profile``)
    and system (``system:`` entries)."""

    text: str
    hw: HardwareSpec
    engine: ExecutionProfile
    system: Any = None


@dataclass(frozen=True)
class _Layout:
    """An entry under a plan: replicas, devices in all, the system to hand ``predict_many``
    (None: the one it builds itself) and the ``system`` column."""

    entry: _Entry
    replicas: int
    n_devices: int
    system: Any
    label: str


def _entry(text: str, runtime: str | None,
           engines: dict[tuple[str, str], ExecutionProfile | Exception]) -> _Entry:
    """Resolve a hardware text and its engine (``engines``: the task's memo per device kind
    and vendor); an engine that does not run on the device raises."""
    system = system_cache(text, None) if text.startswith(SYSTEM_PREFIX) else None
    hw = get_device(system.device if system is not None else text)
    where = (hw.kind, hw.vendor)
    if where not in engines:
        try:
            engines[where] = engine_profile(runtime, hw)
        except Exception as exc:
            engines[where] = exc
    if isinstance(engines[where], Exception):
        raise engines[where]
    return _Entry(text, hw, engines[where], system)


def _layout(entry: _Entry, given: dict[str, int], sh: Sharding) -> _Layout:
    """Replicas, devices and system of ``entry`` under a plan (module docstring)."""
    if entry.system is not None:
        n = entry.system.n_devices
        dp = complete_plan(n, dp=given.get("dp"), tp=sh.tp, pp=sh.pp).dp
        return _Layout(entry, dp, n, None if sh.trivial else entry.system,
                       entry.text.removeprefix(SYSTEM_PREFIX))
    dp = given.get("dp", 1)
    n = dp * sh.devices
    if n == 1:
        return _Layout(entry, 1, 1, None, "")
    system = system_cache(entry.text, n)  # refuses devices that do not fill nodes
    shared = sh.trivial or dp == 1  # predict_many's own replica system is this one
    return _Layout(entry, dp, n, None if shared else system, f"{n} x {entry.text}")


# ----------------------------------------------------------------------------- run
@dataclass(frozen=True)
class _Combo:
    """One (precision, plan, tokens) of a task: its config without the batch."""

    precision: str
    plan: str
    tokens: tuple[int, int]
    cfg: ServingConfig


@register_family("serving")
def run_serving(task: SweepTask) -> pd.DataFrame:
    """Predict every cell of a serving ``task`` (module docstring); never raises for a bad
    cell. The device catalog is pinned for the task (``pinned_catalog``: the serving model
    looks devices up several times a cell)."""
    with pinned_catalog():
        return _run(task)


def _run(task: SweepTask) -> pd.DataFrame:
    cells = task.cells()
    try:
        arch = llm_cache(task.model, task.model_root)
    except Exception as exc:  # a config that does not load fails every cell
        return error_rows(task, cells, message(exc))
    runtime = None if task.runtime == DEFAULT_RUNTIME else task.runtime
    errors: list[pd.DataFrame] = []
    wrong = [c for c in cells if c.mode != SERVE]
    if wrong:
        errors.append(error_rows(task, wrong, f"ServingCellError: serving cells take mode "
                                              f"{SERVE!r}, not {wrong[0].mode!r}"))
    entries = _entries(task, runtime, errors)
    frames: list[pd.DataFrame] = []
    if SERVE in task.modes and entries:
        for plan in task.plans:
            _run_plan(task, arch, plan, runtime, entries, frames, errors)
    return concat([*frames, _known(concat(errors), entries)])


def _entries(task: SweepTask, runtime: str | None, errors: list[pd.DataFrame]
             ) -> dict[str, _Entry]:
    """hardware text -> its resolved entry (``_entry``); the cells of one that does not
    resolve go to ``errors``."""
    entries: dict[str, _Entry] = {}
    engines: dict[tuple[str, str], ExecutionProfile | Exception] = {}
    for text in task.devices:
        try:
            entries[text] = _entry(text, runtime, engines)
        except Exception as exc:  # an unknown device / system, a wrong engine
            errors.append(error_rows(task, _keys(task, [text], modes_of(task)), message(exc)))
    return entries


def _run_plan(task: SweepTask, arch: LLMArch, plan: str, runtime: str | None,
              entries: dict[str, _Entry], frames: list[pd.DataFrame],
              errors: list[pd.DataFrame]) -> None:
    """Predict the cells of one plan into ``frames``; failing cells go to ``errors``."""
    try:
        given = serving_plan(plan)
        sh = Sharding(given.get("tp", 1), given.get("pp", 1), given.get("ep", 1))
        check_sharding(arch, sh)
    except Exception as exc:  # a degree the model cannot take: the plan's cells
        errors.append(error_rows(task, _keys(task, list(entries), plans=(plan,)),
                                 message(exc)))
        return
    groups = _groups(task, plan, entries, given, sh, errors)
    if not groups:
        return
    for precision, tokens in product(task.precisions, task.tokens):
        combo = _Combo(precision, plan, tokens, ServingConfig(
            input_tokens=tokens[0], output_tokens=tokens[1], weights=precision,
            activations=activations_of(precision), runtime=runtime,
            tp=sh.tp, pp=sh.pp, ep=sh.ep))
        try:
            TensorDtypes.of(combo.cfg)  # an unknown dtype fails its cells at once
        except Exception as exc:
            errors.append(error_rows(task, _keys(task, [lay.entry.text for g in groups
                                                        for lay in g],
                                                 plans=(plan,), precisions=(precision,),
                                                 tokens=(tokens,)), message(exc)))
            continue
        for layouts in groups:
            got, failed = _predict(task, arch, combo, layouts, task.batches,
                                   estimator_of(task))
            frames += got
            errors += failed


def _groups(task: SweepTask, plan: str, entries: dict[str, _Entry], given: dict[str, int],
            sh: Sharding, errors: list[pd.DataFrame]) -> list[list[_Layout]]:
    """The entries' layouts under a plan, grouped one ``predict_many`` call each: those with
    no system of their own per engine, then each replica in a larger system alone. An entry
    the plan does not fit goes to ``errors``."""
    shared: dict[str, list[_Layout]] = {}  # system None: one call per engine
    alone: list[list[_Layout]] = []  # a replica in a larger system: one call per entry
    for text, entry in entries.items():
        try:
            lay = _layout(entry, given, sh)
        except Exception as exc:  # a plan too big for a system, devices not filling nodes
            errors.append(error_rows(task, _keys(task, [text], plans=(plan,)),
                                     message(exc)))
            continue
        if lay.system is None:
            shared.setdefault(entry.engine.name, []).append(lay)
        else:
            alone.append([lay])
    return [*shared.values(), *alone]


def _known(errors: pd.DataFrame, entries: dict[str, _Entry]) -> pd.DataFrame:
    """Error rows of entries that resolved: ``runtime`` = the engine chosen (the spec's text
    stays where the entry failed). A ``system:`` entry's device is ``key_columns``'s."""
    if errors.empty or not entries:
        return errors
    entry = hardware_of(errors).map(entries)
    ok = entry.notna()
    errors.loc[ok, "runtime"] = [e.engine.name for e in entry[ok]]
    return errors


def estimator_of(task: SweepTask) -> str:
    """The task's estimator, else the family's default."""
    return task.estimator or FAMILY_SPECS["serving"].estimator


def modes_of(task: SweepTask) -> tuple[str, ...]:
    return tuple(m for m in task.modes if m == SERVE)


def _keys(task: SweepTask, hardware: Sequence[str], modes: Sequence[str] = (SERVE,), *,
          batches: Sequence[int] | None = None, plans: Sequence[str] | None = None,
          precisions: Sequence[str] | None = None,
          tokens: Sequence[tuple[int, int]] | None = None) -> list[CellKey]:
    """The cells of ``hardware`` x the given axes (the task's where None), in task order."""
    return [CellKey(*c) for c in product(
        hardware, task.batches if batches is None else batches,
        task.precisions if precisions is None else precisions,
        [m for m in task.modes if m in modes], task.plans if plans is None else plans,
        task.tokens if tokens is None else tokens)]


def _predict(task: SweepTask, arch: LLMArch, combo: _Combo, layouts: list[_Layout],
             batches: Sequence[int], estimator: str
             ) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """One ``predict_many`` over ``layouts`` x ``batches``; if it raises, the entries are
    split in halves (then the batches) and each half retried, so the failure lands on the
    cells it belongs to. Only a failing call costs extra calls."""
    # the entries' engine as a profile object: predict_many does not read its file again
    cfg = replace(combo.cfg, runtime=layouts[0].entry.engine)
    try:
        preds = predict_many(arch, [lay.entry.hw for lay in layouts], cfg, list(batches),
                             estimator=estimator, kernels=False, system=layouts[0].system)
        return [_rows(task, combo, layouts, batches, preds, estimator)], []
    except Exception as exc:
        if len(layouts) == 1 and len(batches) == 1:
            keys = _keys(task, [layouts[0].entry.text], batches=batches, plans=(combo.plan,),
                         precisions=(combo.precision,), tokens=(combo.tokens,))
            return [], [error_rows(task, keys, message(exc))]
    if len(layouts) > 1:
        half = len(layouts) // 2
        parts = [(layouts[:half], batches), (layouts[half:], batches)]
    else:
        parts = [(layouts, [b]) for b in batches]
    frames, errors = [], []
    for lays, bs in parts:
        got, failed = _predict(task, arch, combo, lays, bs, estimator)
        frames += got
        errors += failed
    return frames, errors


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def _rows(task: SweepTask, combo: _Combo, layouts: list[_Layout], batches: Sequence[int],
          preds: Sequence[ServingPrediction], estimator: str) -> pd.DataFrame:
    """The cells of ``preds`` (device-major: layout x batch) as ``CELL_COLUMNS`` rows."""
    pairs = [(lay, b) for lay in layouts for b in batches]
    keys = [CellKey(lay.entry.text, b, combo.precision, SERVE, combo.plan, combo.tokens)
            for lay, b in pairs]
    m = combo.tokens[1]
    rep = np.array([lay.replicas for lay, _ in pairs], float)
    ndev = np.array([lay.n_devices for lay, _ in pairs], float)
    batch = np.array([b for _, b in pairs], float)
    e2e = np.array([p.e2e_latency_s for p in preds], float)
    ttft = np.array([p.ttft_s for p in preds], float)
    tpot = np.array([p.tpot_s for p in preds], float)
    mb = np.array([p.max_batch for p in preds], float)
    waves = np.where((mb > 0) & (batch > mb), np.ceil(batch / np.maximum(mb, 1)), 1.0)
    decode = waves * (m - 1) * tpot
    throughput = rep * batch / e2e
    price = np.array([_nan(lay.entry.hw.price_usd) for lay, _ in pairs]) * ndev
    tdp = np.array([_nan(lay.entry.hw.tdp_W) for lay, _ in pairs]) * ndev
    bound = np.where(np.isnan(e2e), "", np.where(2 * decode >= e2e, "decode", "prefill"))
    out = pd.DataFrame({
        **key_columns(task, keys),
        "device": [lay.entry.hw.id if lay.entry.system is not None else lay.entry.text
                   for lay, _ in pairs],
        "system": [lay.label for lay, _ in pairs],
        "n_devices": ndev.astype(int), "runtime": [p.runtime for p in preds],
        "estimator": estimator, "time_s": e2e,
        "lower_s": [p.lower.get("e2e_latency_s", math.nan) for p in preds],
        "upper_s": [p.upper.get("e2e_latency_s", math.nan) for p in preds],
        "throughput_samples_per_s": throughput,
        "tokens_per_s": rep * np.array([p.output_tokens_per_s for p in preds], float),
        "ttft_s": ttft, "tpot_s": tpot,
        "memory_bytes": [p.memory.total_bytes for p in preds],
        "mem_capacity_bytes": [p.memory.capacity_bytes for p in preds],
        "fits": [bool(p.memory.fits and p.max_batch > 0) for p in preds],
        "price_usd": price, "tdp_W": tdp,
        "usd_per_throughput": price / throughput, "throughput_per_W": throughput / tdp,
        "dominant_bound": bound, "error": "",
    })
    return columns(out)
