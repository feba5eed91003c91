"""roofcast's Python API (re-exported by ``roofcast/__init__``, loaded on first use).

Three inputs: a model (``load_model``: ONNX path, bytes or zoo name, dims bound once), a device
(``device``: catalog id, what-if spec or HardwareSpec) and execution settings (keywords of
``predict``/``compare``/``sweep``: ``runtime`` — None: the device kind's default —,
``precision``, ``mode``, ``threads``, ``inter_op``, ``fusion``, ``optimizer``; ``estimator``: a
name or an estimator object). LLM serving: ``llm``, ``llm_configs``; several devices:
``roofcast.parallel_api``. Units: seconds in ``_s`` fields (``_ms``: milliseconds), bytes in
``_bytes``, FLOPs in ``flops``. The CLI commands call these functions.

>>> import roofcast
>>> p = roofcast.predict("resnet50", "a100-40gb-pcie", batch=8)
>>> p.total_ms, p.by_bound, p.memory.total_bytes                          # doctest: +SKIP
>>> roofcast.compare("resnet50", ["a100-40gb-pcie", "h100-sxm:mem_bw_scale=2"])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

import roofcast.api_checks as checks
from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.graph_import.budgets import TOKENS
from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.models import Model, load_model, zoo_models
from roofcast.parallel_api import (
    PLAN_FIELDS,
    predict_parallel,
    system,
    systems,
    target_system,
)
from roofcast.parallel_api import plan as parallel_plan
from roofcast.predictor.advisor import OBJECTIVES, Advice
from roofcast.predictor.advisor import advise as _advise
from roofcast.predictor.config import run_config
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import as_estimator, make_estimator
from roofcast.predictor.learned.estimator import AutoEstimator, LearnedEstimator
from roofcast.predictor.runtimes import (
    ExecutionProfile,
    get_runtime,
    resolve_runtime,
    runtime_names,
)
from roofcast.predictor.simulate import Prediction, predict_graph

if TYPE_CHECKING:
    from roofcast.graph_import.llm.arch import LLMArch
    from roofcast.predictor.llm.types import ServingConfig, ServingPrediction
    from roofcast.predictor.parallel.types import ParallelPrediction

#: the execution settings ``predict``/``compare`` take as keywords (``RunConfig`` fields).
SETTINGS: tuple[str, ...] = ("runtime", "precision", "mode", "threads", "inter_op", "fusion",
                             "optimizer")
#: keywords of ``predict`` that make it a multi-device prediction (``predict_parallel``).
PARALLEL_KEYWORDS: tuple[str, ...] = ("system", "devices", "global_batch", "seq_tokens",
                                      *PLAN_FIELDS)


def device(spec: str | HardwareSpec) -> HardwareSpec:
    """A device: a catalog id (``"a100-40gb-pcie"``), an inline what-if spec
    (``"h100-sxm:mem_bw_scale=2"``: the catalog device with its memory bandwidth doubled) or a
    HardwareSpec (returned as is). Unknown ids raise HardwareSpecError listing close ids."""
    return get_device(checks.device_ref(spec, optional=False))


def _model(model: Any, batch: int | None, dims: Mapping[str, int] | None) -> Model:
    """``model`` loaded (or re-bound) with ``batch``/``dims`` when given."""
    checks.batch(batch)
    bound = {**(checks.dims(dims) or {}), **({} if batch is None else {"batch": batch})}
    return load_model(model, bound)


def predict(model: Any, hw: str | HardwareSpec | None = None, *, batch: int | None = None,
            dims: Mapping[str, int] | None = None, estimator: Any = None,
            allow_incomplete: bool = False, **settings: Any) -> Prediction | ParallelPrediction:
    """Predict one run of ``model`` on ``hw``.

    ``model``: a ``Model`` (``load_model``) or anything ``load_model`` takes; ``batch`` and
    ``dims`` (re)bind its dims (batch defaults to 1); ``hw``: see ``device``; ``settings``:
    ``runtime`` (None: the device kind's default; one that does not run on ``hw`` is refused,
    naming those that do), ``precision`` (``fp32``), ``mode`` (``infer``|``train``), ``threads``
    (CPU threads), ``inter_op`` (critical-path time), ``fusion``, ``optimizer``. The
    ``Prediction`` holds ``per_op`` (one row per kernel, seconds), ``total_s``/``total_ms``
    (sequential sum), ``time_s`` (the step: critical path with ``inter_op``),
    ``lower_s``/``upper_s`` (interval), ``by_op_type``/``by_bound``/``by_phase``, ``memory``
    (bytes), ``estimator`` (None: ``time-roofline`` on one device, ``roofline+eff`` on several)
    and the learned estimators' OOD flags (``ood``, ``ood_ops``, ``summary``).

    Several devices: any of ``system=`` (a catalog system or what-if, ``systems()``),
    ``devices=`` (N of ``hw``), ``dp=``, ``tp=``, ``pp=``, ``ep=``, ``micro_batches=``,
    ``zero=``, ``sequence_parallel=``, ``recompute=``, ``global_batch=`` (the whole step's
    samples; ``batch`` is the one-device option) predicts one step of that plan and returns a
    ``ParallelPrediction`` (``roofcast.parallel_api.predict_parallel``: ``step_s`` = compute +
    exposed communication + pipeline bubble + optimizer, per-device ``memory``, ``fits``).

    >>> p = roofcast.predict("bert_base", system="hgx-h100", tp=2, global_batch=64,
    ...                      mode="train", dims={"sequence": 128})          # doctest: +SKIP
    >>> p.step_s, p.exposed_comm_s, p.memory.fits                           # doctest: +SKIP
    """
    parallel = {k: settings.pop(k) for k in PARALLEL_KEYWORDS if k in settings}
    if parallel:
        if batch is not None:
            raise PredictionError("batch= is the one-device batch; on several devices give "
                                  "global_batch= (the whole step's samples)")
        if allow_incomplete:
            raise PredictionError("allow_incomplete= is a one-device option; a multi-device "
                                  "step needs every kernel's cost")
        settings.setdefault("mode", "infer")  # as on one device
        return predict_parallel(model, hw=hw, dims=dims, estimator=estimator,
                                **parallel, **_settings(settings))
    if hw is None:
        raise PredictionError("give hw= (a device), or system= / devices= for several devices")
    checks.device_ref(hw)
    m = _model(model, batch, dims)
    config = run_config(m.graph, **_settings(settings))
    spec = device(hw)
    resolve_runtime(config.runtime, spec.kind)  # refused before any work
    return predict_graph(m.graph, spec, config,
                         as_estimator(GRAPH_ESTIMATOR if estimator is None else estimator),
                         allow_incomplete=allow_incomplete)


def compare(model: Any, hws: Sequence[str | HardwareSpec], *, batch: int | None = None,
            dims: Mapping[str, int] | None = None, estimator: Any = GRAPH_ESTIMATOR,
            baseline: Any = None, allow_incomplete: bool = False,
            **settings: Any) -> pd.DataFrame:
    """One row per device of ``hws`` (``predictor.compare.COMPARE_COLUMNS``): ``time_s`` with
    its interval ``lower_s``..``upper_s``, ``speedup`` over ``baseline`` (default: the first
    device) with ``speedup_at_lower``/``speedup_at_upper`` (both devices at their lower / upper
    bound), throughput (samples/s), cost and power per throughput, memory (bytes) and whether
    it fits, and the ``runtime`` modelled on the device. Keywords as for ``predict``."""
    from roofcast.predictor.compare import compare_devices

    runtimes = _device_runtimes(hws, settings.get("runtime"))  # refused before any work
    m = _model(model, batch, dims)
    config = run_config(m.graph, **_settings(settings))
    df = compare_devices(_source(m), list(hws), config, as_estimator(estimator),
                         baseline=baseline, allow_incomplete=allow_incomplete)
    return df.assign(runtime=df["device"].map(runtimes))


def sweep(model: Any, hws: Sequence[str | HardwareSpec], batches: Sequence[int] = (1,), *,
          precisions: Sequence[str] = ("fp32",), modes: Sequence[str] = ("infer",),
          dims: Mapping[str, int] | None = None, estimator: Any = GRAPH_ESTIMATOR,
          baseline: Any = None, runtime: str | None = None, **options: Any) -> pd.DataFrame:
    """Every (device, batch, precision, mode) cell in one vectorised call: one row per cell
    (``predictor.sweep.SWEEP_COLUMNS``: ``time_s``, ``speedup``, throughput in samples/s,
    memory in bytes, ``fits``, throughput per USD and per W, ..., and the ``runtime`` modelled on
    the device). ``dims``: the model's other dims; ``runtime``: as for ``predict``;
    ``options``: ``fusion``, ``inter_op``, ``optimizer``, ``threads``, ``allow_incomplete``."""
    from roofcast.predictor.sweep import sweep as _sweep

    runtimes = _device_runtimes(hws, runtime)  # refused before any work
    batches = [checks.batch(b, "batches") for b in checks.sequence(batches, "batches")]
    precisions = checks.sequence(precisions, "precisions", "['fp32', 'fp16']")
    modes = checks.sequence(modes, "modes", "['infer', 'train']")
    m = _model(model, None, dims)
    df = _sweep(_source(m), list(hws), list(batches), list(precisions), list(modes),
                as_estimator(estimator), baseline=baseline, runtime=runtime, **options)
    return df.assign(runtime=df["device"].map(runtimes))


def advise(model: Any, hw: str | HardwareSpec, objective: str = "latency", *,
           batch: int = 1, dims: Mapping[str, int] | None = None,
           estimator: Any = GRAPH_ESTIMATOR,
           runtime: str | None = None, **options: Any) -> Advice:
    """The predicted-best run settings (threads, inter-op, batch, precision, fusion) of
    ``model`` on ``hw`` for ``objective`` (``latency`` or ``throughput``), ranked against the
    defaults of the runtime that runs on ``hw``, with reasons (``predictor.advisor``);
    ``runtime``: as for ``predict``. ``options``: ``max_batch``, ``precisions``, ``modes``,
    ``fusions``."""
    checks.batch(batch)
    checks.batch(options.get("max_batch"), "max-batch")
    checks.device_ref(hw, optional=False)
    m = _model(model, batch, dims)
    spec = device(hw)
    resolve_runtime(runtime, spec.kind)  # refused before any work
    return _advise(_source(m), spec, objective, batch=batch,
                   estimator=as_estimator(estimator), runtime=runtime, **options)


def runtimes() -> tuple[ExecutionProfile, ...]:
    """Every execution profile: the built-in runtimes, then the user's (``$ROOFCAST_RUNTIME_DIR``,
    else ``~/.config/roofcast/runtimes``; a user file with a problem raises PredictionError
    naming it). Each has ``name``, ``description``, ``device_kinds``, its kernel-mapping
    ``patterns``, ``dispatch_floor_us`` per device kind, math defaults and ``source``."""
    return tuple(get_runtime(name) for name in runtime_names())


def _device_runtimes(hws: Sequence[str | HardwareSpec], runtime: str | None) -> dict[str, str]:
    """Device id -> the runtime modelled on it (``runtime``, else its kind's default); a
    runtime that does not run on one of the devices is refused before any work."""
    specs = [device(h) for h in checks.device_list(hws, "hws")]
    return {s.id: resolve_runtime(runtime, s.kind).name for s in specs}


def train(sources: Sequence[str] = ("bundled", "public"), *, output: str | Path | None = None,
          devices: Sequence[str] | None = None, cap: int | None = None, quick: bool = False,
          store: str | Path | None = None, mode: str = "auto",
          progress: Callable[[str], None] | None = None) -> LearnedEstimator:
    """Train the learned per-family predictors on measured rows (``sources``: ``bundled``,
    ``public``, ``store`` or a CSV/Parquet file; ``predictor.learned.training.train``) and
    return a fitted ``learned``/``auto`` estimator (``mode``) holding the model — pass it as
    ``estimator=`` to ``predict``/``compare``/``sweep``/``advise``. ``output``: also save the
    model to this folder (XGBoost UBJ + metadata.json). The validation tables are in the
    returned estimator's ``training_``."""
    from roofcast.predictor.learned.data import DEFAULT_CAP, load_sources
    from roofcast.predictor.learned.persistence import save
    from roofcast.predictor.learned.training import train as _train

    sources = checks.distinct_names(sources, "from", "['bundled', 'public']")
    if devices is not None:
        devices = checks.distinct_names(devices, "devices", "['h100-sxm']")
    checks.optional_count(cap, "cap", None)
    if quick and cap is None:
        cap = DEFAULT_CAP // 5  # as `roofcast train --quick`
    extra = {} if cap is None else {"cap": cap}
    ts = load_sources(list(sources), devices=list(devices) if devices else None,
                      store_path=None if store is None else str(store), say=progress, **extra)
    result = _train(ts, quick=quick, progress=progress, meta={"sources": list(sources)})
    if output is not None:
        save(result.model, output)
    est = make_estimator(mode)
    est.model_ = result.model
    est.training_ = result
    return est


#: the JSON keys of a serving prediction's metrics (``ServingPrediction.as_dict``), each with
#: its ``_lower``/``_upper`` interval end.
LLM_METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "e2e_latency_ms", "output_tokens_per_s",
                                "total_tokens_per_s")
