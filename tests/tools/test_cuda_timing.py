"""The GPU collectors' shared timing (``tools/cuda_timing.py``) and its use in ``torch_eager.py``
and ``torch_llm_step.py``, run against a fake ``torch`` whose GPU clock the test sets (eager
call = kernel + dispatch, graph replay = kernels only): the arithmetic, not a GPU, is checked."""

from __future__ import annotations

import math
import sys

import pytest

from tests.tools.fake_torch import DISPATCH_MS, Clock, load_tools


@pytest.fixture
def clock():
    yield Clock()
    sys.modules.pop("cuda_timing", None)  # bound to the fake torch


def test_events_ms_is_the_mean_eager_call(monkeypatch, clock):
    (timing,) = load_tools(monkeypatch, clock)
    assert timing.events_ms(lambda: clock.kernel(2.0), 4) == pytest.approx(2.0 + DISPATCH_MS)
    assert clock.calls == 4


def test_graph_ms_is_one_call_of_the_replay_without_dispatch(monkeypatch, clock):
    (timing,) = load_tools(monkeypatch, clock)
    assert timing.graph_ms(lambda: clock.kernel(3.0), 5, calls=4, side_warmup=2) == \
        pytest.approx(3.0)
    assert clock.calls == 2 + 4  # side-stream warm-ups, then the captured calls
    assert clock.ms == pytest.approx(2 * (3.0 + DISPATCH_MS) + (1 + 5) * 4 * 3.0)


def test_time_op_shrinks_repeats_for_slow_ops(monkeypatch, clock):
    _, eager = load_tools(monkeypatch, clock, "torch_eager.py")
    t = eager.time_op(lambda: clock.kernel(9.5), target_s=0.05)
    assert t == pytest.approx({"eager_ms": 10.0, "graph_ms": 9.5})
    # 50 ms target at 10 ms a call: 5 eager repeats, a graph of int(0.4 * 50 / 10) = 2 calls
    assert clock.calls == 2 + 1 + 5 + 1 + 2


def test_time_op_keeps_the_eager_time_when_capture_fails(monkeypatch, clock):
    _, eager = load_tools(monkeypatch, clock, "torch_eager.py")
    clock.refuse_capture = True
    t = eager.time_op(lambda: clock.kernel(1.0))
    assert t["eager_ms"] == pytest.approx(1.0 + DISPATCH_MS)
    assert math.isnan(t["graph_ms"])


def test_llm_step_times_eager_then_graph(monkeypatch, clock):
    _, step = load_tools(monkeypatch, clock, "torch_llm_step.py")
    assert step._time(lambda: clock.kernel(4.0), reps=3) == pytest.approx((4.5, 4.0))


def test_env_json_keeps_its_keys_in_order(monkeypatch, clock):
    _, eager = load_tools(monkeypatch, clock, "torch_eager.py")
    info = eager.env()
    assert list(info)[:9] == ["torch", "cuda", "device", "sm_count", "total_memory_bytes",
                              "l2_bytes", "python", "cudnn", "date"]
    assert (info["device"], info["sm_count"], info["l2_bytes"]) == ("Fake GPU", 7, 4 << 20)
