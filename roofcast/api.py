"""roofcast's Python API (re-exported by ``roofcast/__init__``, loaded on first use).

Three inputs, as in the design: a model (``load_model``: an ONNX path, bytes or a zoo name, its
dims bound once), a device (``device``: a catalog id, an inline what-if spec or a
HardwareSpec) and the execution settings (keywords of ``predict``/``compare``/``sweep``:
``runtime`` — the execution profile, ``runtimes()`` lists them, None: ``onnxruntime-cpu`` on
CPUs, ``pytorch-eager`` on GPUs —, ``precision``, ``mode``, ``threads``, ``inter_op``,
``fusion`` (None: the runtime's default), ``optimizer``; ``estimator`` is
a name — ``time-roofline`` (default), ``roofline``, ``no-overlap``, ``roofline+eff``,
``traffic``, ``learned``, ``auto`` — or an estimator object, e.g.
``make_estimator("traffic", overhead="additive")`` or a fitted ``train(...)`` result).

Units: seconds in fields ending ``_s`` (``total_ms``/``time_ms`` are milliseconds), bytes in
``_bytes``, FLOPs in ``flops``.

>>> import roofcast
>>> p = roofcast.predict("resnet50", "a100-40gb-pcie", batch=8)
>>> p.total_ms, p.by_bound, p.memory.total_bytes                          # doctest: +SKIP
>>> roofcast.compare("resnet50", ["a100-40gb-pcie", "h100-sxm:mem_bw_scale=2"])  # doctest: +SKIP
>>> roofcast.predict("bert_base", "h100-sxm", runtime="torch-compile")     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.models import Model, load_model, zoo_models
from roofcast.predictor.advisor import Advice
from roofcast.predictor.advisor import advise as _advise
from roofcast.predictor.compare import compare_devices
from roofcast.predictor.config import run_config
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import DEFAULT_ESTIMATOR, as_estimator, make_estimator
from roofcast.predictor.learned.data import DEFAULT_CAP, load_sources
from roofcast.predictor.learned.estimator import AutoEstimator, LearnedEstimator
from roofcast.predictor.learned.persistence import save
from roofcast.predictor.learned.training import train as _train
from roofcast.predictor.runtimes import (
    ExecutionProfile,
    get_runtime,
    resolve_runtime,
    runtime_names,
)
from roofcast.predictor.simulate import Prediction, predict_graph
from roofcast.predictor.sweep import sweep as _sweep

#: the execution settings ``predict``/``compare`` take as keywords (``RunConfig`` fields).
SETTINGS: tuple[str, ...] = ("runtime", "precision", "mode", "threads", "inter_op", "fusion",
                             "optimizer")


def device(spec: str | HardwareSpec) -> HardwareSpec:
    """A device: a catalog id (``"a100-40gb-pcie"``), an inline what-if spec
    (``"h100-sxm:mem_bw_scale=2"``: the catalog device with its memory bandwidth doubled) or a
    HardwareSpec (returned as is). Unknown ids raise HardwareSpecError listing close ids."""
    return get_device(spec)


def _model(model: Any, batch: int | None, dims: Mapping[str, int] | None) -> Model:
    """``model`` loaded (or re-bound) with ``batch``/``dims`` when given."""
    bound = {**(dims or {}), **({} if batch is None else {"batch": batch})}
    return load_model(model, bound)


def predict(model: Any, hw: str | HardwareSpec, *, batch: int | None = None,
            dims: Mapping[str, int] | None = None, estimator: Any = DEFAULT_ESTIMATOR,
            allow_incomplete: bool = False, **settings: Any) -> Prediction:
    """Predict one run of ``model`` on ``hw``.

    ``model``: a ``Model`` (``load_model``) or anything ``load_model`` takes; ``batch`` and
    ``dims`` (re)bind its dims (batch defaults to 1); ``hw``: see ``device``; ``settings``:
    ``runtime`` (None: the device kind's default; one that does not run on ``hw`` is refused,
    naming those that do), ``precision`` (``fp32``), ``mode`` (``infer``|``train``), ``threads`` (CPU threads),
    ``inter_op`` (critical-path time), ``fusion``, ``optimizer``. The ``Prediction`` holds
    ``per_op`` (one row per kernel, seconds), ``total_s``/``total_ms`` (sequential sum),
    ``time_s`` (the step: critical path with ``inter_op``), ``lower_s``/``upper_s`` (interval),
    ``by_op_type``/``by_bound``/``by_phase``, ``memory`` (bytes), ``estimator`` and the
    learned estimators' OOD flags (``ood``, ``ood_ops``, ``summary``).
    """
    m = _model(model, batch, dims)
    config = run_config(m.graph, **_settings(settings))
    spec = device(hw)
    resolve_runtime(config.runtime, spec.kind)  # refused before any work
    return predict_graph(m.graph, spec, config, as_estimator(estimator),
                         allow_incomplete=allow_incomplete)


def compare(model: Any, hws: Sequence[str | HardwareSpec], *, batch: int | None = None,
            dims: Mapping[str, int] | None = None, estimator: Any = DEFAULT_ESTIMATOR,
            baseline: Any = None, allow_incomplete: bool = False,
            **settings: Any) -> pd.DataFrame:
    """One row per device of ``hws`` (``predictor.compare.COMPARE_COLUMNS``): ``time_s`` with
    its interval ``lower_s``..``upper_s``, ``speedup`` over ``baseline`` (default: the first
    device) with ``speedup_at_lower``/``speedup_at_upper`` (both devices at their lower / upper bound), throughput (samples/s), cost and power per
    throughput, memory (bytes) and whether it fits, and the ``runtime`` modelled on the device.
    Keywords as for ``predict``."""
    m = _model(model, batch, dims)
    config = run_config(m.graph, **_settings(settings))
    runtimes = _device_runtimes(hws, config.runtime)
    df = compare_devices(_source(m), list(hws), config, as_estimator(estimator),
                         baseline=baseline, allow_incomplete=allow_incomplete)
    return df.assign(runtime=df["device"].map(runtimes))


def sweep(model: Any, hws: Sequence[str | HardwareSpec], batches: Sequence[int] = (1,), *,
          precisions: Sequence[str] = ("fp32",), modes: Sequence[str] = ("infer",),
          dims: Mapping[str, int] | None = None, estimator: Any = DEFAULT_ESTIMATOR,
          baseline: Any = None, runtime: str | None = None, **options: Any) -> pd.DataFrame:
    """Every (device, batch, precision, mode) cell in one vectorised call: one row per cell
    (``predictor.sweep.SWEEP_COLUMNS``: ``time_s``, ``speedup``, throughput in samples/s,
    memory in bytes, ``fits``, throughput per USD and per W, ..., and the ``runtime`` modelled on
    the device). ``dims``: the model's other dims; ``runtime``: as for ``predict``;
    ``options``: ``fusion``, ``inter_op``, ``optimizer``, ``threads``, ``allow_incomplete``."""
    m = _model(model, None, dims)
    runtimes = _device_runtimes(hws, runtime)
    df = _sweep(_source(m), list(hws), list(batches), list(precisions), list(modes),
                as_estimator(estimator), baseline=baseline, runtime=runtime, **options)
    return df.assign(runtime=df["device"].map(runtimes))


def advise(model: Any, hw: str | HardwareSpec, objective: str = "latency", *,
           batch: int = 1, dims: Mapping[str, int] | None = None, estimator: Any = "auto",
           runtime: str | None = None, **options: Any) -> Advice:
    """The predicted-best run settings (threads, inter-op, batch, precision, fusion) of
    ``model`` on ``hw`` for ``objective`` (``latency`` or ``throughput``), ranked against ONNX
    Runtime's defaults, with reasons (``predictor.advisor``); ``runtime``: as for ``predict``.
    ``options``: ``max_batch``, ``precisions``, ``modes``, ``fusions``."""
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
    specs = [device(h) for h in hws]
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


def _settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The RunConfig settings among keyword arguments; an unknown keyword is an error."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise PredictionError(f"unknown setting(s) {unknown}; use batch=, dims=, estimator=, "
                              f"allow_incomplete= or one of: {', '.join(SETTINGS)}")
    return dict(settings)


def _source(model: Model) -> Callable[[int], Any]:
    return model.graph_at


__all__ = ["AutoEstimator", "ExecutionProfile", "Model", "Prediction", "advise", "compare",
           "device", "load_model", "make_estimator", "predict", "runtimes", "sweep", "train",
           "zoo_models"]