#: the parts of ``as_dict()["memory_GiB"]`` -> the flat column of ``llm_row``.
LLM_MEMORY: dict[str, str] = {"total": "memory_GiB", "weights": "weights_GiB",
                              "kv_cache": "kv_cache_GiB", "activations": "activations_GiB",
                              "reserve": "reserve_GiB", "capacity": "capacity_GiB"}


def llm(model: Any, hw: str | HardwareSpec | Sequence[str | HardwareSpec] | None = None, *,
        input_tokens: int = 512, output_tokens: int = 128, batch: int | None = None,
        concurrency: int | str | None = None, weights: str | None = None,
        kv_cache: str | None = None, activations: str = "fp16", runtime: str | None = None,
        estimator: str | None = None, system: Any = None, devices: int | None = None,
        tp: int = 1, pp: int = 1, ep: int = 1, rate: float | None = None,
        trace: str | Path | None = None, simulate: bool | None = None,
        slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None,
        spec_decode: Any = None, moe_imbalance: float = 1.0,
        **sim: Any) -> ServingPrediction | pd.DataFrame:
    """LLM serving of ``model`` on ``hw``: time to first token, time per output token,
    end-to-end latency, tokens/s, memory fit.

    ``model``: a bundled config name (``llm_configs()``), a Hugging Face id
    (``meta-llama/Llama-3.1-70B``), a ``config.json`` path (or its folder), an ONNX decoder
    path or its bytes, or an ``LLMArch``. ``hw``: one device (see ``device``) -> a
    ``ServingPrediction``; a list of devices -> a DataFrame, one row per device
    (``llm_frame``). ``input_tokens``/``output_tokens``: prompt and generated tokens per
    request. ``batch``: static batching, ``batch`` requests together; ``concurrency``:
    continuous batching with that many requests in flight (``"max"``: as many as fit in memory);
    at most one of the two (neither: batch 1). ``weights`` (``fp16``, ``bf16``, ``fp8``,
    ``int8``, ``int4``, ...: weight-only quantisation below 16 bits; None: the dtype the model's
    config or quantized repack stores them in, else ``fp16``), ``kv_cache`` (None: the
    activations' dtype), ``activations``: dtypes per tensor class. ``runtime``: the serving
    engine (``vllm``, ``tensorrt-llm``, ``llama.cpp``; None: the device kind's default
    engine). ``estimator``: the kernel-time estimator (None: the serving model's default).
    ``spec_decode``: speculative decoding, a ``predictor.llm.spec_decode.SpecDecode``
    (``parse_spec("mtp:3", 0.7)``, ``parse_spec("draft:llama-3.2-1b:4", 0.6)``) or None.
    ``moe_imbalance``: max / mean load of the expert-parallel groups (>= 1; 1: uniform
    routing; a MoE model with ``ep > 1`` only).

    The prediction holds seconds (``ttft_s``, ``tpot_s``, ``e2e_latency_s``), tokens/s
    (``output_tokens_per_s``, ``total_tokens_per_s``) with intervals (``lower``/``upper``),
    ``max_batch`` (the largest batch/concurrency that fits at these lengths, 0: the model does
    not fit), ``memory`` (bytes), ``devices_needed``, ``usd_per_million_tokens`` and
    ``tokens_per_joule`` (None where the catalog has no price / power), ``notes``;
    ``as_dict()`` gives the JSON record (milliseconds, GiB).

    Example (run by ``tests/test_api_llm.py``):

    >>> import roofcast
    >>> p = roofcast.llm("llama-3.1-8b", "h100-sxm", input_tokens=1024, output_tokens=128)
    >>> p.device, p.config.input_tokens, p.ttft_s < p.e2e_latency_s
    ('h100-sxm', 1024, True)
    >>> record = p.as_dict()             # milliseconds, tokens/s, GiB
    >>> sorted(k for k in record if k.endswith("_per_s"))
    ['output_tokens_per_s', 'total_tokens_per_s']
    >>> df = roofcast.llm("llama-3.1-70b", ["h100-sxm", "h200", "mi300x"],
    ...                   input_tokens=2048, output_tokens=256, weights="fp8")
    >>> list(df["device"]), float(df["speedup"].iloc[0])
    (['h100-sxm', 'h200', 'mi300x'], 1.0)
    >>> df[["device", "ttft_ms", "tpot_ms", "output_tokens_per_s", "max_batch"]]  # doctest: +SKIP

    Several devices serving one replica: ``tp`` (tensor-parallel ranks: heads, FFN and vocab
    split, two all-reduces per layer per step), ``pp`` (pipeline stages of layers), ``ep``
    (expert-parallel ranks) on ``system`` (a catalog system or what-if; ``hw`` is then its
    device) or on ``devices`` of ``hw`` (default tp x pp of it, one node);
    ``predict_serving(..., system=)`` times the kernels per device and the collectives on the
    system's links. ``plan(model, system, mode="serve")`` ranks every (tp, pp) instead.

    ``rate`` (requests/s), ``trace`` (a CSV) or ``simulate=True`` (with ``concurrency``: a
    closed loop): the request-level simulation, one row per device (``llm_sim_api``; SLOs and
    its other keywords there).
    Long because: the one entry point of serving; its docstring names every keyword.
    """
    _check_llm(hw, system, input_tokens=input_tokens, output_tokens=output_tokens,
               batch=batch, concurrency=concurrency, devices=devices, tp=tp, pp=pp, ep=ep)
    if weights is None:  # the model's stored dtype (reads the model once, passed on as is)
        model = llm_arch(model)
        weights = model.weight_dtype or "fp16"
    cfg = _serving_config(input_tokens=input_tokens, output_tokens=output_tokens, batch=batch,
                          concurrency=concurrency, weights=weights, kv_cache=kv_cache,
                          activations=activations, runtime=runtime, tp=tp, pp=pp, ep=ep,
                          spec_decode=checks.spec_decode(spec_decode),
                          moe_imbalance=moe_imbalance)
    sim.update(rate=rate, trace=trace, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms)
    if simulate or any(v is not None for v in sim.values()):
        return _llm_simulated(model, hw, cfg, simulate, system, devices, estimator, sim)
    if system is not None or devices is not None:
        return _llm_on_systems(model, hw, cfg, system, devices, estimator)
    return _llm_on_devices(model, hw, cfg, estimator)


