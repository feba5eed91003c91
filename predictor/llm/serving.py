"""Serving metrics of an LLM on devices: TTFT, TPOT, end-to-end latency, tokens/s, memory fit.

``predict_serving(arch, hw, cfg)`` -> ``ServingPrediction``; ``serving_table`` one row per
device x batch, all timed in one ``evaluate`` call per engine (``phases.time_steps``).
With ``N`` input and ``M`` output tokens, static batching of ``B``: TTFT = prefill(B, N),
TPOT = mean decode step over contexts ``N+1 .. N+M-1``, e2e = TTFT + (M - 1) TPOT, output
tokens/s = B M / e2e (batches over ``max_batch`` run in waves). Continuous batching of ``C``:
each step decodes C requests at context ``N + M/2`` plus a prefill chunk of ``C N / M``
tokens; output tokens/s = C / TPOT. Times pass the engine calibration (``calibration``),
then a ``tp x pp`` replica (``sharding``) adds its step communication (``comm``):
``TTFT = cal(kernels) + steps x comm``, ``TPOT = cal(kernels) + comm``. Cost: list price over
3 years per token; energy: tokens/s / TDP. Speculative decoding (``spec_decode``): a step
verifies K + 1 tokens per sequence, TPOT = step / E. Seconds; design: docs/design/decoder.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.calibration import engine_calibration
from roofcast.predictor.llm.comm import StepComm, step_comm
from roofcast.predictor.llm.kernels import MoeRouting, Segment
from roofcast.predictor.llm.phases import (
    APPLIES,
    Step,
    collect_request_times,
    engine_profile,
    has_fp8_units,
    measured_share_notes,
    request_steps,
    step_estimator,
)
from roofcast.predictor.llm.precision import KV_CONVERT_OPS, TensorDtypes, dtype_bytes
from roofcast.predictor.llm.spec_decode import time_spec_steps, verify_step
from roofcast.predictor.llm.types import ServingConfig, ServingPrediction
from roofcast.predictor.memory.serving import devices_needed, max_batch, serving_memory
from roofcast.predictor.memory.types import DeviceMemory
from roofcast.predictor.runtimes import ExecutionProfile, get_runtime, runtime_names
from roofcast.predictor.runtimes.profile import ServingSpec
from roofcast.predictor.sharding import (
    Sharding,
    check_sharding,
    local_arch,
    pipeline_round_factor,
    replica_system,
)

AMORTISATION_YEARS = 3.0
SECONDS_PER_YEAR = 365.0 * 86400.0
METRICS: tuple[str, ...] = ("ttft_s", "tpot_s", "e2e_latency_s", "output_tokens_per_s",
                            "total_tokens_per_s")
#: the engine settings assumed for a runtime without a ``[serving]`` table.
DEFAULT_SERVING = ServingSpec()


def serving_spec(profile: ExecutionProfile) -> ServingSpec:
    """The profile's ``[serving]`` table, else ``DEFAULT_SERVING`` (fp16/bf16 weights and KV,
    continuous batching, 0.9 memory utilisation, whole-prompt prefill, no step overhead)."""
    return profile.serving if profile.serving is not None else DEFAULT_SERVING


def _positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise PredictionError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def _engines_running(kind: str, dtype: str) -> str:
    names = []
    for n in runtime_names():
        spec = get_runtime(n).serving
        if spec is not None and dtype in getattr(spec, kind):
            names.append(n)
    return ", ".join(names) or "none of the installed runtimes"


def check_request(arch: LLMArch, cfg: ServingConfig, profile: ExecutionProfile) -> None:
    """``PredictionError`` for a request the model or the engine cannot serve: lengths not
    positive or beyond ``arch.max_context``, an unknown dtype, a weight/KV dtype the engine
    does not run (naming the engines that do), a bad batch/concurrency, or concurrency on an
    engine that batches statically."""
    n = _positive_int(cfg.input_tokens, "input tokens")
    m = _positive_int(cfg.output_tokens, "output tokens")
    if n + m > arch.max_context:
        raise PredictionError(
            f"{n} input + {m} output tokens = {n + m} exceed {arch.name}'s maximum context of "
            f"{arch.max_context} tokens; shorten the prompt or the output")
    dtypes = TensorDtypes.of(cfg)
    spec = serving_spec(profile)
    for kind, dtype, label in (("weights", dtypes.weights, "weights"),
                               ("kv_cache", dtypes.kv, "KV cache")):
        if dtype not in getattr(spec, kind):
            raise PredictionError(
                f"engine {profile.name!r} does not run {dtype} {label} (it runs "
                f"{', '.join(getattr(spec, kind))}); engines that do: "
                f"{_engines_running(kind, dtype)}")
    if cfg.batch is not None and cfg.concurrency is not None:
        raise PredictionError("give a batch (static batching) or a concurrency (continuous "
                              "batching), not both")
    if cfg.batch is not None:
        _positive_int(cfg.batch, "batch")
    check_moe_imbalance(arch, cfg)
    if cfg.concurrency is not None:
        if cfg.concurrency != "max":
            _positive_int(cfg.concurrency, "concurrency")
        if spec.batching != "continuous":
            raise PredictionError(f"engine {profile.name!r} batches statically; give a batch "
                                  "instead of a concurrency")


def check_moe_imbalance(arch: LLMArch, cfg: ServingConfig) -> MoeRouting:
    """``cfg``'s expert routing; ``PredictionError`` for an imbalance that is not a number
    >= 1, above 1 on a dense model or on one expert group (where it changes nothing), or above
    ``ep`` (max / mean of ep groups cannot exceed ep)."""
    x = cfg.moe_imbalance
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise PredictionError(f"MoE imbalance must be a number >= 1 (max / mean expert-group "
                              f"load), got {x!r}")
    routing = MoeRouting(float(x))
    if routing.imbalance == 1.0:
        return routing
    if arch.n_experts <= 1 and not any(k.moe is not None for k in arch.layers):
        raise PredictionError(f"MoE imbalance applies to mixture-of-experts models; "
                              f"{arch.name} has no experts: drop it")
    if cfg.ep <= 1:
        raise PredictionError("MoE imbalance needs expert parallelism (ep > 1): one expert "
                              "group runs every token-expert pair; give --ep / ep=")
    if routing.imbalance > cfg.ep:
        raise PredictionError(f"MoE imbalance {routing.imbalance:g} is above ep = {cfg.ep}: the "
                              f"busiest of {cfg.ep} expert groups takes at most all the load "
                              f"(max / mean <= {cfg.ep})")
    return routing


@dataclass(frozen=True)
class _Cell:
    """One (device, batch) to predict."""

    hw: HardwareSpec
    profile: ExecutionProfile
    batch: int
    continuous: bool
    max_batch: int
    devices_needed: int
    memory: DeviceMemory
    #: the system the replica runs on (None: one device).
    system: Any = None

    @property
    def waves(self) -> int:
        """Sequential waves a static batch runs in (1 when it fits; 0: not predicted)."""
        if self.max_batch < 1 or self.batch < 1:
            return 0
        if self.batch <= self.max_batch:
            return 1
        return 0 if self.continuous else math.ceil(self.batch / self.max_batch)

    @property
    def wave_batch(self) -> int:
        """Requests per wave: ``ceil(batch / waves)``."""
        return math.ceil(self.batch / self.waves) if self.waves else 0


@dataclass(frozen=True)
class _Continuous:
    """The steady state of concurrency C: the ``mixed`` step and one ``ttft`` step, the
    ``ttft_steps`` a new prompt takes and the requests ``decoding`` in each step (a mean:
    fractional when prefill-bound)."""

    mixed: Step
    ttft: Step
    ttft_steps: int
    decoding: float


def _continuous_steps(c: int, n: int, m: int, spec: ServingSpec,
                      per_step: float = 1.0) -> _Continuous:
    """The steady state of concurrency ``c`` (module docstring). With a prefill budget
    ``cap`` below the ``c x N / M`` prompt tokens a step needs, prefill limits the rate: only
    ``cap / N`` requests enter per step, so ``cap x M / N`` of the ``c`` are decoding.
    ``per_step``: output tokens per sequence per step (speculative decoding's ``E``; a
    request then lasts ``M / E`` steps)."""
    ctx = n + max(m // 2, 1)
    cap = int(spec.max_prefill_tokens)
    need = max(1, round(c * n * per_step / m))
    chunk = min(need, cap) if cap else need
    decoding = float(c) if chunk == need else min(float(c), cap * m / (n * per_step))
    if chunk >= n:
        prefill = Segment(max(1, round(chunk / n)), n, n)
    else:
        prefill = Segment(1, chunk, chunk + (n - chunk) // 2, emits=False)
    budget = min(n, cap) if cap else n
    first = Segment(1, budget, budget + (n - budget) // 2, emits=budget == n)
    others = min(c - 1, max(1, round(decoding)))
    ttft = (Segment(others, 1, ctx), first) if others > 0 else (first,)
    in_step = max(1, round(decoding))
    return _Continuous(Step(f"c{c}:mixed", (Segment(in_step, 1, ctx), prefill)),
                       Step(f"c{c}:ttft", ttft), math.ceil(n / budget), decoding)


def _cells(arch: LLMArch, hws: Sequence[HardwareSpec], cfg: ServingConfig,
           batches: Sequence[int | str], system: Any = None) -> list[_Cell]:
    sh = Sharding.of(cfg)
    check_sharding(arch, sh)
    cells = []
    for hw in hws:
        profile = engine_profile(cfg.runtime, hw)
        check_request(arch, cfg, profile)
        where = replica_system(hw, sh, system)
        mb = max_batch(arch, hw, cfg, profile)
        dn = devices_needed(arch, hw, cfg, profile)
        for b in batches:
            batch = mb if b == "max" else _positive_int(b, "batch")
            cells.append(_Cell(hw, profile, batch, cfg.concurrency is not None, mb, dn,
                               serving_memory(arch, hw, cfg, max(batch, 1), profile), where))
    return cells


def _metrics(ttft: np.ndarray, tpot: np.ndarray, b: float, n: int, m: int,
             continuous: bool, waves: int = 1) -> dict[str, np.ndarray]:
    """The metrics from (value, lower, upper) arrays of one wave's TTFT and TPOT; the
    throughputs' lower end comes from the upper ends of the times. ``waves`` > 1 (static
    batch larger than what fits): the waves run one after the other, a request's TTFT is its
    wave's plus the mean wait ``(waves - 1) / 2`` wave latencies, e2e is the whole batch's."""
    wave = ttft + (m - 1) * tpot
    ttft = ttft + (waves - 1) / 2 * wave
    e2e = waves * wave
    swap = np.array([0, 2, 1])  # (value, lower, upper) of a rate from those of a time
    out = b / tpot[swap] if continuous else b * m / e2e[swap]
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_latency_s": e2e, "output_tokens_per_s": out,
            "total_tokens_per_s": out * (n + m) / m}


def _prediction(arch: LLMArch, cell: _Cell, cfg: ServingConfig, estimator: str,
                vals: dict[str, np.ndarray] | None, kernels: pd.DataFrame | None,
                notes: list[str]) -> ServingPrediction:
    hw = cell.hw
    nan = float("nan")
    v = {k: (float(a[0]) if vals else nan) for k, a in (vals or dict.fromkeys(METRICS)).items()}
    lower = {k: float(a[1]) for k, a in vals.items()} if vals else dict.fromkeys(METRICS, nan)
    upper = {k: float(a[2]) for k, a in vals.items()} if vals else dict.fromkeys(METRICS, nan)
    out = v["output_tokens_per_s"]
    usd = tpj = None
    k = Sharding.of(cfg).devices
    each = f" x {k} devices" if k > 1 else ""
    if vals and hw.price_usd:
        usd = k * hw.price_usd / (AMORTISATION_YEARS * SECONDS_PER_YEAR) / out * 1e6
        notes.append(f"$ per million output tokens: list price ${hw.price_usd:,.0f}{each} "
                     f"amortised over {AMORTISATION_YEARS:g} years of continuous use (no power, "
                     "hosting or idle time)")
    if vals and hw.tdp_W:
        tpj = out / (k * hw.tdp_W)
        notes.append(f"tokens per joule at the full TDP of {hw.tdp_W:g} W{each} (a lower "
                     "bound)")
    return ServingPrediction(
        model=arch.name, device=hw.id, runtime=cell.profile.name, estimator=estimator,
        config=cfg, batch=cell.batch, ttft_s=v["ttft_s"], tpot_s=v["tpot_s"],
        e2e_latency_s=v["e2e_latency_s"], output_tokens_per_s=out,
        total_tokens_per_s=v["total_tokens_per_s"], max_batch=cell.max_batch,
        memory=cell.memory, devices_needed=cell.devices_needed, lower=lower, upper=upper,
        usd_per_million_tokens=usd, tokens_per_joule=tpj, notes=tuple(dict.fromkeys(notes)),
        kernels=kernels, devices=Sharding.of(cfg).devices)


def _kv_notes(cell: _Cell, cfg: ServingConfig) -> list[str]:
    """How a quantised KV cache is costed (``precision`` "KV-cache conversion cost")."""
    dtypes = TensorDtypes.of(cfg)
    paths = KV_CONVERT_OPS.get(dtypes.kv, {})
    if dtypes.kv_bytes >= dtype_bytes(dtypes.model_dtype) or not paths:
        return []
    fp8_units = bool(has_fp8_units([cell.hw])[0])
    spec = serving_spec(cell.profile)
    cond = next(c for c in paths if APPLIES[c](np.array([fp8_units]))[0])
    if dtypes.kv in spec.native_kv and cond == f"{dtypes.kv}-units":
        return [f"{dtypes.kv} KV cache: attention reads {dtypes.kv_bytes:g} byte per element "
                f"natively on {cell.hw.id}'s {dtypes.kv} units ({cell.profile.name}): no "
                "conversion cost"]
    per = spec.kv_convert_per
    how = "emulated in software (no fp8 units)" if cond == "no-fp8-units" else "converted"
    return [f"{dtypes.kv} KV cache: attention reads {dtypes.kv_bytes:g} byte per element and "
            f"each element is {how} to {dtypes.model_dtype} inside the kernel at "
            f"{paths[cond]:g} lane operations, once per {per.replace('-', ' ')} "
            f"({cell.profile.name}); the "
            "operation counts were chosen on LLM-Inference-Bench's Llama-3-8B fp8-KV rows "
            "(A100, H100)"]


def _fit_notes(arch: LLMArch, cell: _Cell, cfg: ServingConfig) -> list[str]:
    hw = cell.hw
    sh = Sharding.of(cfg)
    if cell.max_batch == 0 and not sh.trivial:
        over = cell.memory.total_bytes - cell.memory.capacity_bytes
        return [f"{arch.name} split {sh.label()} does not fit on {sh.devices} x {hw.name}: its "
                f"fullest device needs {cell.memory.total_bytes / 2**30:.1f} GiB with one "
                f"request, {over / 2**30:.1f} GiB over its {hw.mem_capacity_bytes / 2**30:.0f} "
                "GiB; raise tp or pp; metrics not predicted"]
    if cell.max_batch == 0:
        return [f"{arch.name} does not fit on one {hw.name} "
                f"({cell.memory.weights_bytes / 2**30:.1f} GiB of weights, "
                f"{hw.mem_capacity_bytes / 2**30:.0f} GiB of memory): it needs at least "
                f"{cell.devices_needed} of them (tensor parallel, a lower bound); metrics not "
                "predicted"]
    if cell.batch > cell.max_batch and cell.continuous:
        return [f"concurrency {cell.batch} does not fit on {hw.name} at {cfg.input_tokens} + "
                f"{cfg.output_tokens} tokens (at most {cell.max_batch} requests in flight); "
                "metrics not predicted"]
    if cell.waves > 1:
        return [f"batch {cell.batch} does not fit on {hw.name} at {cfg.input_tokens} + "
                f"{cfg.output_tokens} tokens (at most {cell.max_batch}): it runs in "
                f"{cell.waves} waves of {cell.wave_batch}; TTFT includes the mean wait, e2e "
                "is the whole batch's"]
    return []


@dataclass(frozen=True)
class _Times:
    """Uncalibrated TTFT and TPOT (s) of a cell, the requests its throughput counts (static:
    the batch; continuous: those decoding each step) and its kernel table."""

    ttft_s: float
    tpot_s: float
    requests: float
    kernels: pd.DataFrame | None
    peak_notes: tuple[str, ...] = ()
    #: sequences per prefill step and per decode step (the calibration's per-sequence term).
    prefill_seqs: float = 1.0
    decode_seqs: float = 1.0
    #: (steps, tokens, sampled tokens) of the TTFT and of one TPOT step, for ``comm``.
    ttft_work: tuple[float, float, float] = (1.0, 1.0, 1.0)
    tpot_work: tuple[float, float, float] = (1.0, 1.0, 1.0)
    #: the kernel model's (lower, upper) of ``ttft_s`` and ``tpot_s``.
    ttft_band_s: tuple[float, float] | None = None
    tpot_band_s: tuple[float, float] | None = None

    @property
    def notes(self) -> list[str]:
        """The device's fallback notes of the timed kernels and the share the engine's own
        tables timed."""
        return list(self.peak_notes)


def _model_times(arch: LLMArch, cells: Sequence[_Cell], cfg: ServingConfig,
                 estimator: str, with_kernels: bool = True) -> dict[int, _Times]:
    """``_Times`` of every predictable cell of ONE engine profile, all devices and steps
    timed in one ``time_steps`` call; keyed by the cell's index in ``cells``."""
    n, m = int(cfg.input_tokens), int(cfg.output_tokens)
    spec = serving_spec(cells[0].profile)
    sh = Sharding.of(cfg)
    steps: dict[str, Step] = {}
    plan: dict[int, tuple] = {}
    for i, cell in enumerate(cells):
        if not cell.waves:
            continue
        if cell.continuous:
            micro = math.ceil(cell.wave_batch / sh.pp)
            cont = _continuous_steps(micro, n, m, spec, _per_step(cfg))
            plan[i] = ("c", cont)
            steps.update({cont.mixed.label: cont.mixed, cont.ttft.label: cont.ttft})
        else:
            st, ctx = request_steps(cell.wave_batch, n, m)
            plan[i] = ("s", ctx)
            steps.update({s.label: s for s in st})
    if not plan:
        return {}
    hws = {cells[i].hw.id: cells[i].hw for i in plan}
    devices = list(hws)
    timed = time_spec_steps(local_arch(arch, sh), list(hws.values()), list(steps.values()),
                            TensorDtypes.of(cfg), cells[0].profile, estimator,
                            cfg.spec_decode, ep=sh.ep, moe=MoeRouting(cfg.moe_imbalance))
    out = {}
    for i, (kind, extra) in plan.items():
        dev = cells[i].hw.id
        d = devices.index(dev)
        if kind == "s":
            b = cells[i].wave_batch
            r = collect_request_times(timed, b, extra, n, m, d, with_kernels=False)
            first, second = (f"b{b}:prefill", "prefill"), (f"b{b}:decode@{extra[0]}", "decode")
            out[i] = _Times(r.prefill_s, r.decode_mean_s, cells[i].batch, None,
                            prefill_seqs=b, decode_seqs=b, ttft_work=(1.0, b * n, b),
                            tpot_work=(1.0, b * _verified(cfg), b),
                            ttft_band_s=(r.prefill_lower_s, r.prefill_upper_s),
                            tpot_band_s=(r.decode_mean_lower_s, r.decode_mean_upper_s))
        else:
            first, second = (extra.ttft.label, "ttft"), (extra.mixed.label, "decode")
            out[i] = _continuous_times(arch, cells[i], cfg, extra, timed, d)
        rows = timed.device_rows(dev, [first[0], second[0]])
        notes = (*sorted({str(x) for x in rows["peak_note"] if x}),
                 *measured_share_notes(rows, cells[i].profile.name))
        kernels = pd.concat([timed.kernels(lb, dev).assign(phase_step=ph)
                             for lb, ph in (first, second)], ignore_index=True) \
            if with_kernels else None
        out[i] = replace(out[i], kernels=kernels, peak_notes=notes)
    return out


