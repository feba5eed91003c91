"""``roofcast.llm(..., rate=...)``: the request-level simulation from Python.

Checks every argument first (one-line ``TypeError``/``ValueError`` naming it), resolves the
devices or systems, runs ``predictor.llm.sim.run.simulate`` and returns one row per device
(``predictor.llm.sim.frame.COLUMNS``). ``plan_serve``: the cheapest device / system, split and
replica count meeting SLOs at a rate (``predictor.llm.sim.planner``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.sim.checks import number

SIM_KEYWORDS: tuple[str, ...] = (
    "arrival", "arrival_cv", "requests", "lengths", "length_spread", "policy",
    "engine_max_seqs", "engine_max_tokens", "prefix_tokens", "seed", "disagg")


def sim_spec(*, rate: Any, trace: Any, concurrency: Any, slo_ttft_ms: Any, slo_tpot_ms: Any,
             sim: Mapping[str, Any]):
    """A checked ``SimSpec`` of ``llm``'s simulation keywords."""
    from roofcast.predictor.llm.sim.checks import check_spec
    from roofcast.predictor.llm.sim.run import SimSpec

    unknown = sorted(set(sim) - set(SIM_KEYWORDS))
    if unknown:
        raise TypeError(f"unknown keyword(s) {', '.join(unknown)}; the simulation takes "
                        f"{', '.join(SIM_KEYWORDS)}")
    slo = {k: None if v is None else number(v, f"{k} (ms)") / 1e3
           for k, v in (("slo_ttft_ms", slo_ttft_ms), ("slo_tpot_ms", slo_tpot_ms))}
    spec = SimSpec(rate=rate, concurrency=concurrency,
                   trace=None if trace is None else str(trace),
                   requests=sim.get("requests", 1000), arrival=sim.get("arrival", "poisson"),
                   cv=sim.get("arrival_cv", 1.0), lengths=sim.get("lengths", "fixed"),
                   length_spread=sim.get("length_spread", 0.0), policy=sim.get("policy"),
                   max_seqs=sim.get("engine_max_seqs"), max_tokens=sim.get("engine_max_tokens"),
                   prefix_tokens=sim.get("prefix_tokens", 0),
                   slo_ttft_s=slo["slo_ttft_ms"], slo_tpot_s=slo["slo_tpot_ms"],
                   seed=sim.get("seed", 0), disagg=_disagg(sim.get("disagg")))
    check_spec(spec)
    if spec.rate is None and spec.concurrency is None and spec.trace is None:
        raise PredictionError("the simulation needs rate=, concurrency= or trace=")
    return spec


def _disagg(value: Any):
    """``disagg=``: None, a ``Disagg`` or ``"P:D"``."""
    from roofcast.predictor.llm.sim.disagg import Disagg, parse_disagg

    return value if value is None or isinstance(value, Disagg) else parse_disagg(value)


def _targets(hw: Any, system: Any, devices: Any) -> list[tuple[HardwareSpec, Any]]:
    from roofcast.parallel_api import target_system

    if system is not None:
        t = target_system(system)
        return [(get_device(t.device), t)]
    if hw is None:
        raise PredictionError("give hw= (a device or a list) or system=")
    hws = [hw] if isinstance(hw, str | HardwareSpec) else list(hw)
    specs = [h if isinstance(h, HardwareSpec) else get_device(h) for h in hws]
    if devices is not None:
        return [(h, target_system(hw=h.id, devices=devices)) for h in specs]
    return [(h, None) for h in specs]


def llm_simulated(arch: Any, hw: Any, cfg: Any, spec: Any, *, system: Any, devices: Any,
                  estimator: Any) -> pd.DataFrame:
    """One row per device of the simulation of ``spec`` (module docstring)."""
    from dataclasses import replace

    from roofcast.predictor.llm.sim.frame import sim_frame
    from roofcast.predictor.llm.sim.run import simulate

    run_cfg = replace(cfg, concurrency=None)
    targets = _targets(hw, system, devices)
    kw = {} if estimator is None else {"estimator": estimator}
    if all(t is None for _, t in targets):
        return sim_frame(simulate(arch, [h for h, _ in targets], run_cfg, spec, **kw))
    return sim_frame([r for h, t in targets
                      for r in simulate(arch, [h], run_cfg, spec, system=t, **kw)])


def plan_serve(arch: Any, cfg: Any, spec: Any, *, hw: Any, system: Any,
               estimator: Any, search_disagg: bool = False,
               spec_decode: Any = None) -> pd.DataFrame:
    """The capacity plan of ``spec``'s rate and SLOs over ``hw`` (a device or a list) or
    ``system``, ranked by cost (``sim.planner``); ``search_disagg``: also the prefill:decode
    ratios of ``planner.DISAGG_RATIOS``; ``spec_decode`` (a ``SpecDecode``): also with it."""
    from roofcast.predictor.llm.sim.planner import Choices, plan_capacity

    if not isinstance(search_disagg, bool):
        raise PredictionError(f"search_disagg= must be True or False, got {search_disagg!r}")
    kw = {} if estimator is None else {"estimator": estimator}
    return plan_capacity(arch, _targets(hw, system, None), cfg, spec,
                         choices=Choices.searching(search_disagg, spec_decode), **kw)