def plan(model: Any, system: Any = None, *, rate: float | None = None,
         slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None,
         **options: Any) -> Any:
    """Rank the plans of ``model``: ``parallel_api.plan`` (train / infer / serve by tokens/s);
    with ``rate`` (requests/s) and ``slo_ttft_ms``/``slo_tpot_ms``: the capacity planner
    (``llm_sim_api.plan_serve``), the cheapest device of ``hw`` (one or a list) or of
    ``system`` with its tensor-parallel degree and replica count meeting the SLOs at that
    rate -> a DataFrame ranked by cost; ``search_disagg=True`` also tries prefill/decode
    disaggregation, ``spec_decode=`` (a ``SpecDecode``) also speculative decoding."""
    if rate is not None:
        return _plan_serve(model, system, rate, slo_ttft_ms, slo_tpot_ms, options)
    if slo_ttft_ms is not None or slo_tpot_ms is not None:
        raise TypeError("slo_ttft_ms= / slo_tpot_ms= need rate= (the capacity planner)")
    return parallel_plan(model, system, **options)


def _llm_simulated(model: Any, hw: Any, cfg: ServingConfig, simulate: Any, system: Any,
                   devices: Any, estimator: Any, sim: dict[str, Any]) -> pd.DataFrame:
    """``llm``'s simulated road: ``sim`` holds rate, trace, the SLOs and the other keywords
    of ``llm_sim_api.SIM_KEYWORDS``."""
    from roofcast.llm_sim_api import llm_simulated, sim_spec

    rate, trace = sim.pop("rate"), sim.pop("trace")
    if not simulate and rate is None and trace is None:
        given = ", ".join(k for k, v in sim.items() if v is not None)
        raise TypeError(f"simulation keywords ({given}) need rate=, trace= or simulate=True")
    spec = sim_spec(rate=rate, trace=trace, concurrency=cfg.concurrency,
                    slo_ttft_ms=sim.pop("slo_ttft_ms"), slo_tpot_ms=sim.pop("slo_tpot_ms"),
                    sim=sim)
    return llm_simulated(llm_arch(model), hw, cfg, spec, system=system, devices=devices,
                         estimator=estimator)