def _continuous_times(arch: LLMArch, cell: _Cell, cfg: ServingConfig, extra: _Continuous,
                      timed: Any, d: int) -> _Times:
    """``_Times`` of a continuous cell from its timed ``ttft`` and ``mixed`` steps (device
    index ``d``): TTFT = ttft steps x the ttft step, TPOT = the mixed step x the pipeline's
    round factor, each with its interval."""
    sh = Sharding.of(cfg)
    groups = cell.wave_batch / math.ceil(cell.wave_batch / sh.pp)
    rounds = pipeline_round_factor(arch, sh, groups)
    ft = [float(a[d]) * extra.ttft_steps for a in timed.of(extra.ttft.label)]
    dt = [float(a[d]) * rounds for a in timed.of(extra.mixed.label)]
    return _Times(ft[0], dt[0], extra.decoding * groups, None, decode_seqs=extra.decoding,
                  ttft_work=(extra.ttft_steps, *_step_work(extra.ttft, cfg)),
                  tpot_work=(1.0, *_step_work(extra.mixed, cfg)),
                  ttft_band_s=(ft[1], ft[2]), tpot_band_s=(dt[1], dt[2]))


def _per_step(cfg: ServingConfig) -> float:
    """Output tokens per sequence per decode step: 1, or speculative decoding's ``E``."""
    return 1.0 if cfg.spec_decode is None else cfg.spec_decode.tokens_per_step


