"""Pipeline stages and the 1F1B schedule.

``stage_slots``: slot 0 (embeddings) on the first stage, ``L + 1`` (head, loss) on the last,
blocks split evenly (the first ``L mod pp`` stages take one more when ``pp`` does not divide
``L``). 1F1B (PipeDream-Flush, Narayanan et al. 2021) with ``p`` stages, ``m`` micro-batches
and the slowest stage's per-micro-batch time ``t_max`` (s):

    step = (m + p - 1) * t_max,   bubble = (p - 1) * t_max.

Inference runs the forward pipeline the same way (GPipe).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def stage_slots(layers: int, pp: int) -> tuple[tuple[int, ...], ...]:
    """The layer slots of each of ``pp`` stages over ``layers`` blocks (module docstring)."""
    if pp > max(layers, 1):
        raise ValueError(f"pp={pp} stages need at least {pp} layers, the source has {layers}")
    base, extra = divmod(layers, pp)
    stages, start = [], 1
    for i in range(pp):
        n = base + (1 if i < extra else 0)
        slots = list(range(start, start + n))
        start += n
        if i == 0:
            slots.insert(0, 0)
        if i == pp - 1:
            slots.append(layers + 1)
        stages.append(tuple(slots))
    return tuple(stages)


@dataclass(frozen=True)
class PipelineTime:
    """Parts of a pipelined step (s): ``busy_s`` = m x the slowest stage's per-micro-batch
    time, ``bubble_s`` = (p - 1) x that; ``step_s`` their sum; ``slowest`` its index."""

    busy_s: float
    bubble_s: float
    slowest: int

    @property
    def step_s(self) -> float:
        return self.busy_s + self.bubble_s


def one_f_one_b(stage_s: Sequence[float], micro_batches: int) -> PipelineTime:
    """1F1B over stages of per-micro-batch times ``stage_s`` (module docstring)."""
    p = len(stage_s)
    slowest = max(range(p), key=lambda i: stage_s[i])
    t_max = float(stage_s[slowest])
    return PipelineTime(busy_s=micro_batches * t_max, bubble_s=(p - 1) * t_max, slowest=slowest)


def bubble_fraction(pp: int, micro_batches: int) -> float:
    """Idle fraction of a 1F1B step with equal stages: ``(p - 1) / (m + p - 1)``."""
    return (pp - 1) / (micro_batches + pp - 1)
