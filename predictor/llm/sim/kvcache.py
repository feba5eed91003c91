"""The paged KV pool of one replica: how many blocks of ``block_tokens`` tokens fit.

blocks = floor((capacity - weights - activations - reserve) / (kv_bytes_per_token x
block_tokens)) on the fullest device, the terms from the memory model
(``predictor.memory.serving.serving_memory`` of one request: its activations are the prefill
peak, the reserve ``(1 - memory_utilization) x capacity``). 0: the weights do not fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.memory.serving import device_kv_bytes_per_token, serving_memory
from roofcast.predictor.memory.types import DeviceMemory
from roofcast.predictor.runtimes import ExecutionProfile


@dataclass(frozen=True)
class KvPool:
    """``blocks`` of ``block_tokens`` tokens; ``bytes_per_token`` on the fullest device;
    ``memory``: the memory breakdown of one request (weights, activations, reserve)."""

    blocks: int
    block_tokens: int
    bytes_per_token: float
    memory: DeviceMemory

    @property
    def tokens(self) -> int:
        return self.blocks * self.block_tokens

    @property
    def bytes(self) -> float:
        return self.tokens * self.bytes_per_token


def kv_pool(arch: LLMArch, hw: HardwareSpec, cfg: ServingConfig,
            profile: ExecutionProfile | None, block_tokens: int = 16) -> KvPool:
    """The KV pool of ``cfg`` on ``hw`` (module docstring)."""
    mem = serving_memory(arch, hw, cfg, 1, profile)
    free = mem.capacity_bytes - mem.weights_bytes - mem.activations_bytes - mem.other_bytes
    per = device_kv_bytes_per_token(arch, cfg)
    blocks = max(0, math.floor(free / (per * block_tokens))) if per > 0 else 0
    return KvPool(blocks, block_tokens, per, mem)
