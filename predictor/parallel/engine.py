"""Time one step of a parallel plan on a system: ``predict_parallel``.

``plan.check_plan`` refuses what cannot run; the source builds one device's work per
micro-batch. Kernels (``time_workload``) are evaluated once per distinct row and summed per
slot and phase. Per micro-batch on stage ``i``: ``t_i = F_i + B_i + C_i + P_i + Z_i``
(forward, backward, tensor/expert collectives, pipeline sends, unhidden ZeRO traffic;
``recompute``: ``B_i += F_i``). 1F1B: ``(m + p - 1) x max_i t_i``. The data-parallel gradient
sync overlaps the last backward in 25 MiB buckets (ZeRO 0-3 as DDP / Megatron / DeepSpeed
move it); the optimizer runs the stage's update rows (``/ dp`` with ZeRO >= 1). Infer: the
forward pipeline. The interval reruns with every kernel at ``lower_s`` / ``upper_s``.
Seconds; memory: ``memory.plan.device_memory``; design notes (the ZeRO terms):
docs/design/decoder.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from roofcast.defaults import PARALLEL_ESTIMATOR
from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.systems import get_system
from roofcast.predictor.memory.plan import device_memory
from roofcast.predictor.memory.state import bytes_per_param
from roofcast.predictor.parallel.comm import group_time_s
from roofcast.predictor.parallel.overlap import (
    chunks,
    exposed_s,
    hiding_key,
    hiding_masks,
    overlappable,
)
from roofcast.predictor.parallel.plan import check_plan
from roofcast.predictor.parallel.schedule import bubble_fraction, one_f_one_b, stage_slots
from roofcast.predictor.parallel.types import (
    GROUPS,
    ModelFacts,
    ParallelPlan,
    ParallelPlanError,
    ParallelPrediction,
    ParallelSource,
    ShardedWorkload,
)
from roofcast.predictor.runtimes import get_runtime
from roofcast.predictor.simulate import evaluate

PHASES: tuple[str, ...] = ("forward", "backward", "update")
TIME_COLUMNS: tuple[str, ...] = ("time_s", "lower_s", "upper_s")
#: a plan that fits with less than this fraction of the capacity free gets a note (what the
#: memory model leaves out — CUDA context, NCCL buffers, fragmentation — takes a few GiB).
HEADROOM = 0.05
#: PyTorch DDP's default gradient bucket (``bucket_cap_mb=25``, Li et al. 2020).
DDP_BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class TimedWorkload:
    """A built workload with its kernels timed on one device: ``slot_s[(phase, column)]`` =
    per-slot sum of ``column`` x ``count`` of the rows of ``phase`` (and of the GEMMs that
    hide communication, ``overlap.HIDING_KEYS``)."""

    work: ShardedWorkload
    device: Any
    estimator: str
    slot_s: dict[tuple[str, str], np.ndarray]
    cache: dict = field(default_factory=dict, compare=False, repr=False)


def distinct_rows(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(first index of each distinct row, row -> its distinct row) over every column but
    ``layer``, ``count`` and ``key``: a block repeated over its slots is evaluated once (an
    estimator sees a row's content, never its slot or key)."""
    content = [c for c in rows.columns if c not in ("layer", "count", "key")]
    codes = pd.util.hash_pandas_object(rows[content], index=False).to_numpy()
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    return first, inverse


def _checked_rows(work: ShardedWorkload) -> pd.DataFrame:
    rows = work.rows.reset_index(drop=True)
    missing = {"count", "layer", "phase"} - set(rows.columns)
    if missing:
        raise ParallelPlanError("sharded workload rows lack column(s) "
                                f"{', '.join(sorted(missing))}")
    layer = rows["layer"].to_numpy(dtype=int)
    n_slots = len(work.param_elems)
    if len(layer) and (layer.min() < 0 or layer.max() >= n_slots):
        raise ParallelPlanError(f"row layer slots must lie in 0..{n_slots - 1}")
    return rows


def _evaluation_key(work: ShardedWorkload) -> tuple:
    """What ``evaluate`` reads besides the rows: the runtime profile and the run config apart
    from its dims (features read ``config.threads`` and the profile; the rows carry the dims)."""
    runtime = work.config.runtime if work.config.runtime is not None else work.runtime
    return (replace(work.config, dims={}, runtime=None), get_runtime(runtime))


