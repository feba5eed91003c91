"""``DeviceMemory``: the bytes one device holds, by category — the one result type of the
memory model for a single-device run, a serving replica's fullest device and a parallel plan's
most loaded device.

``total_bytes`` = weights + gradients + optimizer states + KV cache + peak activations + other;
``fits``: total <= ``capacity_bytes``; ``over_bytes`` = total - capacity when it does not fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class DeviceMemory:
    """Bytes on one device. ``activations_bytes``: the peak (training: what is saved for the
    backward plus the backward's working set); ``saved_activations_bytes``: of which kept for
    the backward (single-device training graphs; 0 elsewhere); ``other_bytes``: the serving
    engine's reserve, pipeline send/recv buffers, ZeRO-3's gathered layers;
    ``capacity_bytes``: the device's memory (inf: no device named)."""

    capacity_bytes: float = math.inf
    weights_bytes: float = 0.0
    gradients_bytes: float = 0.0
    optimizer_bytes: float = 0.0
    kv_cache_bytes: float = 0.0
    activations_bytes: float = 0.0
    saved_activations_bytes: float = 0.0
    other_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes
                + self.kv_cache_bytes + self.activations_bytes + self.other_bytes)

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def over_bytes(self) -> float:
        return max(0.0, self.total_bytes - self.capacity_bytes)