def _verified(cfg: ServingConfig) -> int:
    """Tokens the target runs per decoding sequence per step: 1, or ``K + 1``."""
    return 1 if cfg.spec_decode is None else cfg.spec_decode.k + 1


def _step_work(step: Step, cfg: ServingConfig) -> tuple[float, float]:
    """(tokens, sampled tokens) of one engine step (the verify step under speculation)."""
    if cfg.spec_decode is not None:
        step = verify_step(step, cfg.spec_decode)[0]
    return (float(sum(s.tokens for s in step.segments)),
            float(sum(s.batch for s in step.segments if s.emits)))


@dataclass(frozen=True)
class _Comm:
    """The parallel communication of a cell's TTFT and TPOT (s) and what it is."""

    ttft: StepComm = field(default_factory=StepComm)
    tpot: StepComm = field(default_factory=StepComm)
    ttft_steps: float = 1.0

    @property
    def ttft_s(self) -> float:
        return self.ttft_steps * self.ttft.total_s


def _cell_comm(arch: LLMArch, cell: _Cell, cfg: ServingConfig, t: _Times) -> _Comm:
    """Tensor / pipeline communication of the cell's TTFT steps and one TPOT step
    (``comm.step_comm``)."""
    sh = Sharding.of(cfg)
    if sh.trivial:
        return _Comm()
    act = TensorDtypes.of(cfg).act_bytes
    steps, tokens, emit = t.ttft_work
    _, dtok, demit = t.tpot_work
    custom = serving_spec(cell.profile).custom_allreduce
    return _Comm(step_comm(arch, sh, cell.system, tokens=tokens, emit=emit, act_bytes=act,
                           custom=custom),
                 step_comm(arch, sh, cell.system, tokens=dtok, emit=demit, act_bytes=act,
                           custom=custom),
                 steps)


