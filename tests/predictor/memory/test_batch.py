"""largest_batch: the affine solve, a bent curve, no fit, no growth."""

from __future__ import annotations

from roofcast.predictor.memory.batch import largest_batch


def test_affine_memory_is_solved_exactly():
    calls = []

    def total(b):
        calls.append(b)
        return 1000.0 + 30.0 * b

    assert largest_batch(total, 1000 + 30 * 57 + 29) == 57
    assert len(calls) == 4  # m(1), m(2), b*, b* + 1


def test_a_bent_curve_is_searched_to_its_boundary():
    # slope 30 up to batch 8, then 10 (a prefill cap): the affine guess is too low
    def total(b):
        return 1000.0 + 30.0 * min(b, 8) + 10.0 * max(b - 8, 0)

    cap = 1000 + 30 * 8 + 10 * (100 - 8)
    assert largest_batch(total, cap) == 100
    assert largest_batch(total, cap - 1) == 99


def test_nothing_fits_or_memory_does_not_grow():
    assert largest_batch(lambda b: 500.0 + b, 400.0) == 0
    assert largest_batch(lambda b: 500.0, 600.0) is None
    assert largest_batch(lambda b: 1.0 * b, 1e12, limit=64) == 64
