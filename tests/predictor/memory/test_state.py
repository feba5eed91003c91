"""Bytes per parameter element (Rajbhandari et al. 2020) and ZeRO's divisors."""

from __future__ import annotations

from roofcast.predictor.memory.state import bytes_per_param, zero_divisors


def test_bytes_per_param():
    assert bytes_per_param("bf16", "adam") == (2, 2, 4 + 2 * 4)  # 2 + 2 + K, K = 12
    assert bytes_per_param("fp16", "adam") == (2, 2, 4 + 2 * 4)
    assert bytes_per_param("fp32", "adam") == (4, 4, 2 * 4)  # no master copy
    assert bytes_per_param("fp32", "sgd_momentum") == (4, 4, 1 * 4)
    assert bytes_per_param("bf16", "sgd_momentum") == (2, 2, 4 + 1 * 4)
    assert bytes_per_param("fp64", "adam") == (8, 8, 2 * 8)
    assert bytes_per_param("fp8", "adam") == (1, 1, 4 + 2 * 4)


def test_zero_divisors():
    assert zero_divisors(0, 8) == (1, 1, 1)
    assert zero_divisors(1, 8) == (1, 1, 8)
    assert zero_divisors(2, 8) == (1, 8, 8)
    assert zero_divisors(3, 8) == (8, 8, 8)