def _parallel_notes(cell: _Cell, cfg: ServingConfig, comm: _Comm) -> list[str]:
    """What the parallel layout is and what its communication costs."""
    sh = Sharding.of(cfg)
    if sh.trivial:
        return []
    sysm = cell.system
    notes = [f"{sh.label()}: one replica on {sh.devices} x {cell.hw.id} of {sysm.id} "
             f"({sysm.fabric.kind} {sysm.fabric.link_GBps:g} GB/s per direction); kernels and "
             "memory are one device's (the fullest), metrics the replica's; engine calibration "
             "applied to the kernel time only, then the collectives added (tensor parallel "
             f"{comm.tpot.tp_s * 1e3:.3g} ms and pipeline {comm.tpot.pp_s * 1e3:.3g} ms per "
             "decode step)"]
    if comm.tpot.tp_algorithm:
        notes.append(f"decode all-reduces: {comm.tpot.tp_algorithm.replace('_', '-')} "
                     f"({'NCCL' if comm.tpot.tp_algorithm == 'nccl' else 'the engine kernel'}); "
                     f"prefill all-reduces: {comm.ttft.tp_algorithm.replace('_', '-')}")
    if sh.tp > sysm.devices_per_node:
        notes.append(f"tp={sh.tp} exceeds the {sysm.devices_per_node} devices of a node: its "
                     "all-reduces cross the NICs")
    if sh.pp > 1:
        notes.append("pipeline parallel: " + (
            f"the running requests are split into up to {sh.pp} micro-batches in flight, one "
            "per stage (TensorRT-LLM's in-flight batching); TPOT is one micro-batch's pass "
            "through all stages" if cell.continuous else
            "a static batch passes the stages one after the other (no overlap between stages)"))
    if sh.ep > 1:
        notes.append(f"ep={sh.ep}: {sh.ep} groups of {sh.moe_tp} device(s) hold 1/{sh.ep} of "
                     "the experts each; tokens stay replicated over the tensor group and the "
                     "MLP all-reduce sums the groups' outputs (no all-to-all); the step waits "
                     "for the busiest group (uniform routing)")
    return notes


