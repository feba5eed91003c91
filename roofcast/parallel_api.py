"""The multi-device part of roofcast's Python API (re-exported by ``roofcast.api``).

``systems()`` / ``system(ref)``: the catalog's systems; ``predict_parallel(model, system=...,
tp=..., ...)`` -> ``ParallelPrediction`` (one step of a plan); ``plan(model, system=...,
global_batch=...)`` -> ``PlanSearch`` (train / infer plans ranked by step time) or, with
``mode="serve"``, the serving plans ranked by tokens/s. Where: ``system`` or ``hw`` +
``devices``. The model: see ``predictor.model_source`` (LLM config or ONNX graph). Units:
seconds (``_s``), bytes (``_bytes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

import roofcast.api_checks as checks
from roofcast.graph_import.budgets import GLOBAL_BATCH
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.model_source import (
    DEFAULT_SEQ_TOKENS,
    LLM_PREFIX,
    LLM_TRAIN_PRECISION,
    is_source,
    model_kind,
    parallel_source,
)

if TYPE_CHECKING:
    from roofcast.hw_catalog.spec import HardwareSpec
    from roofcast.hw_catalog.system import SystemSpec
    from roofcast.predictor.parallel.types import ParallelPrediction

__all__ = ["DEFAULT_SEQ_TOKENS", "LLM_PREFIX", "LLM_TRAIN_PRECISION", "PLAN_FIELDS", "PLAN_MODES",
           "SYSTEM_COLUMNS", "is_source", "model_kind", "parallel_source", "plan",
           "predict_parallel", "system", "system_row", "systems", "target_system"]

#: ``plan`` modes: training / inference steps through ``plan_search``, LLM serving plans.
PLAN_MODES: tuple[str, ...] = ("train", "infer", "serve")
#: ``ParallelPlan`` fields a caller may give (None: completed by ``complete_plan``).
PLAN_FIELDS: tuple[str, ...] = ("dp", "tp", "pp", "ep", "micro_batches", "zero",
                                "sequence_parallel", "recompute", "tp_comm_overlap")
#: the columns of ``systems()``.
SYSTEM_COLUMNS: tuple[str, ...] = (
    "id", "name", "device", "nodes", "devices_per_node", "devices", "fabric", "link_GBps",
    "fabric_latency_us", "nic_count_per_node", "nic_GBps", "nic_latency_us",
    "nic_GBps_per_node", "measured_as", "aliases")


# ----------------------------------------------------------------------------- systems
def systems() -> pd.DataFrame:
    """The systems of the catalog (built-in, then ``$ROOFCAST_SYSTEMS_DIR``), one row each
    (``SYSTEM_COLUMNS``): device id, nodes x devices per node, the intra-node fabric (kind,
    per-device GB/s per direction, latency µs), NICs per node (count, GB/s each, latency µs;
    empty for a single box without a documented network), ``measured_as`` (the measured
    collective curves it stands for)."""
    from roofcast.hw_catalog.systems import list_systems

    return pd.DataFrame([system_row(s) for s in list_systems()], columns=list(SYSTEM_COLUMNS))


def system_row(spec: SystemSpec) -> dict[str, Any]:
    """One system as a flat record (``SYSTEM_COLUMNS``; lists joined by ", ")."""
    nic = spec.nic
    return {
        "id": spec.id, "name": spec.name, "device": spec.device, "nodes": spec.nodes,
        "devices_per_node": spec.devices_per_node, "devices": spec.n_devices,
        "fabric": spec.fabric.kind, "link_GBps": spec.fabric.link_GBps,
        "fabric_latency_us": spec.fabric.latency_us,
        "nic_count_per_node": nic.count_per_node if nic else None,
        "nic_GBps": nic.GBps if nic else None, "nic_latency_us": nic.latency_us if nic else None,
        "nic_GBps_per_node": spec.nic_GBps_per_node if nic else None,
        "measured_as": ", ".join(spec.measured_as), "aliases": ", ".join(spec.aliases),
    }


def system(ref: str | SystemSpec) -> SystemSpec:
    """A system: a catalog id, name or alias (``"hgx-h100"``), a what-if
    (``"hgx-h100:nodes=4,nic_GBps=100"``) or a ``SystemSpec`` (returned as is). Unknown ids
    raise ``HardwareSpecError`` naming close ones."""
    from roofcast.hw_catalog.systems import get_system

    if ref is None:
        raise checks.ArgumentTypeError("--system None is not a system: give one system id such "
                                       "as 'hgx-h100' or a SystemSpec")
    return get_system(checks.system_ref(ref))


def target_system(system: str | SystemSpec | None = None, *, hw: str | HardwareSpec | None = None,
                  devices: int | None = None) -> SystemSpec:
    """The system a run uses: ``system``, or ``devices`` of ``hw`` as one ad-hoc system
    (``hw_catalog.systems.resolve_system``: exactly one way must be given)."""
    from roofcast.hw_catalog.systems import resolve_system

    checks.system_ref(system)
    checks.device_ref(hw)
    checks.degrees(devices=devices)
    return checks.system_size(resolve_system(system, hw=hw, devices=devices))


# ----------------------------------------------------------------------------- one plan
def predict_parallel(model: Any, *, system: str | SystemSpec | None = None,
                     hw: str | HardwareSpec | None = None, devices: int | None = None,
                     global_batch: int | None = None, mode: str = "train",
                     estimator: Any = None, dp: int | None = None, tp: int | None = None,
                     pp: int | None = None, ep: int | None = None,
                     micro_batches: int | None = None, zero: int | None = None,
                     sequence_parallel: bool | None = None, recompute: bool | None = None,
                     tp_comm_overlap: bool | None = None,
                     **source_options: Any) -> ParallelPrediction:
    """One step of ``model`` on several devices under one plan (``engine.predict_parallel``).

    Where: ``system`` or ``hw`` + ``devices`` (``target_system``). The plan: the degrees given;
    the others from ``complete_plan`` (dp = devices / (tp x pp); ep, micro-batches 1; ZeRO 0).
    ``global_batch``: the step's samples over all replicas (None: dp x micro_batches, one
    sample per micro-batch); ``mode``: ``train`` (forward + backward + optimizer) or ``infer``.
    ``source_options``: ``parallel_source``'s (precision, optimizer, runtime, seq_tokens, dims,
    ...). A degree that does not divide the heads, layers, experts, batch or devices raises
    ``ParallelPlanError`` naming it; a plan that does not fit is predicted with
    ``memory.fits`` False and ``memory.over_bytes`` by how much."""
    from roofcast.predictor.parallel.engine import predict_parallel as _predict
    from roofcast.predictor.parallel.plan import check_model_degrees, complete_plan

    _check_step(mode, global_batch, source_options.get("seq_tokens"))
    checks.degrees(dp=dp, tp=tp, pp=pp, ep=ep)
    checks.optional_count(micro_batches, "micro-batches", GLOBAL_BATCH)
    target = target_system(system, hw=hw, devices=devices)
    given = {k: v for k, v in {"dp": dp, "tp": tp, "pp": pp, "ep": ep,
                               "micro_batches": micro_batches, "zero": zero,
                               "sequence_parallel": sequence_parallel,
                               "recompute": recompute,
                               "tp_comm_overlap": tp_comm_overlap}.items() if v is not None}
    source = parallel_source(model, mode=mode, **source_options)
    check_model_degrees(source.facts, **{k: given[k] for k in ("tp", "pp", "ep") if k in given})
    plan = complete_plan(target.n_devices, **given)
    batch = plan.dp * plan.micro_batches if global_batch is None else global_batch
    return _predict(source, target, plan, global_batch=batch, mode=mode,
                    **_estimator_kw(estimator))


# ----------------------------------------------------------------------------- search
def plan(model: Any, system: str | SystemSpec | None = None, *,
         hw: str | HardwareSpec | None = None, devices: int | None = None,
         global_batch: int | None = None, mode: str = "train", estimator: Any = None,
         zero: Sequence[int] = (0, 1), recompute: Sequence[bool] = (False, True),
         seq_tokens: int | None = None, output_tokens: int = 128,
         tp_comm_overlap: bool = True, **options: Any) -> Any:
    """Search the plans of ``model`` on a system and rank them.

    ``mode="train"`` / ``"infer"``: every (dp, tp, pp, ep, micro-batches) that divides the
    model and the ``global_batch`` (required), with each ZeRO stage of ``zero`` and
    recomputation choice of ``recompute``, timed by ``search.plan_search`` -> a ``PlanSearch``
    (``table``: one row per evaluated plan, ``ParallelPrediction.as_dict`` columns + ``rank``,
    plans that fit first by step time; ``best`` (None: nothing fits); ``rejected``: reason ->
    count; ``elapsed_s``). ``seq_tokens``: tokens per sample (LLM default 4096, capped at the
    context). ``tp_comm_overlap``: ``ParallelPlan.tp_comm_overlap`` of every plan.
    ``options``: ``parallel_source``'s (precision, optimizer, runtime, dims).

    ``mode="serve"`` (decoder LLMs): every (tp, pp) whose product divides the devices, as
    replicas of ``predictor.llm.serving_plan.serving_plan_search`` -> DataFrame ranked by
    tokens/s; ``seq_tokens`` = prompt tokens (default 512), ``output_tokens``,
    ``global_batch`` = the static batch per replica (None: as many requests as fit);
    ``options``: ``ServingConfig``'s dtypes and ``runtime``."""
    _check_step(mode, global_batch, seq_tokens)
    checks.tokens(output_tokens, "output-tokens")
    zero = checks.choices(zero, "zero", (0, 1, 2, 3))
    recompute = checks.choices(recompute, "recompute", (False, True))
    target = target_system(system, hw=hw, devices=devices)
    if mode == "serve":
        return _serving_plans(model, target, global_batch, seq_tokens, output_tokens,
                              estimator, options)
    from roofcast.predictor.parallel.search import plan_search

    if global_batch is None:
        raise PredictionError("give --global-batch: the samples of one whole step over all "
                              "replicas (e.g. 1024)")
    source = parallel_source(model, mode=mode, seq_tokens=seq_tokens, onnx_decoders=True,
                             **options)
    return plan_search(source, target, global_batch=global_batch, mode=mode,
                       zero=tuple(zero), recompute=tuple(recompute),
                       tp_comm_overlap=tp_comm_overlap, **_estimator_kw(estimator))