@dataclass(frozen=True)
class StackedWorkloads:
    """What timing workloads needs that does not depend on the device (``stack_workloads``):
    per distinct (config, runtime) group the stacked distinct rows of its members and the map
    back to each member's rows; per workload its rows' slot, count and phase masks. Timing the
    same builds on many devices (a sweep's hardware axis) stacks them once."""

    works: tuple[ShardedWorkload, ...]
    groups: tuple[tuple[Any, Any, tuple[int, ...], pd.DataFrame, tuple[np.ndarray, ...]], ...]
    slots: tuple[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]], ...]


def stack_workloads(works: Sequence[ShardedWorkload]) -> StackedWorkloads:
    """The device-independent half of ``time_workloads``: each workload's distinct rows,
    stacked per distinct (config, runtime) and made distinct again."""
    rows = [_checked_rows(w) for w in works]
    picks = [distinct_rows(r) for r in rows]
    members_of: dict[tuple, list[int]] = {}
    for i, w in enumerate(works):
        members_of.setdefault(_evaluation_key(w), []).append(i)
    groups = []
    for (config, profile), members in members_of.items():
        parts = [rows[i].iloc[picks[i][0]] for i in members]
        stacked = pd.concat(parts, ignore_index=True)
        first, inverse = distinct_rows(stacked)
        offsets = np.cumsum([0] + [len(p) for p in parts])
        backs = tuple(inverse[offsets[j]:offsets[j + 1]][picks[i][1]]
                      for j, i in enumerate(members))
        groups.append((config, profile, tuple(members),
                       stacked.iloc[first].reset_index(drop=True), backs))
    slots = []
    for r in rows:
        phase = r["phase"].astype(str).to_numpy()
        masks = {ph: phase == ph for ph in PHASES} | hiding_masks(r)
        slots.append((r["layer"].to_numpy(dtype=int), r["count"].to_numpy(dtype=float), masks))
    return StackedWorkloads(works=tuple(works), groups=tuple(groups), slots=tuple(slots))


def time_stacked(stacked: StackedWorkloads, hw: Any, estimator: Any = PARALLEL_ESTIMATOR
                 ) -> list[TimedWorkload]:
    """The device half of ``time_workloads``: one ``evaluate`` per group on ``hw``, then time x
    count summed per (phase, slot) for each workload."""
    return time_stacked_devices(stacked, [hw], estimator)[0]


def time_stacked_devices(stacked: StackedWorkloads, hws: Sequence[Any],
                         estimator: Any = PARALLEL_ESTIMATOR) -> list[list[TimedWorkload]]:
    """``time_stacked`` on several devices at once: per group **one** ``evaluate`` over the
    devices (``featurize``'s device-major stack: device d's copy of distinct row r is row
    ``d x rows + r``) -> per device, the timed workloads in ``stacked.works`` order."""
    n_dev = len(hws)
    row_s: list[list[dict[str, np.ndarray]]] = [[{} for _ in stacked.works] for _ in hws]
    for config, profile, members, distinct, backs in stacked.groups:
        ev = evaluate(distinct, list(hws) if n_dev > 1 else hws[0], config, estimator, profile)
        cols = {col: ev[col].to_numpy(dtype=float).reshape(n_dev, len(distinct))
                for col in TIME_COLUMNS}
        for d in range(n_dev):
            for i, back in zip(members, backs, strict=True):
                row_s[d][i] = {col: cols[col][d][back] for col in TIME_COLUMNS}
    name = estimator if isinstance(estimator, str) else getattr(estimator, "name", str(estimator))
    out = []
    for hw, times_of in zip(hws, row_s, strict=True):
        timed = []
        for work, (layer, count, masks), times in zip(stacked.works, stacked.slots, times_of,
                                                      strict=True):
            n_slots = len(work.param_elems)
            slot_s = {}
            for ph, mask in masks.items():
                for col in TIME_COLUMNS:
                    slot_s[(ph, col)] = np.bincount(layer[mask],
                                                    weights=times[col][mask] * count[mask],
                                                    minlength=n_slots)
            timed.append(TimedWorkload(work=work, device=hw, estimator=name, slot_s=slot_s))
        out.append(timed)
    return out


def time_workloads(works: Sequence[ShardedWorkload], hw: Any,
                   estimator: Any = PARALLEL_ESTIMATOR) -> list[TimedWorkload]:
    """``time_workload`` of several workloads with one ``evaluate`` per distinct (config,
    runtime): the distinct rows of all of them are timed together (the plan search's builds
    share most kernels). ``stack_workloads`` then ``time_stacked``."""
    return time_stacked(stack_workloads(works), hw, estimator)


