"""Memory of the fullest device of an LLM serving replica at a batch (bytes).

weights (``decoder``) + KV cache (``batch x kv_tokens x kv_bytes_per_token`` of the device's
layers and KV heads; a continuous batch reserves every request's full length) + the prefill
peak (``decoder_activations``) + the engine's reserve ``(1 - memory_utilization) x capacity``
(``profile.serving``; 0.9 without a ``[serving]`` table, vLLM's default).
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
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.memory.batch import MAX_BATCH_SEARCH, largest_batch
from roofcast.predictor.memory.decoder import device_weights_bytes, kv_bytes_per_token, kv_tokens
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
    heads, ``d_ff``, vocabulary per device; ``n_layers`` = its stage's ``layers``), the
    ``experts`` of each layer it keeps, the replica's ``pp`` pipeline stages."""

    local: LLMArch
    layers: int
    experts: int
    pp: int


def device_share(arch: LLMArch, cfg: ServingConfig) -> DeviceShare:
    """The fullest device's share of ``arch`` under ``cfg``'s ``tp``/``pp``/``ep``."""
    sh = Sharding.of(cfg)
    if sh.trivial:
        return DeviceShare(arch, arch.n_layers, arch.n_experts, 1)
    layers = stage_layers(arch, sh.pp)
    return DeviceShare(replace(local_arch(arch, sh), n_layers=layers), layers,
                       arch.n_experts // sh.ep, sh.pp)


def memory_utilization(profile: ExecutionProfile | None) -> float:
    """The engine's claimed fraction of device memory (default 0.9 without ``[serving]``)."""
    if profile is None or profile.serving is None:
        return DEFAULT_MEMORY_UTILIZATION
    return float(profile.serving.memory_utilization)


def device_kv_bytes_per_token(arch: LLMArch, cfg: ServingConfig) -> float:
    """KV bytes one token takes on the fullest device (its layers and KV heads)."""
    return kv_bytes_per_token(device_share(arch, cfg).local, TensorDtypes.of(cfg))


def serving_memory(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig, batch: int,
                   profile: ExecutionProfile | None) -> DeviceMemory:
    """The memory of ``batch`` requests of ``cfg`` on the fullest device (module docstring)."""
    dtypes = TensorDtypes.of(cfg)
    share = device_share(arch, cfg)
    serving = profile.serving if profile is not None else None
    cap = float(hw.mem_capacity_bytes)
    tokens = kv_tokens(arch, int(cfg.input_tokens) + int(cfg.output_tokens))
    return DeviceMemory(
        capacity_bytes=cap,
        weights_bytes=device_weights_bytes(share.local, dtypes, layers=share.layers,
                                           experts=share.experts, pp=share.pp),
        kv_cache_bytes=float(batch * tokens * kv_bytes_per_token(share.local, dtypes)),
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