def _plan_serve(model: Any, system: Any, rate: Any, slo_ttft_ms: Any, slo_tpot_ms: Any,
                options: dict[str, Any]) -> pd.DataFrame:
    """``plan(..., rate=...)``: the checked arguments to ``llm_sim_api.plan_serve``."""
    from roofcast.llm_sim_api import plan_serve, sim_spec

    options.pop("mode", None)
    hw, estimator = options.pop("hw", None), options.pop("estimator", None)
    search = {k: options.pop(k) for k in ("search_disagg", "spec_decode") if k in options}
    if "spec_decode" in search:
        search["spec_decode"] = checks.spec_decode(search["spec_decode"])
    lengths = {k: options.pop(k) for k in ("input_tokens", "output_tokens") if k in options}
    dtypes = {k: options.pop(k) for k in ("weights", "kv_cache", "runtime") if k in options}
    _check_llm(hw, system, input_tokens=lengths.get("input_tokens", 512),
               output_tokens=lengths.get("output_tokens", 128), batch=None, concurrency=None)
    if slo_ttft_ms is None and slo_tpot_ms is None:
        raise PredictionError("give slo_ttft_ms= and/or slo_tpot_ms=: the SLOs to meet")
    spec = sim_spec(rate=rate, trace=None, concurrency=None, slo_ttft_ms=slo_ttft_ms,
                    slo_tpot_ms=slo_tpot_ms, sim={"requests": 400, **options})
    cfg = _serving_config(**lengths, **dtypes, tp=1, pp=1, ep=1)
    return plan_serve(llm_arch(model), cfg, spec, hw=hw, system=system, estimator=estimator,
                      **search)


