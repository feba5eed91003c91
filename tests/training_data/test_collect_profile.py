"""Parsing ONNX Runtime's profiler JSON into per-run kernel times."""

from __future__ import annotations

import json

import pytest

from roofcast.training_data.collectors.profile import parse_profile


def _ev(cat, name, ts, dur, op=""):
    return {"cat": cat, "name": name, "ts": ts, "dur": dur, "ph": "X",
            "args": {"op_name": op, "provider": "CPUExecutionProvider"} if op else {}}


def test_kernels_are_assigned_to_their_run_and_fences_ignored(tmp_path):
    events = [
        _ev("Session", "session_initialization", 0, 50),
        _ev("Session", "model_run", 100, 40),
        _ev("Node", "conv_fence_before", 101, 0, "Conv"),
        _ev("Node", "conv_kernel_time", 102, 30, "Conv"),
        _ev("Node", "relu_kernel_time", 133, 5, "Relu"),
        _ev("Session", "model_run", 200, 20),
        _ev("Node", "conv_kernel_time", 201, 12, "Conv"),
        _ev("Node", "late_kernel_time", 500, 7, "Relu"),  # outside every run window
    ]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(events))
    runs = parse_profile(path)
    assert [r.run_s for r in runs] == pytest.approx([40e-6, 20e-6])
    assert [(k.node, k.op_name) for k in runs[0].kernels] == [("conv", "Conv"), ("relu", "Relu")]
    assert sum(k.dur_s for k in runs[0].kernels) == pytest.approx(35e-6)
    assert [k.node for k in runs[1].kernels] == ["conv"]
