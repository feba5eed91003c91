"""Domain types of LLM serving predictions (frozen; SI units inside: seconds, bytes).

JSON/CLI keys (``ServingPrediction.as_dict``) carry display units: ``ttft_ms``, ``tpot_ms``,
``e2e_latency_ms``, ``output_tokens_per_s``, ``total_tokens_per_s``, ``max_batch``,
``memory_GiB`` (and the ``*_lower``/``*_upper`` interval ends of each metric), ``devices`` (of
one replica) and ``parallel_comm`` (``ttft_ms``/``tpot_ms``: the communication inside them).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any

# the weight (weight-only quantisation below 16 bits), KV-cache and activation dtypes a run may
# ask for: roles in the one dtype table; an engine lists those it runs (ExecutionProfile.serving)
from roofcast.dtypes import ACTIVATION_DTYPES, KV_DTYPES, WEIGHT_DTYPES  # noqa: F401
from roofcast.predictor.memory.types import DeviceMemory


@dataclass(frozen=True)
class ServingConfig:
    """One serving scenario.

    ``input_tokens``/``output_tokens``: prompt and generated tokens per request.
    Exactly one of ``batch`` (static batching: ``batch`` requests start together and finish
    together) and ``concurrency`` (continuous batching in steady state: ``concurrency``
    requests in flight, an int, or ``"max"``: as many as fit in memory); neither: batch 1.
    ``weights``/``kv_cache``/``activations``: dtypes per tensor class (``kv_cache`` None: the
    activations' dtype). ``runtime``: the serving engine's name (an ``ExecutionProfile`` with
    a ``serving`` table; a profile object is accepted too, for what-ifs; None: the device
    kind's default engine).
    ``tp``/``pp``/``ep``: tensor-parallel, pipeline-parallel and expert-parallel degrees of one
    model replica over ``tp x pp`` devices (``predictor.sharding``; all 1: one device).
    ``spec_decode``: a ``spec_decode.SpecDecode`` (speculative decoding) or None.
    ``moe_imbalance``: max / mean token-expert pairs of the expert-parallel groups
    (``kernels.MoeRouting``; 1: uniform routing; needs a MoE model and ``ep > 1``).
    """

    input_tokens: int = 512
    output_tokens: int = 128
    batch: int | None = None
    concurrency: int | str | None = None
    weights: str = "fp16"
    kv_cache: str | None = None
    activations: str = "fp16"
    runtime: str | None = None
    tp: int = 1
    pp: int = 1
    ep: int = 1
    spec_decode: Any = None
    moe_imbalance: float = 1.0


@dataclass(frozen=True)
class ServingPrediction:
    """Predicted serving metrics of one model on one device under one engine.

    Seconds and tokens/s; every metric has an interval (``lower``/``upper``: dict metric ->
    value). ``batch``: the batch (static) or concurrency (continuous) the metrics are for;
    ``max_batch``: the largest that fits at these lengths (0: the model does not fit);
    ``devices_needed``: devices of this kind the weights + one request's KV need (1 when it
    fits); ``usd_per_million_tokens``/``tokens_per_joule``: None where the catalog has no
    price / power. ``kernels``: the evaluated kernel rows of the TTFT step (``phase_step``
    ``prefill``, or ``ttft`` under continuous batching) and of one decode step (``decode``):
    ``time_s`` per kernel, ``count`` (layers), ``kernel_s`` = time x count with dequantisation
    folded in (``predictor.llm.phases``); None from ``serving_table`` sweeps.
    ``devices``: devices of one replica (``tp x pp``); the metrics are the replica's, the
    kernels and ``memory`` one device's (the fullest). ``comm_ttft_s``/``comm_tpot_s``: the
    tensor- and pipeline-parallel communication inside TTFT and TPOT (added after the engine
    calibration, which applies to the kernels only; 0 on one device).
    """

    model: str
    device: str
    runtime: str
    estimator: str
    config: ServingConfig
    batch: int
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    max_batch: int
    memory: DeviceMemory
    devices_needed: int
    lower: dict[str, float] = field(default_factory=dict, hash=False)
    upper: dict[str, float] = field(default_factory=dict, hash=False)
    usd_per_million_tokens: float | None = None
    tokens_per_joule: float | None = None
    notes: tuple[str, ...] = ()
    kernels: Any = field(default=None, repr=False, compare=False, hash=False)
    devices: int = 1
    comm_ttft_s: float = 0.0
    comm_tpot_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The JSON record (keys in the module docstring): times in ms, rates per second,
        memory in GiB, NaN (not predicted) as None; ``<key>_lower``/``<key>_upper`` the
        interval ends of each metric."""
        rec: dict[str, Any] = {"model": self.model, "device": self.device,
                               "runtime": self.runtime, "estimator": self.estimator,
                               "batch": self.batch}
        for attr, key, scale in _METRIC_KEYS:
            rec[key] = _num(getattr(self, attr), scale)
            rec[f"{key}_lower"] = _num(self.lower.get(attr), scale)
            rec[f"{key}_upper"] = _num(self.upper.get(attr), scale)
        m = self.memory
        rec.update({
            "max_batch": self.max_batch, "devices_needed": self.devices_needed,
            "devices": self.devices, "parallel_comm": {"ttft_ms": _num(self.comm_ttft_s, 1e3),
                                                       "tpot_ms": _num(self.comm_tpot_s, 1e3)},
            "memory_GiB": {k: _num(v, 1 / GIB) for k, v in (
                ("weights", m.weights_bytes), ("kv_cache", m.kv_cache_bytes),
                ("activations", m.activations_bytes), ("reserve", m.other_bytes),
                ("total", m.total_bytes), ("capacity", m.capacity_bytes))},
            "usd_per_million_tokens": _num(self.usd_per_million_tokens, 1.0),
            "tokens_per_joule": _num(self.tokens_per_joule, 1.0),
            "notes": list(self.notes),
            "config": {**{f.name: _plain(getattr(self.config, f.name))
                          for f in fields(self.config)}, "runtime": self.runtime},
        })
        return rec


GIB = float(2**30)


def _plain(value: Any) -> Any:
    """A config value for JSON: a dataclass (``spec_decode``) as its fields' dict."""
    return asdict(value) if is_dataclass(value) else value
#: (attribute, JSON key, scale) of each metric.
_METRIC_KEYS: tuple[tuple[str, str, float], ...] = (
    ("ttft_s", "ttft_ms", 1e3), ("tpot_s", "tpot_ms", 1e3),
    ("e2e_latency_s", "e2e_latency_ms", 1e3),
    ("output_tokens_per_s", "output_tokens_per_s", 1.0),
    ("total_tokens_per_s", "total_tokens_per_s", 1.0),
)


def _num(value: float | None, scale: float) -> float | None:
    """``value x scale`` as a plain float; None for None or NaN (JSON has no NaN)."""
    if value is None or math.isnan(value):
        return None
    return float(value) * scale
