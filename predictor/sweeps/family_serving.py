"""Serving cells: an LLM config served in static batches (``predictor.llm.serving``).

A ``serving`` task is one LLM config (a bundled name, ``llm:NAME``, or a ``.json`` path
relative to ``task.model_root``) x one runtime (``default``: each device kind's default engine;
else the engine's name) x a slice of the hardware entries x every batch, precision, plan and
``(input_tokens, output_tokens)``; mode ``serve`` only.

**Per cell** (the numbers are ``predict_serving``'s for the same config):

* ``ServingConfig(input_tokens=N, output_tokens=M, batch=B, weights=PRECISION,
  activations=ACT, runtime=ENGINE or None, tp, pp, ep)``. **Precision rule**: the precision is
  the weights' dtype; the activations (and so the KV cache) are ``bf16`` / ``fp32`` for those
  precisions and ``fp16`` for every other one (fp16, fp8, int8, int4: weight-only
  quantisation over ``ServingConfig``'s default fp16 activations). A dtype the engine does not
  run (``check_request``) fails its cells only.
* The plan (``plans.parse_plan``): ``single`` = one device; ``tpT ppP epE dpD``: one replica
  over T x P devices (E expert groups inside the tensor group), D replicas. Micro-batches,
  ZeRO, sp and rc are training/step parts: a plan naming them fails its serving cells.
* The hardware: a device entry runs D x T x P devices of it (D missing = 1): the system
  ``resolve_system(hw=DEVICE, devices=D x T x P)``, named ``N x DEVICE`` in the ``system``
  column ("" for one device). A ``system:ID`` entry: ``get_system(ID)``, its device in the
  ``device`` column, a missing D = as many replicas as fill it (``complete_plan``; a plan
  naming other than the system's device count fails naming both numbers).

**Columns** (``types.CELL_COLUMNS``), from the ``ServingPrediction`` p of one replica:
time_s = p.e2e_latency_s (the static batch's end-to-end latency), lower_s / upper_s its
interval (``p.lower`` / ``p.upper``); throughput_samples_per_s = D x B / e2e (requests/s);
tokens_per_s = D x p.output_tokens_per_s; ttft_s, tpot_s; memory_bytes = the fullest
device's total (``p.memory.total_bytes``), mem_capacity_bytes its capacity; fits =
``p.memory.fits and p.max_batch > 0`` (a batch past ``max_batch`` runs in waves: predicted,
``fits`` False); price_usd / tdp_W = the device's x n_devices (NaN where the catalog has
none); usd_per_throughput = price_usd / throughput; throughput_per_W = throughput / tdp_W;
dominant_bound = ``decode`` when the W waves' decode ``W x (M - 1) x TPOT`` is at least half of
e2e, else ``prefill`` (W = ceil(B / max_batch) past max_batch, else 1); n_devices = T x P x D;
runtime = the engine modelled (the spec's text where the cell failed before one was chosen);
estimator = the task's. A model that does not fit keeps the prediction's NaN metrics with
``fits`` False (and dominant_bound "").

**Speed**: one ``predict_many(..., kernels=False)`` call per (precision, plan, tokens) and
engine times every device entry x batch together where the replica's system is the one ``predict_many``
builds itself (``system=None``: one device, or T x P devices of a device with D = 1, i.e.
``sharding.replica_system``; or T x P = 1, which has no communication); a replica inside a
larger system (a ``system:`` entry, or D > 1 on a device) is called per entry with that
system. If a call raises, its entries are split in halves, then its batches, and retried, so
an error (an engine that does not run the dtype on one device, a context too long) lands on
its own cells only. LLM configs (``llm_cache``) and systems (``system_cache``) are cached per
process; each entry's engine is resolved once a task and handed to ``predict_many`` as its
profile object (no profile file read per call); the device catalog is pinned for the task
(``hw_catalog.catalog.pinned_catalog``: the serving model looks each device up ~5 times a cell,
and every look-up otherwise stats all device files).

**Sizing** (``families.FAMILY_SPECS["serving"]``: fixed_s 9 ms per (batch x precision x plan x
tokens) combination, cell_s 1 ms per hardware cell: the medians of the 8 fits below), measured
with ``roofline+eff`` on 2 shared cores, warm caches, the least of 5 runs of ``run_serving`` on
a ``SweepTask`` of the first w = 1, 8, 24 catalog GPUs x batches (1, 8) x precisions (fp16,
int4) x tokens (512, 128) x plans, fitted to G x (F + w x c). Load 4.2-4.5: llm:gpt2 single F
9.5 ms c 1.1 ms (42 / 75 / 145 ms), single+tp2 F 8.9 / c 0.9 (84 / 123 / 250 ms);
llama-3.1-8b single F 8.3 / c 0.8, single+tp2 F 5.5 / c 1.6. Load 1.5-2.2: gpt2 single F 8.1
/ c 1.6, single+tp2 F 15.0 / c 0.9; llama-3.1-8b single F 14.6 / c 1.2, single+tp2 F 15.8 / c
0.7 (135 / 165 / 256 ms). llama-3.1-70b mostly does not fit one device (no timing): F ~0, c 1.5.
A 6,336-cell serving sweep (3 LLMs x 44 entries x 4 batches x 2 precisions x 3 plans x 2
tokens) ran at 780 cells/s locally (load 1.7). Before the catalog was pinned and the engines
passed as profiles the gpt2 single+tp2 task took ~1.3 s at w = 24 (load 4.5).
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
    entries: dict[str, _Entry] = {}
    engines: dict[tuple[str, str], ExecutionProfile | Exception] = {}
    for text in task.devices:
        try:
            entries[text] = _entry(text, runtime, engines)
        except Exception as exc:  # an unknown device / system, a wrong engine
            errors.append(error_rows(task, _keys(task, [text], modes_of(task)), message(exc)))
    frames: list[pd.DataFrame] = []
    if SERVE not in task.modes or not entries:
        return concat([*frames, _known(concat(errors), entries)])
    for plan in task.plans:
        try:
            given = serving_plan(plan)
            sh = Sharding(given.get("tp", 1), given.get("pp", 1), given.get("ep", 1))
            check_sharding(arch, sh)
        except Exception as exc:  # a degree the model cannot take: the plan's cells
            errors.append(error_rows(task, _keys(task, list(entries), plans=(plan,)),
                                     message(exc)))
            continue
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
        groups = [*shared.values(), *alone]
        if not groups:
            continue
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
    return concat([*frames, _known(concat(errors), entries)])


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