def _check_llm(hw: Any, system: Any, *, input_tokens: Any, output_tokens: Any, batch: Any,
               concurrency: Any, **counts: Any) -> None:
    """``llm``'s arguments (``api_checks``): devices, lengths, batch, concurrency, degrees."""
    checks.device_refs(hw)
    checks.system_ref(system)
    checks.count(input_tokens, "input-tokens", TOKENS)
    checks.count(output_tokens, "output-tokens", TOKENS)
    checks.batch(batch)
    if concurrency != "max":
        checks.batch(concurrency, "concurrency")
    checks.degrees(**counts)


def _serving_config(*, tp: int, pp: int, ep: int, **settings: Any) -> ServingConfig:
    """``llm``'s keywords as a ``ServingConfig`` (parallel degrees of 1 left to its defaults).

    Checked by the serving model (positive lengths within the context, one of batch and
    concurrency, known dtypes the engine runs), which raises PredictionError naming the value.
    """
    from roofcast.predictor.llm.types import ServingConfig

    degrees = {k: v for k, v in {"tp": tp, "pp": pp, "ep": ep}.items() if v != 1}
    return ServingConfig(**settings, **degrees)


def _llm_on_devices(model: Any, hw: Any, cfg: ServingConfig,
                    estimator: str | None) -> ServingPrediction | pd.DataFrame:
    """``llm`` on one device (one prediction) or on each of a list (a DataFrame); every device
    resolved before any work."""
    from roofcast.predictor.llm.serving import predict_many, predict_serving

    if hw is None:
        raise PredictionError("give hw= (a device or a list), or system= / devices= for "
                              "several devices serving one replica")
    one = isinstance(hw, str | HardwareSpec)
    specs = [device(hw)] if one else _devices(hw)  # every device checked before any work
    arch = llm_arch(model)
    kw = {} if estimator is None else {"estimator": estimator}
    if one:
        return predict_serving(arch, specs[0], cfg, **kw)
    return llm_frame(predict_many(arch, specs, cfg, **kw))  # all devices timed together


