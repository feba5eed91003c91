"""Memory of one device under a parallel plan (bytes).

Per parameter element a device holds, before ZeRO (Rajbhandari et al. 2020, §3 and Fig. 1:
mixed-precision Adam is ``2 + 2 + K`` bytes per parameter with ``K = 12``):

* weights: the run's precision (bf16/fp16 2 B, fp32 4 B, fp64 8 B);
* gradients: the run's precision (as Megatron-LM / DeepSpeed keep them for a bf16/fp16 run);
* optimizer states (``training.OPTIMIZERS``): ``state_tensors`` tensors at the state precision
  (fp32; fp64 for fp64 runs) plus, when the run's precision is narrower than that, an fp32
  master copy of the weights: mixed-precision Adam 4 + 4 + 4 = 12 B, fp32 Adam 8 B, SGD with
  momentum 4 B (+ 4 B master in mixed precision).

ZeRO over the ``dp`` replicas (Rajbhandari et al. 2020): stage 1 divides the optimizer states by
``dp``, stage 2 also the gradients, stage 3 also the weights; stage 3 then gathers each layer's
full parameters before using them: two layers' worth (the one in use and the prefetched next)
are counted in ``other_bytes``.

Activations (train) on pipeline stage ``i`` of ``p`` with ``m`` micro-batches: 1F1B keeps
``min(p - i, m)`` micro-batches in flight (Narayanan et al. 2021 §2.2: stage 0 holds ``p``),
each the stage's ``activation_bytes`` summed over its layer slots. With full recomputation
(Korthikanti et al. 2022 §4: keep each layer's input only) each in-flight micro-batch keeps the
stage's ``checkpoint_bytes`` and the layer being recomputed adds one layer's activations (the
stage's largest slot). Infer: one micro-batch in flight per stage, the largest slot's
activations (the working set of one layer; a forward frees the previous layer's tensors).

``other_bytes``: the transient working set beyond that — pipeline send/recv buffers (the
boundary activation sent forward and its gradient received, 2 x ``boundary_bytes`` on a
stage with neighbours) and ZeRO-3's gathered layers. Not modelled: the activation gradients of
the layer being back-propagated (freed as they are consumed; at most about that layer's saved
activations), the framework / CUDA context, allocator fragmentation, communication library
buffers — ``engine`` notes a plan that fits with less than 5 % to spare.

``device_memory`` reports the most loaded device (largest total over stages).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from roofcast.predictor.parallel.types import DeviceMemory, ParallelPlan, ShardedWorkload
from roofcast.predictor.precision import storage_bytes
from roofcast.predictor.training import OPTIMIZERS, state_precision


def bytes_per_param(precision: str, optimizer: str) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) bytes per parameter element before ZeRO (see the
    module docstring): mixed-precision Adam (2, 2, 12); fp32 Adam (4, 4, 8); fp32 SGD-momentum
    (4, 4, 4)."""
    width = float(storage_bytes(precision))
    state = float(storage_bytes(state_precision(precision)))
    master = state if width < state else 0.0
    return width, width, master + OPTIMIZERS[optimizer].state_tensors * state


def zero_divisors(zero: int, dp: int) -> tuple[int, int, int]:
    """What ZeRO stage ``zero`` divides (weights, gradients, optimizer states) by over ``dp``
    replicas (Rajbhandari et al. 2020: P_os, P_os+g, P_os+g+p)."""
    return (dp if zero >= 3 else 1, dp if zero >= 2 else 1, dp if zero >= 1 else 1)


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
        w_b = storage_bytes(precision)
        return DeviceMemory(weights_bytes=params * w_b, gradients_bytes=0.0, optimizer_bytes=0.0,
                            activations_bytes=float(act.max(initial=0.0)), other_bytes=other,
                            capacity_bytes=capacity_bytes)
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
    return DeviceMemory(weights_bytes=params * w_b / w_d, gradients_bytes=params * g_b / g_d,
                        optimizer_bytes=params * o_b / o_d, activations_bytes=activations,
                        other_bytes=other, capacity_bytes=capacity_bytes)


def device_memory(work: ShardedWorkload, stages: Sequence[Sequence[int]], plan: ParallelPlan,
                  *, mode: str, precision: str, optimizer: str,
                  capacity_bytes: float) -> DeviceMemory:
    """Memory of the most loaded device: ``stage_memory`` of every stage (``stages``: the layer
    slots of each), the largest total."""
    mems = [stage_memory(work, slots, i, plan, mode=mode, precision=precision,
                         optimizer=optimizer, capacity_bytes=capacity_bytes)
            for i, slots in enumerate(stages)]
    return max(mems, key=lambda m: m.total_bytes)