def time_workload(work: ShardedWorkload, hw: Any, estimator: Any = PARALLEL_ESTIMATOR
                  ) -> TimedWorkload:
    """Evaluate the distinct rows of ``work`` on ``hw`` and sum time x count per (phase,
    slot)."""
    return time_workloads([work], hw, estimator)[0]


def slot_comm_s(timed: TimedWorkload, plan: ParallelPlan, system: Any
                ) -> dict[tuple[str, str], np.ndarray]:
    """(phase, group) -> per-slot seconds of the source's collectives for one micro-batch
    (``CommOp`` x count). Tensor / expert groups depend only on ``tp`` / ``ep`` — fixed by the
    build — so the result is cached on ``timed`` per system."""
    return _slot_comm(timed, plan, system)[0]


def _slot_comm(timed: TimedWorkload, plan: ParallelPlan, system: Any
               ) -> tuple[dict[tuple[str, str], np.ndarray], dict[str, np.ndarray]]:
    """``slot_comm_s`` and, per phase, the per-slot seconds of the collectives that can hide
    behind GEMMs (``overlap.overlappable``); cached per system and tensor-overlap choice."""
    key = ("comm", system, plan.tp, plan.ep, plan.overlaps_tp_comm)
    if key not in timed.cache:
        n_slots = len(timed.work.param_elems)
        out: dict[tuple[str, str], np.ndarray] = {}
        hideable = {ph: np.zeros(n_slots) for ph in ("forward", "backward")}
        for op in timed.work.comms:
            arr = out.setdefault((op.phase, op.group), np.zeros(n_slots))
            t = op.count * group_time_s(op.collective, op.size_bytes, op.group, plan, system)
            arr[op.layer] += t
            if overlappable(op, plan):
                hideable[op.phase][op.layer] += t
        timed.cache[key] = (out, hideable)
    return timed.cache[key]


def exposed_comm_slots(timed: TimedWorkload, plan: ParallelPlan, system: Any, col: str
                       ) -> dict[str, np.ndarray]:
    """Per phase, the per-slot seconds of the source's collectives left on the critical path
    after the GEMM overlap of ``overlap`` (kernels at ``col``)."""
    comm, hideable = _slot_comm(timed, plan, system)
    n_slots = len(timed.work.param_elems)
    out = {}
    for ph in ("forward", "backward"):
        total = sum((v for (p, _), v in comm.items() if p == ph), np.zeros(n_slots))
        key = hiding_key(ph, plan)
        gemm = timed.slot_s[(key, col)] if key else np.zeros(n_slots)
        out[ph] = exposed_s(total, hideable[ph], gemm, chunks(plan))
    return out


@dataclass(frozen=True)
class _Step:
    step_s: float
    compute_s: float
    exposed_comm_s: float
    bubble_s: float
    optimizer_s: float
    stage_s: tuple[float, ...]
    by_group: dict[str, float]