def _llm_on_systems(model: Any, hw: Any, cfg: Any, system: Any, devices: int | None,
                    estimator: str | None) -> ServingPrediction | pd.DataFrame:
    """``llm`` on a system (one prediction) or on ``devices`` of each device of ``hw`` (one
    prediction for one device, a DataFrame for a list); every system resolved before any
    work."""
    from roofcast.predictor.llm.serving import predict_serving

    if system is not None and (hw is not None or devices is not None):
        raise PredictionError("give system= or hw= with devices=, not both (a system has its "
                              "own devices)")
    if system is not None:
        targets = [target_system(system)]
        one = True
    else:
        if hw is None:
            raise PredictionError("devices= needs hw=: the device of which to take N")
        one = isinstance(hw, str | HardwareSpec)
        targets = [target_system(hw=h, devices=devices) for h in ([hw] if one else hw)]
    arch = llm_arch(model)
    kw = {} if estimator is None else {"estimator": estimator}
    preds = [predict_serving(arch, device(t.device), cfg, system=t, **kw) for t in targets]
    return preds[0] if one else llm_frame(preds)


def llm_configs() -> pd.DataFrame:
    """The bundled LLM configs, one row each: ``name``, ``family``, ``params`` and
    ``active_params`` (count; MoE: a token's share), ``layers``, ``d_model``, ``heads``,
    ``kv_heads``, ``head_dim``, ``max_context`` (tokens), ``kv_bytes_per_token_fp16`` (bytes
    the KV cache grows by per token at 16 bits: 2 x layers x kv_heads x head_dim x 2)."""
    from roofcast.graph_import.llm.load import bundled_llms, load_llm

    rows = []
    for name in bundled_llms():
        a = load_llm(name)
        rows.append({"name": name, "family": a.family, "params": a.params,
                     "active_params": a.active_params, "layers": a.n_layers,
                     "d_model": a.d_model, "heads": a.n_heads, "kv_heads": a.n_kv_heads,
                     "head_dim": a.head_dim, "max_context": a.max_context,
                     "kv_bytes_per_token_fp16": a.kv_elements_per_token() * 2})
    return pd.DataFrame(rows)


