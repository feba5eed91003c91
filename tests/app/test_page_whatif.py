"""The What-if page says what sets the per-kernel cost: a launch overhead below the runtime's
dispatch floor changes nothing and the caption says why; above it, it acts."""

from __future__ import annotations

from tests.app.test_pages import assert_clean, isolated, start  # noqa: F401 (fixture)


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_a_launch_overhead_below_the_floor_is_explained():
    at = start("whatif")
    at.select_slider(key="whatif_launch_overhead_scale").set_value(0.25).run()
    assert_clean(at)
    text = captions(at)
    assert "pytorch-eager's host dispatch floor (launch overhead below it changes nothing)" in text
    assert "a kernel costs at least 15 µs" in text


def test_a_launch_overhead_above_the_floor_sets_the_cost():
    at = start("whatif")
    at.select_slider(key="whatif_launch_overhead_scale").set_value(8.0).run()
    assert_clean(at)
    assert "set by the device's launch overhead" in captions(at)
    assert at.metric[2].value != "1.000×"  # the speedup moved
