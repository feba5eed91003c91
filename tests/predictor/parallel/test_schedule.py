"""Stages and 1F1B: exact formula values (Narayanan et al. 2021)."""

from __future__ import annotations

import pytest

from roofcast.predictor.parallel.schedule import bubble_fraction, one_f_one_b, stage_slots


def test_stage_slots_even_and_uneven():
    assert stage_slots(4, 2) == ((0, 1, 2), (3, 4, 5))
    assert stage_slots(4, 1) == ((0, 1, 2, 3, 4, 5),)
    assert stage_slots(5, 2) == ((0, 1, 2, 3), (4, 5, 6))
    assert stage_slots(4, 4) == ((0, 1), (2,), (3,), (4, 5))
    with pytest.raises(ValueError, match="pp=3 stages need at least 3 layers"):
        stage_slots(2, 3)


def test_one_f_one_b_slowest_stage_sets_pace():
    t = one_f_one_b([1.0, 3.0, 2.0], micro_batches=4)
    assert t.slowest == 1
    assert t.busy_s == 12.0
    assert t.bubble_s == 6.0
    assert t.step_s == (4 + 3 - 1) * 3.0


def test_bubble_fraction():
    assert bubble_fraction(4, 8) == pytest.approx(3 / 11)
    assert bubble_fraction(1, 8) == 0.0
    t = one_f_one_b([2.0] * 4, micro_batches=8)
    assert t.bubble_s / t.step_s == pytest.approx(bubble_fraction(4, 8))
