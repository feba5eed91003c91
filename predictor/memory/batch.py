"""The largest batch whose memory fits a device: one search for graphs and serving.

Memory is (piecewise) affine in the batch: m(b) = a + c·b. Measure m(1), m(2), solve
b* = floor((capacity − a) / c), verify at b* and b* + 1, and fall back to an exponential
search upwards or a bisection when m is not exactly affine (liveness peaks can move, a
prefill cap bends the serving curve). m must not decrease with the batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from roofcast.predictor.config import RunConfig
from roofcast.predictor.memory.graph import GraphSource, memory_footprint

#: the largest batch searched (a guard, far above any device's fit).
MAX_BATCH_SEARCH = 1 << 20


def largest_batch(total_bytes: Callable[[int], float], capacity_bytes: float,
                  limit: int = MAX_BATCH_SEARCH) -> int | None:
    """Largest b <= ``limit`` with ``total_bytes(b)`` <= ``capacity_bytes`` (module
    docstring); 0 when batch 1 does not fit; None when memory does not grow with the batch."""
    cap = float(capacity_bytes)
    m1 = total_bytes(1)
    if m1 > cap:
        return 0
    slope = total_bytes(2) - m1
    if slope <= 0:
        return None
    guess = int(min(max((cap - (m1 - slope)) // slope, 1), limit))
    if total_bytes(guess) <= cap:
        if guess >= limit or total_bytes(guess + 1) > cap:
            return guess  # verified: b* fits, b* + 1 does not
        lo, hi, step = guess + 1, None, 1
        while hi is None:  # not affine after all: exponential search upwards
            probe = min(lo + step, limit)
            if probe == lo:
                return lo
            if total_bytes(probe) <= cap:
                lo, step = probe, step * 2
            else:
                hi = probe
    else:
        if guess > 1 and total_bytes(guess - 1) <= cap:
            return guess - 1
        lo, hi = 1, guess
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if total_bytes(mid) <= cap:
            lo = mid
        else:
            hi = mid
    return lo


def max_batch_that_fits(graph_source: GraphSource, hw, config: RunConfig,
                        limit: int = MAX_BATCH_SEARCH) -> int | None:
    """Largest batch whose ``memory_footprint`` fits ``hw`` (``largest_batch``, each probe
    imported at its batch by ``graph_source``)."""

    def total(b: int) -> float:
        at_b = dataclasses.replace(config, dims={**config.dims, "batch": b})
        return memory_footprint(graph_source(b), at_b).total_bytes

    return largest_batch(total, hw.mem_capacity_bytes, limit)
