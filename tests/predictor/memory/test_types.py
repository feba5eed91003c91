"""DeviceMemory: the total of every category, fits, over_bytes."""

from __future__ import annotations

import math

from roofcast.predictor.memory.types import DeviceMemory


def test_total_fits_and_over():
    m = DeviceMemory(capacity_bytes=100.0, weights_bytes=10.0, gradients_bytes=20.0,
                     optimizer_bytes=30.0, kv_cache_bytes=5.0, activations_bytes=40.0,
                     saved_activations_bytes=25.0, other_bytes=1.0)
    assert m.total_bytes == 10 + 20 + 30 + 5 + 40 + 1  # saved is part of the activation peak
    assert not m.fits
    assert m.over_bytes == 10 + 20 + 30 + 5 + 40 + 1 - 100


def test_an_unnamed_device_has_unbounded_capacity():
    m = DeviceMemory(weights_bytes=1e30)
    assert m.capacity_bytes == math.inf
    assert m.fits
    assert m.over_bytes == 0.0
