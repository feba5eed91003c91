"""Simulate serving one workload on several devices: ``simulate(arch, hws, cfg, spec)``.

Per device: its engine profile and scheduler policy (``policies``), the KV pool
(``kvcache``), the step table (``steptable``, one ``time_steps`` call per engine for all
devices), the event loop (``engine``) and the summary (``metrics``). The workload is the
trace, or a closed loop at ``concurrency`` clients (``max``: the policy's running cap), or
open-loop arrivals at ``rate`` requests/s; lengths default to ``cfg``'s input / output tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.phases import engine_profile, step_estimator
from roofcast.predictor.llm.serving import check_request, estimator_name
from roofcast.predictor.llm.sim.checks import SIM_REQUESTS, check_spec
from roofcast.predictor.llm.sim.disagg import disagg_system, kv_link, run_disagg
from roofcast.predictor.llm.sim.engine import LOOP_RUNNERS
from roofcast.predictor.llm.sim.kvcache import KvPool, kv_pool
from roofcast.predictor.llm.sim.metrics import SimMetrics, summarise
from roofcast.predictor.llm.sim.policies import Policy, default_policy, get_policy
from roofcast.predictor.llm.sim.steptable import Grid, step_tables
from roofcast.predictor.llm.sim.trace import read_trace
from roofcast.predictor.llm.sim.workload import Lengths, Requests, closed_loop, open_loop
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.runtimes import runtime_names
from roofcast.predictor.sharding import Sharding, replica_system

#: requests a closed loop runs per client at least (a steady window between burst and drain).
CLOSED_ROUNDS = 5


@dataclass(frozen=True)
class SimSpec:
    """The workload and scheduler of a simulation. ``rate`` (requests/s, open loop) or
    ``concurrency`` (closed loop: an int or ``"max"``) or ``trace`` (a CSV path);
    ``arrival``: ``poisson`` or ``gamma`` (coefficient of variation ``cv``); ``lengths``:
    ``fixed``/``uniform``/``lognormal`` around ``cfg``'s tokens with ``length_spread``;
    ``policy`` (None: the engine's); ``max_seqs``/``max_tokens`` override its limits;
    ``prefix_tokens``: a prompt prefix shared by every request (cached where the policy
    caches prefixes); SLOs in seconds; ``disagg``: separate prefill and decode replicas
    (``disagg``)."""

    rate: float | None = None
    concurrency: int | str | None = None
    trace: str | None = None
    requests: int = 1000
    arrival: str = "poisson"
    cv: float = 1.0
    lengths: str = "fixed"
    length_spread: float = 0.0
    policy: str | None = None
    max_seqs: int | None = None
    max_tokens: int | None = None
    prefix_tokens: int = 0
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    seed: int = 0
    #: prefill/decode disaggregation (``disagg.Disagg``) or None.
    disagg: object = None


@dataclass(frozen=True)
class SimResult:
    """One device's simulation: ``metrics`` None where the model does not fit."""

    device: str
    runtime: str
    policy: Policy
    road: str
    pool: KvPool
    metrics: SimMetrics | None
    notes: tuple[str, ...] = field(default=())
    clients: int = 0


def _policy(spec: SimSpec, runtime: str, cfg: ServingConfig) -> Policy:
    base = get_policy(spec.policy) if spec.policy else default_policy(
        runtime, static=cfg.batch is not None)
    seqs = spec.max_seqs if cfg.batch is None else (spec.max_seqs or int(cfg.batch))
    return base.with_limits(seqs, spec.max_tokens)


def _runtime(spec: SimSpec, cfg: ServingConfig) -> str | None:
    """The engine whose profile times the steps: ``cfg.runtime``, else the engine of the
    named ``spec.policy`` where it is a runtime (``--policy sglang``: SGLang's profile), else
    None (the device kind's engine)."""
    if cfg.runtime is not None or spec.policy is None:
        return cfg.runtime
    engine = get_policy(spec.policy).engine
    return engine if engine in runtime_names() else None


def workload(spec: SimSpec, cfg: ServingConfig, policy: Policy) -> Requests:
    """The requests of ``spec`` (module docstring)."""
    if spec.trace is not None:
        return read_trace(spec.trace)
    inputs = Lengths(spec.lengths, float(cfg.input_tokens), _spread(spec, cfg.input_tokens))
    outputs = Lengths(spec.lengths, float(cfg.output_tokens), _spread(spec, cfg.output_tokens))
    if spec.concurrency is not None:
        clients = policy.max_seqs if spec.concurrency == "max" else int(spec.concurrency)
        n = SIM_REQUESTS.check(max(spec.requests, CLOSED_ROUNDS * clients),
                               f"{CLOSED_ROUNDS} requests per client", PredictionError)
        return closed_loop(n, clients, inputs, outputs, seed=spec.seed)
    if spec.rate is None:
        raise PredictionError("give a request rate, a concurrency or a trace to simulate")
    return open_loop(spec.requests, spec.rate, inputs, outputs, process=spec.arrival,
                     cv=spec.cv, seed=spec.seed)


def _spread(spec: SimSpec, mean: int) -> float:
    """Uniform: a half-width of ``length_spread x mean``; lognormal: the cv itself."""
    return spec.length_spread * mean if spec.lengths == "uniform" else spec.length_spread


def _check_lengths(arch: LLMArch, req: Requests) -> None:
    total = req.input_tokens + req.output_tokens
    over = int((total > arch.max_context).sum())
    if over:
        raise PredictionError(f"{over} request(s) exceed {arch.name}'s maximum context of "
                              f"{arch.max_context} tokens (longest {int(total.max())}); "
                              "shorten them")


def _grid(req: Requests, policy: Policy) -> Grid:
    ctx = int((req.input_tokens + req.output_tokens).max())
    seqs = policy.max_seqs if not req.clients else min(policy.max_seqs, req.clients)
    prefill = policy.max_tokens if policy.loop == "continuous" else (
        seqs * int(req.input_tokens.max()))
    if policy.loop == "continuous" and not policy.chunked_prefill:
        prefill = max(prefill, int(req.input_tokens.max()))
    return Grid.covering(seqs, ctx, prefill, int(np.mean(req.input_tokens)),
                         int(req.input_tokens.min()))


def _road(policy: Policy, runtime: str, req: Requests, spec: SimSpec,
          estimator: str = "") -> str:
    if spec.trace is not None:
        how = f"trace {spec.trace}"
    elif req.clients:
        how = f"closed loop of {req.clients} clients"
    else:
        how = f"{spec.arrival} arrivals at {spec.rate:g} requests/s"
    return (f"simulated: {policy.name} policy, {how}, {len(req)} requests; step times from "
            f"the {runtime} kernel model{f' ({estimator})' if estimator else ''} + engine "
            "calibration")


@dataclass(frozen=True)
class Prepared:
    """What a device's simulation needs besides the workload: its engine, policy, KV pool
    and step table (None where the model does not fit; reusable across rates: the planner
    runs many)."""

    hw: HardwareSpec
    runtime: str
    policy: Policy
    pool: KvPool
    table: object
    #: the system one replica runs on (None: one device).
    system: object = None
    replica_devices: int = 1
    #: the estimator the steps were timed with.
    estimator: str = ""


def prepare(arch: LLMArch, hws: Sequence[HardwareSpec], cfg: ServingConfig, spec: SimSpec,
            req: Requests | None = None, *, estimator: str = SERVING_ESTIMATOR,
            system=None) -> tuple[list[Prepared], Requests]:
    """The ``Prepared`` of every device and the workload (``req``: given, else ``spec``'s)."""
    check_spec(spec)
    if not hws:
        raise PredictionError("no devices to simulate; give at least one device")
    cfg_req = replace(cfg, batch=None, concurrency=None)
    runtime = _runtime(spec, cfg)
    profiles = [engine_profile(runtime, hw) for hw in hws]
    for p in profiles:
        check_request(arch, cfg_req, p)
    sh = Sharding.of(cfg)
    systems = [replica_system(hw, sh, system) for hw in hws]
    policies = [_policy(spec, p.name, cfg) for p in profiles]
    req = workload(spec, cfg, policies[0]) if req is None else req
    _check_lengths(arch, req)
    pools = [kv_pool(arch, hw, cfg, p, pol.block_tokens)
             for hw, p, pol in zip(hws, profiles, policies, strict=True)]
    tables: list = [None] * len(hws)
    for name in dict.fromkeys(p.name for p in profiles):  # one timing per engine
        idx = [i for i, p in enumerate(profiles) if p.name == name and pools[i].blocks > 0]
        if idx:
            timed = step_tables(arch, [hws[i] for i in idx], cfg, profiles[idx[0]],
                                _grid(req, policies[idx[0]]), [systems[i] for i in idx],
                                estimator=estimator)
            for i, table in zip(idx, timed, strict=True):
                tables[i] = table
    return [Prepared(hw, p.name, pol, pool, t, sysm, sh.devices,
                     estimator_name(step_estimator(estimator, p)))
            for hw, p, pol, pool, t, sysm
            in zip(hws, profiles, policies, pools, tables, systems, strict=True)], req


def simulate(arch: LLMArch, hws: Sequence[HardwareSpec], cfg: ServingConfig, spec: SimSpec,
             *, estimator: str = SERVING_ESTIMATOR, system=None) -> list[SimResult]:
    """One ``SimResult`` per device of ``hws`` (module docstring)."""
    prepared, req = prepare(arch, hws, cfg, spec, estimator=estimator, system=system)
    return [run_prepared(arch, p, spec, req) for p in prepared]


def run_prepared(arch: LLMArch, prep: Prepared, spec: SimSpec, req: Requests) -> SimResult:
    """Simulate ``req`` on one prepared device."""
    hw, policy, runtime, pool = prep.hw, prep.policy, prep.runtime, prep.pool
    road = _road(policy, runtime, req, spec, prep.estimator)
    notes = [road]
    if policy.engine not in (runtime, "any"):
        notes.append(f"policy {policy.name} models {policy.engine}'s scheduler; step times "
                     f"are {runtime}'s")
    if spec.prefix_tokens and not policy.prefix_cache:
        notes.append(f"{policy.name} caches no prefix: the shared {spec.prefix_tokens} "
                     "tokens are prefilled by every request")
    if pool.blocks == 0 or pool.tokens < int((req.input_tokens + req.output_tokens).max()):
        notes.append(f"{arch.name} does not fit on {hw.id} with room for one request's KV "
                     f"cache ({pool.memory.weights_bytes / 2**30:.1f} GiB of weights, "
                     f"{hw.mem_capacity_bytes / 2**30:.0f} GiB of memory): raise tp or use "
                     "smaller weights; metrics not predicted")
        return SimResult(hw.id, runtime, policy, road, pool, None, tuple(notes), req.clients)
    notes.extend(prep.table.notes)
    if spec.disagg is not None:
        trace, note = _disagg_trace(prep, spec, req)
        notes.append(note)
    else:
        trace = LOOP_RUNNERS[policy.loop](req, policy, pool.blocks, prep.table,
                                          spec.prefix_tokens)
    m = summarise(trace, spec.slo_ttft_s, spec.slo_tpot_s)
    if m.preemptions:
        notes.append(f"{m.preemptions} preemption(s): the KV pool of {pool.tokens:,} tokens "
                     "ran out; preempted requests recompute their prompt and output so far")
    if math.isfinite(m.little_error) and abs(m.little_error) > 0.02:
        notes.append(f"Little's law off by {m.little_error:+.1%} over the window (few "
                     "requests or an unsteady run: raise --requests)")
    return SimResult(hw.id, runtime, policy, road, pool, m, tuple(notes), req.clients)


def _disagg_trace(prep: Prepared, spec: SimSpec, req: Requests) -> tuple[object, str]:
    """The trace of ``spec.disagg``'s two pools and what the KV transfer costs."""
    d = spec.disagg
    system = disagg_system(prep.hw, prep.system, prep.replica_devices, d)
    link = kv_link(system, prep.replica_devices, d)
    trace, transfer = run_disagg(req, prep.policy, prep.pool.blocks, prep.table, d, link,
                                 prep.pool.bytes_per_token, spec.prefix_tokens)
    return trace, (f"disaggregated: {d.prefill} prefill + {d.decode} decode replica(s) of "
                   f"{prep.replica_devices} device(s) each; KV moved over {link.what} on "
                   f"{system.id}, {float(np.mean(transfer)) * 1e3:.3g} ms per request (mean); "
                   "throughput is the whole pool's")


def rate_sweep(arch: LLMArch, hws: Sequence[HardwareSpec], cfg: ServingConfig, spec: SimSpec,
               rates: Sequence[float], *, estimator: str = SERVING_ESTIMATOR
               ) -> list[tuple[float, SimResult]]:
    """(rate, result) per device x rate: open loops at each of ``rates`` (requests/s) on one
    step table per engine (for latency-against-rate charts)."""
    prepared, _ = prepare(arch, hws, cfg, replace(spec, rate=float(rates[0])),
                          estimator=estimator)
    out = []
    for rate in rates:
        run_spec = replace(spec, rate=float(rate))
        for p in prepared:
            out.append((float(rate), run_prepared(arch, p, run_spec,
                                                  workload(run_spec, cfg, p.policy))))
    return out