def _predict(arch: LLMArch, hws: Sequence[HardwareSpec], cfg: ServingConfig,
             batches: Sequence[int | str], estimator: str,
             with_kernels: bool = True, system: Any = None) -> list[ServingPrediction]:
    """Predictions for every device x batch (module docstring), timed per engine profile."""
    if not hws:
        raise PredictionError("no devices to predict; give at least one device")
    n, m = int(cfg.input_tokens), int(cfg.output_tokens)
    cells = _cells(arch, hws, cfg, batches, system)
    by_profile: dict[str, list[int]] = {}
    for i, cell in enumerate(cells):
        by_profile.setdefault(cell.profile.name, []).append(i)
    results: dict[int, ServingPrediction] = {}
    for idx in by_profile.values():
        group = [cells[i] for i in idx]
        profile = group[0].profile
        times = _model_times(arch, group, cfg, estimator, with_kernels)
        cal = engine_calibration(profile.name)
        used = estimator_name(step_estimator(estimator, profile))
        for j, cell in enumerate(group):
            notes = [*arch.notes, *_fit_notes(arch, cell, cfg), *_kv_notes(cell, cfg)]
            if profile.serving is None:
                notes.append(f"runtime {profile.name!r} has no [serving] table: default engine "
                             "settings (0.9 memory utilisation, no step overhead)")
            if j not in times:
                results[idx[j]] = _prediction(arch, cell, cfg, used, None, None, notes)
                continue
            t = times[j]
            kernels = t.kernels
            comm = _cell_comm(arch, cell, cfg, t)
            ttft = _calibrated(cal, "prefill", t.ttft_s, t.ttft_band_s, cell.hw,
                               t.prefill_seqs) + comm.ttft_s
            tpot = (_calibrated(cal, "decode", t.tpot_s, t.tpot_band_s, cell.hw,
                                t.decode_seqs) + comm.tpot.total_s) / _per_step(cfg)
            vals = _metrics(ttft, tpot, t.requests, n, m, cell.continuous, cell.waves)
            if cell.continuous and t.requests < cell.batch:
                notes.append(f"prefill-bound: a {serving_spec(profile).max_prefill_tokens}-"
                             f"token prefill budget per step admits {cell.batch} x "
                             f"{n} / {m} prompt tokens too slowly; only about {t.requests:.3g} of "
                             f"the {cell.batch} requests decode in each step")
            notes.extend(t.notes)
            notes.extend(_spec_notes(cfg))
            notes.extend(cal.notes(cell.hw))
            notes.extend(_parallel_notes(cell, cfg, comm))
            results[idx[j]] = replace(
                _prediction(arch, cell, cfg, used, vals, kernels, notes),
                comm_ttft_s=comm.ttft_s, comm_tpot_s=comm.tpot.total_s)
    return [results[i] for i in range(len(cells))]


