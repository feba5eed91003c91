"""Capacity planning under SLOs: the cheapest devices, split and replica count for a rate.

For each candidate device (or system) and tensor-parallel degree ``tp`` (the splits of
``serving_plan.splits`` with one pipeline stage, at most the devices of a node) where the model
fits, and each ``Choices`` option asked for (speculative decoding or not; colocated or a
prefill:decode ratio ``P:D``): the fewest units ``k`` (a unit = one replica, or ``P + D``
replicas disaggregated) such that one unit at ``rate / k`` requests/s (units share the load
evenly) serves at least ``ATTAINMENT`` of its requests within both SLOs; ``k`` doubles until it
does, then bisects (every try a simulation on the same step table). Cost = devices x the
catalog list price, devices = k x replicas per unit x tp; rows ranked by cost (no price: after
the priced ones, with a note). Seconds inside; the table in ms and $.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.serving_plan import splits
from roofcast.predictor.llm.sim.disagg import Disagg
from roofcast.predictor.llm.sim.run import Prepared, SimSpec, prepare, run_prepared, workload
from roofcast.predictor.llm.spec_decode import SpecDecode
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.parallel.types import ParallelPlanError
from roofcast.predictor.sharding import Sharding, check_sharding

ATTAINMENT = 0.9
MAX_REPLICAS = 4096
COLUMNS: tuple[str, ...] = (
    "rank", "device", "system", "tp", "disagg", "spec_decode", "replicas", "devices",
    "cost_usd", "meets", "attainment", "ttft_p90_ms", "tpot_p90_ms", "replica_rate", "notes")
#: prefill:decode ratios ``Choices.searching`` tries (bounded: four per candidate).
DISAGG_RATIOS: tuple[Disagg, ...] = (Disagg(1, 1), Disagg(1, 2), Disagg(1, 3), Disagg(2, 1))


@dataclass(frozen=True)
class Choices:
    """What the planner tries besides devices and tp: ``disagg`` ratios (besides colocated
    replicas) and ``spec`` speculative-decoding settings (besides none)."""

    disagg: tuple[Disagg, ...] = ()
    spec: tuple[SpecDecode, ...] = ()

    @classmethod
    def searching(cls, disagg: bool = False, spec: SpecDecode | None = None) -> Choices:
        """``DISAGG_RATIOS`` when ``disagg``; ``spec`` when given."""
        return cls(DISAGG_RATIOS if disagg else (), (spec,) if spec is not None else ())


def _smallest(ok: Callable[[int], bool]) -> int | None:
    """The least k in 1..MAX_REPLICAS with ``ok(k)`` (``ok`` monotone), else None."""
    hi = 1
    while not ok(hi):
        if hi >= MAX_REPLICAS:
            return None
        hi = min(hi * 2, MAX_REPLICAS)
    lo = hi // 2 + 1 if hi > 1 else 1
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def _candidate(arch: LLMArch, prep: Prepared, spec: SimSpec, cfg: ServingConfig,
               rate: float) -> dict[str, Any]:
    results: dict[int, Any] = {}

    def ok(k: int) -> bool:
        run_spec = replace(spec, rate=rate / k)
        r = run_prepared(arch, prep, run_spec, workload(run_spec, cfg, prep.policy))
        results[k] = r
        return r.metrics is not None and (r.metrics.slo_share or 0.0) >= ATTAINMENT

    k = _smallest(ok)
    best = results[k if k is not None else max(results)]
    m = best.metrics
    return {"replicas": k, "meets": k is not None,
            "attainment": m.slo_share if m else math.nan,
            "ttft_p90_ms": m.latency["ttft_s"]["p90"] * 1e3 if m else math.nan,
            "tpot_p90_ms": m.latency["tpot_s"]["p90"] * 1e3 if m else math.nan,
            "replica_rate": rate / (k or max(results))}


def _tps(arch: LLMArch, node: int) -> list[int]:
    out = []
    for tp, pp in splits(node):
        if pp != 1:
            continue
        try:
            check_sharding(arch, Sharding(tp, 1, 1))
        except (ParallelPlanError, PredictionError):
            continue
        out.append(tp)
    return out


def _options(arch: LLMArch, hw: HardwareSpec, system: Any, tp: int, cfg: ServingConfig,
             spec: SimSpec, choices: Choices, estimator: str) -> list[dict[str, Any]]:
    """The rows of one device and tp: every speculative-decoding and disaggregation choice."""
    rows = []
    for sd in (None, *choices.spec):
        run_cfg = replace(cfg, tp=tp, spec_decode=sd)
        base: dict[str, Any] = {"device": hw.id, "system": getattr(system, "id", ""), "tp": tp,
                                "spec_decode": sd.label() if sd else "", "notes": ""}
        (prep,), _ = prepare(arch, [hw], run_cfg, spec, estimator=estimator, system=system)
        for d in (None, *choices.disagg):
            rec = {**base, "disagg": f"{d.prefill}:{d.decode}" if d else ""}
            if prep.pool.blocks == 0:
                rows.append({**rec, "meets": False, "notes": "does not fit"})
                continue
            rec.update(_candidate(arch, prep, replace(spec, disagg=d), run_cfg,
                                  float(spec.rate)))
            rows.append(_costed(rec, hw, tp, 1 if d is None else d.prefill + d.decode))
    return rows


def _costed(rec: dict[str, Any], hw: HardwareSpec, tp: int, per_unit: int) -> dict[str, Any]:
    """``rec`` with its replicas (``per_unit`` a unit), devices, cost and notes."""
    if not rec["meets"]:
        return {**rec, "notes": f"misses the SLOs even at {MAX_REPLICAS} units"}
    rec["replicas"] = rec["replicas"] * per_unit
    rec["devices"] = rec["replicas"] * tp
    rec["cost_usd"] = rec["devices"] * hw.price_usd if hw.price_usd else None
    if not hw.price_usd:
        rec["notes"] = f"{hw.id} has no catalog price: ranked after priced ones"
    return rec


def plan_capacity(arch: LLMArch, targets: Sequence[tuple[HardwareSpec, Any]],
                  cfg: ServingConfig, spec: SimSpec, *,
                  estimator: str = SERVING_ESTIMATOR,
                  choices: Choices = Choices()) -> pd.DataFrame:
    """The ranked candidates (module docstring); ``targets``: (device, system or None);
    ``spec``: the rate and SLOs (and lengths, policy); ``choices``: what else to try."""
    if spec.rate is None or (spec.slo_ttft_s is None and spec.slo_tpot_s is None):
        raise PredictionError("capacity planning needs a rate and at least one SLO "
                              "(--rate R --slo-ttft MS --slo-tpot MS)")
    rows = []
    for hw, system in targets:
        node = system.devices_per_node if system is not None else 8
        for tp in _tps(arch, node):
            rows += _options(arch, hw, system, tp, cfg, spec, choices, estimator)
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    table["meets"] = table["meets"].fillna(False).astype(bool)
    table = table.sort_values(["meets", "cost_usd", "devices"], ascending=[False, True, True],
                              na_position="last", kind="stable").reset_index(drop=True)
    table["rank"] = range(1, len(table) + 1)
    return table