def _check_step(mode: Any, global_batch: Any, seq_tokens: Any) -> None:
    """The step's mode, global batch (``ROOFCAST_MAX_GLOBAL_BATCH``; serve: the batch per
    replica, ``ROOFCAST_MAX_BATCH``) and tokens per sample (``ROOFCAST_MAX_TOKENS``), each
    given value checked (no silent default for 0)."""
    checks.word(mode, "mode", PLAN_MODES)
    if mode == "serve":
        checks.batch(global_batch, "global-batch")
    else:
        checks.optional_count(global_batch, "global-batch", GLOBAL_BATCH)
    checks.tokens(seq_tokens, "seq")


def _serving_plans(model: Any, target: SystemSpec, batch: int | None, input_tokens: int | None,
                   output_tokens: int, estimator: Any, options: Mapping[str, Any]) -> pd.DataFrame:
    from roofcast.graph_import.llm.arch import LLMArch
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.predictor.llm.serving_plan import serving_plan_search
    from roofcast.predictor.llm.types import ServingConfig

    arch = model if isinstance(model, LLMArch) else load_llm(str(model).removeprefix(LLM_PREFIX))
    stored = {"weights": arch.weight_dtype} if arch.weight_dtype else {}  # config / repack's
    cfg = ServingConfig(input_tokens=input_tokens or 512, output_tokens=output_tokens,
                        batch=batch, concurrency=None if batch else "max", **{**stored, **options})
    return serving_plan_search(arch, target, cfg, **_estimator_kw(estimator))


def _estimator_kw(estimator: Any) -> dict[str, Any]:
    """``estimator=`` for the engine when the caller chose one (else the engine's default)."""
    return {} if estimator is None else {"estimator": estimator}
