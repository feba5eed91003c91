"""Search the parallel plans of a model on a system and rank them: ``plan_search``.

Candidates: every ``(tp, pp)`` with ``tp * pp`` dividing the system's devices (``dp`` fills the
rest), every ``ep`` dividing the experts and ``dp * tp`` (MoE models; 1 for dense), every
micro-batch count whose micro-batch ``global_batch / (dp * m)`` is whole, and the asked ZeRO
stages, recomputation and sequence-parallel choices. A candidate that cannot run is counted in
``rejected`` under its reason (the first clause of ``plan.check_plan``'s message with the
numbers left out, or a duplicate: ZeRO with ``dp = 1`` and sequence parallelism with
``tp = 1`` change nothing and are skipped). The rest are predicted by ``engine.assemble``; the
source's ``build`` and the kernel timing run once per ``(tp, ep, micro_batch,
sequence_parallel)`` and serve every ``dp / pp / m / zero / recompute`` sharing them; the
distinct kernels of a batch of builds are timed in one ``evaluate``.

Ranking: plans that fit in memory first, by step time; then those that do not, by how much they
are over (``over_bytes``), then step time. ``rank`` starts at 1.
"""

from __future__ import annotations

import itertools
import re
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.systems import get_system
from roofcast.predictor.parallel.engine import (
    PARALLEL_ESTIMATOR,
    TimedWorkload,
    assemble,
    time_workloads,
)
from roofcast.predictor.parallel.plan import check_plan
from roofcast.predictor.parallel.types import (
    PARALLEL_MODES,
    ModelFacts,
    ParallelPlan,
    ParallelPlanError,
    ParallelPrediction,
    ParallelSource,
)
from roofcast.predictor.sharding import divisors, expert_degrees


@dataclass(frozen=True)
class PlanSearch:
    """Result of ``plan_search``: ``table`` (one row per evaluated plan: ``as_dict()`` columns
    + ``rank``, best first), ``best`` (the fastest plan that fits; None when none fits),
    ``rejected`` (reason -> candidates), ``elapsed_s`` (wall time of the search)."""

    table: pd.DataFrame
    best: ParallelPrediction | None
    rejected: Mapping[str, int]
    elapsed_s: float
    predictions: tuple[ParallelPrediction, ...] = ()

    @property
    def closest(self) -> ParallelPrediction | None:
        """The plan nearest to fitting (least ``over_bytes``) when none fits, else ``best``."""
        if self.best is not None or not self.predictions:
            return self.best
        return min(self.predictions, key=lambda p: (p.memory.over_bytes, p.step_s))


#: builds timed together in one ``evaluate`` (bounds the rows held at once).
BATCH = 16


def _reason(err: Exception, model: str) -> str:
    """The message's first clause with the model name and the numbers generalised."""
    first = str(err).split(";")[0].replace(model, "the model")
    return re.sub(r"\d+", "N", first)