def llm_arch(model: Any) -> LLMArch:
    """``model`` as an ``LLMArch`` (one as is; anything else through ``load_llm``)."""
    from roofcast.graph_import.llm.arch import LLMArch
    from roofcast.graph_import.llm.load import load_llm

    return model if isinstance(model, LLMArch) else load_llm(model)


def llm_frame(preds: Sequence[ServingPrediction]) -> pd.DataFrame:
    """One row per prediction (``llm_row``) plus ``speedup``: output tokens/s over the first
    row's (same model, lengths and dtypes, so the ratio of serving throughput)."""
    rows = [llm_row(p) for p in preds]
    df = pd.DataFrame(rows)
    if len(df):
        base = float(df["output_tokens_per_s"].iloc[0])
        df.insert(df.columns.get_loc("total_tokens_per_s_upper") + 1, "speedup",
                  df["output_tokens_per_s"] / base if base > 0 else float("nan"))
    return df


def llm_row(pred: ServingPrediction) -> dict[str, Any]:
    """A prediction as one flat record: ``as_dict()``'s (``device``, ``runtime``,
    ``estimator``, ``batch``, ``ttft_ms``, ``tpot_ms``, ``e2e_latency_ms``,
    ``output_tokens_per_s``, ``total_tokens_per_s`` each with its ``_lower``/``_upper`` end —
    NaN where not predicted —, ``max_batch``, ``devices_needed``, ``usd_per_million_tokens``,
    ``tokens_per_joule``) with ``memory_GiB`` the total and the parts as ``weights_GiB``,
    ``kv_cache_GiB``, ``activations_GiB``, ``reserve_GiB``, ``capacity_GiB``; ``fits`` (one
    request at this batch fits the device) and ``notes`` (a tuple of sentences)."""
    d = pred.as_dict()
    row: dict[str, Any] = {k: d[k] for k in ("device", "runtime", "estimator", "batch")}
    for key in LLM_METRICS:
        for k in (key, f"{key}_lower", f"{key}_upper"):
            row[k] = float("nan") if d[k] is None else d[k]
    row.update({"max_batch": d["max_batch"], "devices_needed": d["devices_needed"]})
    row.update({col: d["memory_GiB"][part] for part, col in LLM_MEMORY.items()})
    row.update({"fits": bool(pred.memory.fits and pred.max_batch > 0),
                "usd_per_million_tokens": d["usd_per_million_tokens"],
                "tokens_per_joule": d["tokens_per_joule"], "notes": tuple(pred.notes)})
    return row


def _devices(hws: Sequence[str | HardwareSpec]) -> list[HardwareSpec]:
    """Every device of a list, resolved before any work (an unknown id lists close ones)."""
    specs = [device(h) for h in hws]
    if not specs:
        raise PredictionError("no device given; pass one id or a list such as "
                              "['h100-sxm', 'h200']")
    return specs


def _settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The RunConfig settings among keyword arguments; an unknown keyword is an error."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise PredictionError(f"unknown setting(s) {unknown}; use batch=, dims=, estimator=, "
                              f"allow_incomplete= or one of: {', '.join(SETTINGS)}")
    return dict(settings)


def _source(model: Model) -> Callable[[int], Any]:
    return model.graph_at


__all__ = ["OBJECTIVES", "AutoEstimator", "ExecutionProfile", "Model", "Prediction", "advise",
           "compare", "device", "llm", "llm_configs", "load_model", "make_estimator", "plan",
           "predict", "predict_parallel", "runtimes", "sweep", "system", "systems", "train",
           "zoo_models"]
