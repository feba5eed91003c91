"""Memory of the fullest device of an LLM serving replica at a batch (bytes).

weights (``decoder``) + KV cache (``batch x request_kv_bytes`` of the device's layers and KV
heads, windows capping their layers; a continuous batch reserves every request's full
length) + the prefill peak (``decoder_activations``) + the engine's reserve
``(1 - memory_utilization) x capacity`` (``profile.serving``; 0.9 without a ``[serving]``
table, vLLM's default); a speculative-decoding draft adds its weights and KV
(``predictor.llm.spec_memory``).
``max_batch``: the largest batch that fits (0: not even one request). ``devices_needed``:
``ceil((weights + one request) / (capacity x memory_utilization))``, a tensor-parallel lower
bound. ``device_share`` is the one reader of the serving sharding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.llm.precision import TensorDtypes, dtype_bytes
from roofcast.predictor.llm.spec_memory import draft_kv_bytes, draft_weights_bytes
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.memory.batch import MAX_BATCH_SEARCH, largest_batch
from roofcast.predictor.memory.decoder import (
    device_weights_bytes,
    kind_bytes,
    kv_bytes_per_token,
    request_kv_bytes,
)
from roofcast.predictor.memory.decoder_activations import prefill_activation_bytes
from roofcast.predictor.memory.types import DeviceMemory
from roofcast.predictor.runtimes import ExecutionProfile
from roofcast.predictor.runtimes.profile import ServingSpec
from roofcast.predictor.sharding import Sharding, local_arch, stage_layers

#: a runtime without ``[serving]`` claims what a default ``ServingSpec`` claims (0.9).
DEFAULT_MEMORY_UTILIZATION = ServingSpec().memory_utilization


@dataclass(frozen=True)
class DeviceShare:
    """What the fullest device of a replica holds: ``local`` the shapes it runs (heads, KV
    heads, ``d_ff``, vocabulary per device; ``n_layers`` = its stage's ``layers``; layer
    kinds: those of the stage with the most weights), the ``experts`` of each layer it keeps,
    the replica's ``pp`` pipeline stages."""

    local: LLMArch
    layers: int
    experts: int
    pp: int


def device_share(arch: LLMArch, cfg: ServingConfig) -> DeviceShare:
    """The fullest device's share of ``arch`` under ``cfg``'s ``tp``/``pp``/``ep``."""
    sh = Sharding.of(cfg)
    if sh.trivial:
        return DeviceShare(arch, arch.n_layers, arch.n_experts, 1)
    layers, experts = stage_layers(arch, sh.pp), arch.n_experts // sh.ep
    local = local_arch(arch, sh)
    if not local.layers:
        return DeviceShare(replace(local, n_layers=layers), layers, experts, sh.pp)
    dtypes = TensorDtypes.of(cfg)
    stages = [local.layers[i:i + layers] for i in range(0, arch.n_layers, layers)]
    fullest = max(stages, key=lambda st: sum(kind_bytes(k, dtypes, experts) for k in st))
    return DeviceShare(replace(local, n_layers=len(fullest), layers=fullest), len(fullest),
                       experts, sh.pp)


def memory_utilization(profile: ExecutionProfile | None) -> float:
    """The engine's claimed fraction of device memory (default 0.9 without ``[serving]``)."""
    if profile is None or profile.serving is None:
        return DEFAULT_MEMORY_UTILIZATION
    return float(profile.serving.memory_utilization)


def device_kv_bytes_per_token(arch: LLMArch, cfg: ServingConfig) -> float:
    """KV bytes one token takes on the fullest device (its layers and KV heads), before
    sliding windows cap their layers (``device_kv_bytes`` holds a request's)."""
    local = device_share(arch, cfg).local
    return kv_bytes_per_token(local, TensorDtypes.of(cfg)) + draft_kv_bytes(local, cfg, 1)


def device_kv_bytes(arch: LLMArch, cfg: ServingConfig, tokens: int) -> float:
    """KV bytes one request of ``tokens`` tokens keeps on the fullest device (windowed
    layers capped: ``decoder.request_kv_bytes``)."""
    local = device_share(arch, cfg).local
    return request_kv_bytes(local, TensorDtypes.of(cfg), tokens) + draft_kv_bytes(local, cfg,
                                                                                    tokens)


def serving_memory(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig, batch: int,
                   profile: ExecutionProfile | None) -> DeviceMemory:
    """The memory of ``batch`` requests of ``cfg`` on the fullest device (module docstring)."""
    dtypes = TensorDtypes.of(cfg)
    share = device_share(arch, cfg)
    serving = profile.serving if profile is not None else None
    cap = float(hw.mem_capacity_bytes)
    tokens = int(cfg.input_tokens) + int(cfg.output_tokens)
    return DeviceMemory(
        capacity_bytes=cap,
        weights_bytes=device_weights_bytes(share.local, dtypes, layers=share.layers,
                                           experts=share.experts, pp=share.pp)
        + draft_weights_bytes(share.local, cfg, share.experts),
        kv_cache_bytes=request_kv_bytes(share.local, dtypes, tokens, batch)
        + draft_kv_bytes(share.local, cfg, tokens, batch),
        activations_bytes=prefill_activation_bytes(
            share.local, batch=batch, prompt_tokens=int(cfg.input_tokens),
            elem_bytes=dtype_bytes(cfg.activations),
            max_prefill_tokens=serving.max_prefill_tokens if serving else 0,
            eager=profile is not None and profile.attention == "eager"),
        other_bytes=(1.0 - memory_utilization(profile)) * cap)


def max_batch(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig,
              profile: ExecutionProfile | None) -> int:
    """The largest batch that fits (0: not even one request; ``batch.largest_batch``)."""
    fit = largest_batch(lambda b: serving_memory(arch, hw, cfg, b, profile).total_bytes,
                        hw.mem_capacity_bytes)
    return MAX_BATCH_SEARCH if fit is None else fit  # memory does not grow with the batch


def devices_needed(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig,
                   profile: ExecutionProfile | None) -> int:
    """Devices of ``hw``'s kind the weights + one request need (a tensor-parallel lower
    bound); 1 when one device holds them."""
    m = serving_memory(arch, hw, cfg, 1, profile)
    usable = m.capacity_bytes * memory_utilization(profile)
    need = m.weights_bytes + m.kv_cache_bytes + m.activations_bytes
    return max(1, math.ceil(need / usable))