def _candidates(n: int, facts: ModelFacts, global_batch: int, mode: str,
                zero: Sequence[int], recompute: Sequence[bool], sequence_parallel: Sequence[bool],
                tp_comm_overlap: bool = True) -> Iterator[ParallelPlan | str]:
    """Every candidate plan, or the reason string of a duplicate skipped."""
    train = mode == "train"
    zeros = tuple(zero) if train else (0,)
    rcs = tuple(recompute) if train else (False,)
    for tp in divisors(n):
        for pp in divisors(n // tp):
            dp = n // (tp * pp)
            eps = expert_degrees(facts.experts, dp * tp) if facts.experts else [1]
            ms = divisors(global_batch // dp) if global_batch % dp == 0 else [1]
            for ep, m, z, rc, sp in itertools.product(eps, ms, zeros, rcs, sequence_parallel):
                if z and dp == 1:
                    yield "zero needs dp > 1 (same as zero=0)"
                elif sp and tp == 1:
                    yield "sequence parallelism needs tp > 1 (same as without)"
                else:
                    yield ParallelPlan(dp=dp, tp=tp, pp=pp, ep=ep, micro_batches=m, zero=z,
                                       recompute=rc, sequence_parallel=sp,
                                       tp_comm_overlap=tp_comm_overlap)


def _rank(table: pd.DataFrame) -> pd.DataFrame:
    if table.empty:
        return table.assign(rank=pd.Series(dtype=int))
    order = table.assign(_unfit=~table["fits"].astype(bool))
    order = order.sort_values(["_unfit", "over_bytes", "step_s"], kind="stable")
    order = order.drop(columns="_unfit").reset_index(drop=True)
    order.insert(0, "rank", range(1, len(order) + 1))
    return order


def _build_all(source: ParallelSource, keys: Sequence[tuple], mode: str, hw: Any,
               estimator: Any, model: str) -> dict[tuple, TimedWorkload | str]:
    """key (tp, ep, micro_batch, sp) -> its timed workload, or the reason the source refused
    it. Built and timed in batches of ``BATCH`` (one ``evaluate`` per batch)."""
    out: dict[tuple, TimedWorkload | str] = {}
    distinct = list(dict.fromkeys(keys))
    for lo in range(0, len(distinct), BATCH):
        works, ok = [], []
        for key in distinct[lo:lo + BATCH]:
            tp, ep, mb, sp = key
            try:
                works.append(source.build(tp=tp, ep=ep, micro_batch=mb, sequence_parallel=sp,
                                          mode=mode))
                ok.append(key)
            except ParallelPlanError as err:
                out[key] = _reason(err, model)
        out.update(zip(ok, time_workloads(works, hw, estimator), strict=True))
    return out


def plan_search(source: ParallelSource, system: Any, *, global_batch: int, mode: str = "train",
                estimator: Any = PARALLEL_ESTIMATOR, zero: Sequence[int] = (0, 1),
                recompute: Sequence[bool] = (False, True),
                sequence_parallel: Sequence[bool] = (False, True),
                max_plans: int | None = None, tp_comm_overlap: bool = True) -> PlanSearch:
    """Predict every candidate plan of ``source`` on ``system`` (module docstring) and rank
    them (each with ``tp_comm_overlap``). ``max_plans``: evaluate at most that many of the
    candidates ``check_plan`` accepts (the rest are counted in ``rejected`` as not
    evaluated)."""
    start = time.perf_counter()
    if mode not in PARALLEL_MODES:
        raise ParallelPlanError(f"mode must be one of {', '.join(PARALLEL_MODES)}, got {mode!r}")
    if max_plans is not None and (isinstance(max_plans, bool) or not isinstance(max_plans, int)
                                  or max_plans < 1):
        raise ParallelPlanError(f"max_plans must be a positive integer or None, got {max_plans!r}")
    for z in zero:
        if z not in (0, 1, 2, 3) or isinstance(z, bool):
            raise ParallelPlanError(f"zero stages must be 0, 1, 2 or 3, got {z!r}")
    system = get_system(system)
    facts = source.facts
    hw = get_device(system.device)
    rejected: Counter[str] = Counter()
    checked: list[tuple[ParallelPlan, tuple[str, ...], tuple]] = []
    for cand in _candidates(system.n_devices, facts, global_batch, mode, zero, recompute,
                            sequence_parallel, tp_comm_overlap):
        if isinstance(cand, str):
            rejected[cand] += 1
            continue
        try:
            notes = check_plan(cand, facts, n_devices=system.n_devices,
                               global_batch=global_batch, mode=mode,
                               devices_per_node=system.devices_per_node)
        except ParallelPlanError as err:
            rejected[_reason(err, facts.name)] += 1
            continue
        if max_plans is not None and len(checked) >= max_plans:
            rejected["not evaluated (max_plans reached)"] += 1
            continue
        mb = global_batch // (cand.dp * cand.micro_batches)
        checked.append((cand, notes, (cand.tp, cand.ep, mb, cand.sequence_parallel)))
    built = _build_all(source, [k for _, _, k in checked], mode, hw, estimator, facts.name)
    preds: list[ParallelPrediction] = []
    for cand, notes, key in checked:
        timed = built[key]
        if isinstance(timed, str):
            rejected[timed] += 1
        elif cand.pp > max(timed.work.layers, 1):
            rejected["pp exceeds the layer slots the source built"] += 1
        else:
            preds.append(assemble(timed, facts, system, cand, global_batch=global_batch,
                                  mode=mode, notes=notes))
    table = _rank(pd.DataFrame([p.as_dict() for p in preds]))
    fitting = [p for p in preds if p.fits]
    best = min(fitting, key=lambda p: p.step_s) if fitting else None
    return PlanSearch(table=table, best=best, rejected=dict(rejected),
                      elapsed_s=time.perf_counter() - start, predictions=tuple(preds))