def _spec_notes(cfg: ServingConfig) -> list[str]:
    sd = cfg.spec_decode
    if sd is None:
        return []
    return [f"speculative decoding ({sd.label()}): {sd.tokens_per_step:.3g} tokens per "
            f"sequence per verify step; a step = the target verifying {sd.k + 1} tokens per "
            f"sequence + {sd.k} draft steps; TPOT = step / {sd.tokens_per_step:.3g} (draft "
            "weights and KV not in the memory fit)"]


def estimator_name(estimator: Any) -> str:
    """The name of the estimator the steps were timed with (an object: its ``name``)."""
    return estimator if isinstance(estimator, str) else str(getattr(estimator, "name", estimator))


def _calibrated(cal: Any, phase: str, model_s: float, band_s: tuple[float, float] | None,
                hw: HardwareSpec, seqs: float) -> np.ndarray:
    """(value, lower, upper) of the engine time of ``model_s`` (``band_s``: its interval)."""
    lo, hi = band_s if band_s is not None else (None, None)
    return np.array(cal.apply(phase, np.array([model_s]), hw, seqs=seqs,
                              lower_s=None if lo is None else np.array([lo]),
                              upper_s=None if hi is None else np.array([hi]))).reshape(3)


def _batches(cfg: ServingConfig) -> list[int | str]:
    if cfg.concurrency is not None:
        return [cfg.concurrency]
    return [1 if cfg.batch is None else cfg.batch]


