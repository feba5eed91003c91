"""Memory of one device under a parallel plan (bytes): the most loaded pipeline stage.

Weights, gradients, optimizer states: the stage's parameter elements x
``state.bytes_per_param``, divided by ZeRO (``state.zero_divisors``); ZeRO-3 also gathers two
layers' full weights (the one in use and the prefetched next) into ``other_bytes``.
Activations (train) on stage ``i`` of ``p`` under 1F1B: ``min(p - i, m)`` micro-batches in
flight, each the stage's slots' saved activations; with full recomputation each keeps the
slots' checkpoints and the layer being recomputed adds its activations (the largest slot).
Infer: the largest slot's activations. ``other_bytes`` also holds the pipeline send/recv
buffers (2 x ``boundary_bytes`` on a stage with neighbours).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from roofcast.predictor.memory.state import bytes_per_param, zero_divisors
from roofcast.predictor.memory.types import DeviceMemory
from roofcast.predictor.parallel.types import ParallelPlan, ShardedWorkload
from roofcast.predictor.precision import storage_bytes


def in_flight(stage: int, pp: int, micro_batches: int) -> int:
    """Micro-batches whose activations stage ``stage`` (0-based) holds at once under 1F1B:
    ``min(pp - stage, micro_batches)``."""
    return min(pp - stage, micro_batches)


def stage_memory(work: ShardedWorkload, slots: Sequence[int], stage: int, plan: ParallelPlan,
                 *, mode: str, precision: str, optimizer: str,
                 capacity_bytes: float) -> DeviceMemory:
    """Memory of a device on pipeline stage ``stage`` holding layer ``slots`` (module
    docstring)."""
    idx = np.asarray(slots, dtype=int)
    params = float(np.sum(work.param_elems[idx]))
    act = np.asarray(work.activation_bytes, dtype=float)[idx]
    ckpt = np.asarray(work.checkpoint_bytes, dtype=float)[idx]
    neighbours = (stage > 0) + (stage < plan.pp - 1)
    other = 2.0 * work.boundary_bytes if neighbours else 0.0
    if mode == "infer":
        return DeviceMemory(capacity_bytes=capacity_bytes,
                            weights_bytes=params * storage_bytes(precision),
                            activations_bytes=float(act.max(initial=0.0)), other_bytes=other)
    w_b, g_b, o_b = bytes_per_param(precision, optimizer)
    w_d, g_d, o_d = zero_divisors(plan.zero, plan.dp)
    if plan.zero >= 3:
        layer_params = float(np.max(work.param_elems[idx], initial=0.0))
        other += 2.0 * layer_params * w_b
    flight = in_flight(stage, plan.pp, plan.micro_batches)
    if plan.recompute:
        activations = flight * float(ckpt.sum()) + float(act.max(initial=0.0))
    else:
        activations = flight * float(act.sum())
    return DeviceMemory(capacity_bytes=capacity_bytes, weights_bytes=params * w_b / w_d,
                        gradients_bytes=params * g_b / g_d, optimizer_bytes=params * o_b / o_d,
                        activations_bytes=activations, other_bytes=other)


def device_memory(work: ShardedWorkload, stages: Sequence[Sequence[int]], plan: ParallelPlan,
                  *, mode: str, precision: str, optimizer: str,
                  capacity_bytes: float) -> DeviceMemory:
    """Memory of the most loaded device: ``stage_memory`` of every stage (``stages``: the layer
    slots of each), the largest total."""
    mems = [stage_memory(work, slots, i, plan, mode=mode, precision=precision,
                         optimizer=optimizer, capacity_bytes=capacity_bytes)
            for i, slots in enumerate(stages)]
    return max(mems, key=lambda m: m.total_bytes)
