"""Per-device memory of a parallel plan: ZeRO sharding, 1F1B activations in flight,
recomputation — exact values on the fake source."""

from __future__ import annotations

import pytest

from roofcast.predictor.memory.plan import device_memory, in_flight, stage_memory
from roofcast.predictor.parallel.schedule import stage_slots
from roofcast.predictor.parallel.types import ParallelPlan
from tests.predictor.parallel.engine_helpers import (
    ACT_PER_SAMPLE,
    BOUNDARY_PER_SAMPLE,
    CKPT_PER_SAMPLE,
    FakeSource,
)


def test_in_flight_1f1b():
    assert [in_flight(i, 4, 8) for i in range(4)] == [4, 3, 2, 1]
    assert [in_flight(i, 4, 2) for i in range(4)] == [2, 2, 2, 1]


WORK = FakeSource(layers=4, d=64).build(tp=1, ep=1, micro_batch=2, sequence_parallel=False,
                                        mode="train")
P = 8.0 * 64 * 64  # param elems per slot


def mem(plan, stage=0, mode="train", cap=1e12):
    slots = stage_slots(4, plan.pp)[stage]
    return stage_memory(WORK, slots, stage, plan, mode=mode, precision="bf16", optimizer="adam",
                        capacity_bytes=cap)


@pytest.mark.parametrize(("zero", "w", "g", "o"), [(0, 2, 2, 12), (1, 2, 2, 3), (2, 2, 0.5, 3),
                                        (3, 0.5, 0.5, 3)])
def test_zero_stages_exact(zero, w, g, o):
    m = mem(ParallelPlan(dp=4, pp=2, micro_batches=4, zero=zero))
    n = 3 * P  # stage 0 of pp=2 over 4 blocks: slots 0, 1, 2
    assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == (w * n, g * n, o * n)
    gathered = 2 * P * 2 if zero == 3 else 0.0  # ZeRO-3: two gathered layers at 2 B
    assert m.other_bytes == 2 * BOUNDARY_PER_SAMPLE * 2 + gathered


def test_activations_in_flight_and_recompute():
    plan = ParallelPlan(dp=1, pp=2, micro_batches=4)
    assert mem(plan).activations_bytes == 2 * 3 * ACT_PER_SAMPLE * 2  # 2 in flight x 3 slots
    assert mem(plan, stage=1).activations_bytes == 1 * 3 * ACT_PER_SAMPLE * 2
    rc = ParallelPlan(dp=1, pp=2, micro_batches=4, recompute=True)
    assert mem(rc).activations_bytes == 2 * 3 * CKPT_PER_SAMPLE * 2 + ACT_PER_SAMPLE * 2


def test_infer_holds_weights_and_one_layer():
    m = mem(ParallelPlan(dp=1, pp=2, micro_batches=4), mode="infer")
    assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == (2 * 3 * P, 0, 0)
    assert m.activations_bytes == ACT_PER_SAMPLE * 2


def test_device_memory_is_most_loaded_stage_and_over_bytes():
    plan = ParallelPlan(dp=1, pp=2, micro_batches=4)
    stages = stage_slots(4, 2)
    full = device_memory(WORK, stages, plan, mode="train", precision="bf16", optimizer="adam",
                         capacity_bytes=1e12)
    assert full == mem(plan, stage=0)  # stage 0 keeps 2 micro-batches, stage 1 one
    cap = full.total_bytes - 1000.0
    tight = device_memory(WORK, stages, plan, mode="train", precision="bf16", optimizer="adam",
                          capacity_bytes=cap)
    assert not tight.fits
    assert tight.over_bytes == pytest.approx(1000.0)