def predict_serving(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig, *,
                    estimator: str = SERVING_ESTIMATOR, system: Any = None) -> ServingPrediction:
    """The serving metrics of ``arch`` on ``hw`` for ``cfg`` (module docstring); with
    ``cfg.tp``/``pp``/``ep`` one replica over ``tp x pp`` devices of ``system`` (a
    ``hw_catalog.system.SystemSpec`` of ``hw``; None: ``replica_system``)."""
    return _predict(arch, [hw], cfg, _batches(cfg), estimator, system=system)[0]


def predict_many(arch: LLMArch, hws: Sequence[HardwareSpec], cfg: ServingConfig,
                 batches: Sequence[int | str] | None = None, *,
                 estimator: str = SERVING_ESTIMATOR,
                 kernels: bool = True, system: Any = None) -> list[ServingPrediction]:
    """``predict_serving`` for every device x batch (``batches`` None: the config's), timed
    together; device-major order. ``kernels`` False leaves ``ServingPrediction.kernels``
    None (faster for wide sweeps). ``system``: as ``predict_serving`` (every device of
    ``hws`` must be its device)."""
    return _predict(arch, list(hws), cfg, list(batches) if batches else _batches(cfg),
                    estimator, kernels, system)


def serving_table(arch: LLMArch, hws: Sequence[HardwareSpec], cfg: ServingConfig,
                  batches: Sequence[int | str] | None = None, *,
                  estimator: str = SERVING_ESTIMATOR) -> pd.DataFrame:
    """One row per device x batch (batches are concurrencies when ``cfg`` has one): the
    ``ServingPrediction.as_dict`` metrics flattened (``memory_GiB`` -> ``mem_<part>_GiB``,
    ``parallel_comm`` -> ``comm_ttft_ms``/``comm_tpot_ms``),
    ``fits``, ``max_batch``, ``devices_needed``, for charts and device comparisons."""
    rows = []
    for p in predict_many(arch, hws, cfg, batches, estimator=estimator, kernels=False):
        d = p.as_dict()
        mem = d.pop("memory_GiB")
        comm = d.pop("parallel_comm")
        d.pop("notes")
        d.pop("config")
        d.update({f"mem_{k}_GiB": v for k, v in mem.items()})
        d.update({f"comm_{k}": v for k, v in comm.items()})
        d["fits"] = p.memory.fits and p.max_batch > 0
        d["notes"] = "; ".join(p.notes)
        rows.append(d)
    return pd.DataFrame(rows)