def _per_stage(slot_values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return np.add.reduceat(np.asarray(slot_values, dtype=float), starts)


def _dp_times(grad_bytes: np.ndarray, weight_bytes: np.ndarray, plan: ParallelPlan,
              system: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per stage: the gradient reduction (all-reduce; reduce-scatter with ZeRO) and, with ZeRO,
    the parameter all-gather over the stage's data-parallel group."""
    sync_coll = "all_reduce" if plan.zero == 0 else "reduce_scatter"
    t_sync = np.array([group_time_s(sync_coll, g, "dp", plan, system) for g in grad_bytes])
    t_gather = np.array([group_time_s("all_gather", w, "dp", plan, system) if plan.zero else 0.0
                         for w in weight_bytes])
    return t_sync, t_gather


def _step(timed: TimedWorkload, stages: Sequence[Sequence[int]], plan: ParallelPlan,
          system: Any, mode: str, col: str) -> _Step:
    """Steps 3-7 of the module docstring, vectorised over the stages."""
    work, p, m = timed.work, plan.pp, plan.micro_batches
    starts = np.array([s[0] for s in stages])
    fwd = _per_stage(timed.slot_s[("forward", col)], starts)
    comm = {k: _per_stage(v, starts) for k, v in slot_comm_s(timed, plan, system).items()}
    zeros = np.zeros(p)
    exposed = exposed_comm_slots(timed, plan, system, col)
    c_fwd = _per_stage(exposed["forward"], starts)
    c_bwd = _per_stage(exposed["backward"], starts)
    rc = 2.0 if plan.recompute else 1.0
    groups = {g: m * sum((v * (rc if ph == "forward" else 1.0)
                          for (ph, gg), v in comm.items() if gg == g), zeros) for g in GROUPS}
    p2p = group_time_s("send_recv", work.boundary_bytes, "pp", plan, system)
    if mode == "infer":
        sends = (~(np.arange(p) == p - 1)).astype(float)
        bwd = zeros
        per_mb = fwd + c_fwd + sends * p2p
        extra, sync, opt = c_fwd + sends * p2p, zeros, zeros
    else:
        bwd, sends, sync, opt, extra, per_mb = _train_stages(
            timed, starts, plan, system, col, fwd, c_fwd, c_bwd, p2p, groups)
    groups["pp"] = m * sends * p2p
    return _critical_step(fwd, bwd, extra, sync, opt, per_mb, groups, m)


def _train_stages(timed: TimedWorkload, starts: np.ndarray, plan: ParallelPlan, system: Any,
                  col: str, fwd: np.ndarray, c_fwd: np.ndarray, c_bwd: np.ndarray,
                  p2p: float, groups: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """A training step's per-stage (backward, sends, exposed sync, optimizer, extra per
    micro-batch, time per micro-batch); sets ``groups["dp"]``."""
    work, p = timed.work, plan.pp
    bwd = _per_stage(timed.slot_s[("backward", col)], starts)
    if plan.recompute:
        bwd = bwd + fwd
        c_bwd = c_bwd + c_fwd
    last = np.arange(p) == p - 1
    first = np.arange(p) == 0
    sends = (~last).astype(float) + (~first).astype(float)
    w_b, g_b, _ = bytes_per_param(work.config.precision, work.config.optimizer)
    params = _per_stage(work.param_elems, starts)
    grad_bytes = params * (work.grad_reduce_bytes or g_b)
    key = ("dp", system, plan.dp, plan.tp, plan.pp, plan.zero)
    if key not in timed.cache:  # the same for every column and micro-batch count
        timed.cache[key] = _dp_times(grad_bytes, params * w_b, plan, system)
    t_sync, t_gather = timed.cache[key]
    sync, zero_mb, groups["dp"] = _zero_overlap(timed, starts, plan, system, fwd, bwd,
                                                grad_bytes, t_sync, t_gather, w_b)
    opt = _per_stage(timed.slot_s[("update", col)], starts) / (plan.dp if plan.zero else 1)
    if plan.zero in (1, 2):
        opt = opt + t_gather
    extra = c_fwd + c_bwd + sends * p2p + zero_mb
    per_mb = fwd + bwd + extra
    return bwd, sends, sync, opt, extra, per_mb


def _zero_overlap(timed: TimedWorkload, starts: np.ndarray, plan: ParallelPlan, system: Any,
                  fwd: np.ndarray, bwd: np.ndarray, grad_bytes: np.ndarray,
                  t_sync: np.ndarray, t_gather: np.ndarray, w_b: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per stage (exposed gradient sync, ZeRO time per micro-batch, the dp group's time)
    under the plan's ZeRO stage."""
    m = plan.micro_batches
    bucket = np.minimum(1.0, DDP_BUCKET_BYTES / np.maximum(grad_bytes, 1.0))
    after = np.concatenate([[0.0], np.cumsum(bwd)[:-1]])  # D_i
    floor = np.maximum(0.0, t_sync * np.where(grad_bytes > 0, bucket, 0.0) - after)
    if plan.zero <= 1:
        return np.maximum(t_sync - bwd - after, floor), np.zeros(plan.pp), t_sync + t_gather
    if plan.zero == 2:
        return floor, np.maximum(0.0, t_sync - bwd), m * t_sync + t_gather
    key = ("ag", system, plan.dp, plan.tp)
    if key not in timed.cache:
        timed.cache[key] = [group_time_s("all_gather", e * w_b, "dp", plan, system)
                            for e in timed.work.param_elems]
    ag = _per_stage(timed.cache[key], starts)  # one gather per layer
    zero_mb = np.maximum(0.0, ag - fwd) + np.maximum(0.0, ag + t_sync - bwd)
    return floor, zero_mb, m * (2 * ag + t_sync)


def _critical_step(fwd: np.ndarray, bwd: np.ndarray, extra: np.ndarray, sync: np.ndarray,
                   opt: np.ndarray, per_mb: np.ndarray, groups: dict[str, np.ndarray],
                   m: int) -> _Step:
    """The step of the pipeline's slowest stage (``one_f_one_b``) with its parts."""
    pipe = one_f_one_b(per_mb.tolist(), m)
    s = pipe.slowest
    compute = m * float(fwd[s] + bwd[s])
    exposed = m * float(extra[s]) + float(sync.max())
    optimizer = float(opt.max())
    by_group = {g: float(v[s]) for g, v in groups.items()}
    by_group["dp"] = float(groups["dp"].max())
    return _Step(step_s=compute + exposed + pipe.bubble_s + optimizer, compute_s=compute,
                 exposed_comm_s=exposed, bubble_s=pipe.bubble_s, optimizer_s=optimizer,
                 stage_s=tuple(float(x) for x in per_mb), by_group=by_group)


def assemble(timed: TimedWorkload, facts: ModelFacts, system: Any, plan: ParallelPlan, *,
             global_batch: int, mode: str, notes: Sequence[str] = ()) -> ParallelPrediction:
    """The prediction of an already checked ``plan`` from a timed workload built for it (the
    plan search calls this once per plan, sharing ``timed`` across dp / pp / micro-batches)."""
    work = timed.work
    stages = stage_slots(work.layers, plan.pp)
    point = _step(timed, stages, plan, system, mode, "time_s")
    lower = _step(timed, stages, plan, system, mode, "lower_s").step_s
    upper = _step(timed, stages, plan, system, mode, "upper_s").step_s
    memory = device_memory(work, stages, plan, mode=mode, precision=work.config.precision,
                           optimizer=work.config.optimizer,
                           capacity_bytes=float(timed.device.mem_capacity_bytes))
    samples_per_s = global_batch / point.step_s if point.step_s > 0 else float("inf")
    tokens = samples_per_s * facts.seq_tokens if facts.seq_tokens else None
    all_notes = tuple(notes) + tuple(work.notes)
    if plan.pp > 1:
        all_notes += (f"1F1B over {plan.pp} stages x {plan.micro_batches} micro-batches: bubble "
                      f"{point.bubble_s / point.step_s:.1%} of the step (equal stages: "
                      f"(p-1)/(m+p-1) = {bubble_fraction(plan.pp, plan.micro_batches):.1%})",)
    if memory.fits and memory.total_bytes > (1 - HEADROOM) * memory.capacity_bytes:
        all_notes += (f"fits with less than {HEADROOM:.0%} of the device's memory to spare "
                      f"({(memory.capacity_bytes - memory.total_bytes) / 2**30:.1f} GiB); the "
                      "framework / CUDA context, communication buffers and fragmentation (not "
                      "modelled) may not fit in that",)
    if not memory.fits:
        all_notes += (f"does not fit: {memory.total_bytes / 2**30:.1f} GiB per device > "
                      f"{memory.capacity_bytes / 2**30:.1f} GiB, over by "
                      f"{memory.over_bytes / 2**30:.1f} GiB",)
    return ParallelPrediction(
        model=facts.name, system=system.id, device=system.device, plan=plan, mode=mode,
        global_batch=global_batch, micro_batch=global_batch // (plan.dp * plan.micro_batches),
        step_s=point.step_s, compute_s=point.compute_s, exposed_comm_s=point.exposed_comm_s,
        bubble_s=point.bubble_s, optimizer_s=point.optimizer_s,
        comm_s_by_group=point.by_group, stage_s=point.stage_s, memory=memory,
        samples_per_s=samples_per_s, tokens_per_s=tokens, lower_s=min(lower, point.step_s),
        upper_s=max(upper, point.step_s), estimator=timed.estimator, runtime=work.runtime,
        notes=all_notes)


def predict_parallel(source: ParallelSource, system: Any, plan: ParallelPlan, *,
                     global_batch: int, mode: str = "train",
                     estimator: Any = PARALLEL_ESTIMATOR) -> ParallelPrediction:
    """One step of ``plan`` for ``source`` on ``system`` (a ``SystemSpec`` or a catalog id /
    what-if such as ``hgx-h100:nodes=4``): see the module docstring."""
    system = get_system(system)
    facts = source.facts
    notes = check_plan(plan, facts, n_devices=system.n_devices, global_batch=global_batch,
                       mode=mode, devices_per_node=system.devices_per_node)
    micro_batch = global_batch // (plan.dp * plan.micro_batches)
    work = source.build(tp=plan.tp, ep=plan.ep, micro_batch=micro_batch,
                        sequence_parallel=plan.sequence_parallel, mode=mode)
    if plan.pp > max(work.layers, 1):
        raise ParallelPlanError(f"pp={plan.pp} exceeds the {work.layers} layer slots "
                                f"{facts.name} was built with; use pp <= {max(work.layers, 1)}")
    timed = time_workload(work, get_device(system.device), estimator)
    return assemble(timed, facts, system, plan, global_batch=global_batch, mode=mode,
                    notes=notes)
