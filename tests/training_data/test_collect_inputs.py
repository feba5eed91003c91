"""Materialising weightless models in memory and random inputs in valid ranges."""

from __future__ import annotations

import builtins
import io

import numpy as np
from onnx import TensorProto

from roofcast.training_data.collectors.ort_cpu import MeasureConfig, measure_model
from roofcast.training_data.collectors.random_inputs import (
    external_initializers,
    int_input_plan,
    make_feeds,
    materialise,
)
from tests.training_data.collect_helpers import conv_matmul_model, embedding_model


def test_integer_inputs_get_valid_ranges():
    model = materialise(embedding_model(vocab=50), {"batch": 3, "sequence": 7})
    feeds, plans = make_feeds(model, np.random.default_rng(0))
    by_name = {p.name: p for p in plans}
    # input_ids reaches Gather through Unsqueeze/Squeeze: indices in [0, 50)
    assert by_name["input_ids"].kind == "index"
    assert by_name["input_ids"].high == 50
    ids = feeds["input_ids"]
    assert ids.shape == (3, 7)
    assert ids.dtype == np.int64
    assert ids.min() >= 0
    assert ids.max() < 50
    assert by_name["attention_mask"].kind == "mask"
    assert (feeds["attention_mask"] == 1).all()
    assert by_name["position_ids"].kind == "position"
    assert (feeds["position_ids"] == np.arange(7)).all()


def test_unused_integer_input_falls_back_to_ones_and_says_so():
    plan = int_input_plan(embedding_model(), "nonexistent")
    assert plan.kind == "ones"
    assert "no Gather" in plan.reason


def test_materialise_fills_external_weights_without_reading_them(tmp_path, monkeypatch):
    poison = tmp_path / "weights.bin"
    poison.write_bytes(np.full(16 * 8 * 9 + 32 * 16, 7.0, np.float32).tobytes())
    model = conv_matmul_model(external=True, location="weights.bin")  # beside the model file
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    assert external_initializers(model) == ["W", "W2"]
    real_open, real_io_open = builtins.open, io.open

    def guarded(path, *a, **k):
        assert "weights.bin" not in str(path), "external data was read"
        return real_open(path, *a, **k)

    def guarded_io(path, *a, **k):
        assert "weights.bin" not in str(path), "external data was read"
        return real_io_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", guarded)
    monkeypatch.setattr(io, "open", guarded_io)
    filled = materialise(model, {"batch": 2})
    assert external_initializers(filled) == []
    w = next(t for t in filled.graph.initializer if t.name == "W")
    assert w.data_location == TensorProto.DEFAULT
    assert not w.external_data
    values = np.frombuffer(w.raw_data, np.float32)
    assert values.size == 16 * 8 * 9
    assert not np.any(values == 7.0)
    assert np.abs(values).max() <= 1 / np.sqrt(8 * 9)  # uniform in +-1/sqrt(fan_in)
    # the whole measurement works from the weightless model and never opens the file either
    m = measure_model(path, {"batch": 2}, MeasureConfig(repeats=1, warmup=0))
    assert set(m.rows["model"]) == {"model"}
    assert len(m.rows) >= 3
    assert external_initializers(model) == ["W", "W2"]  # the caller's model is untouched


def test_big_random_weights_stay_out_of_the_proto_and_run_in_memory(tmp_path):
    from roofcast.training_data.collectors.ort_cpu import run_profiled
    from roofcast.training_data.collectors.random_inputs import (
        IN_MEMORY_LOCATION,
        materialise_split,
    )

    model = conv_matmul_model(external=True, location="absent.bin")
    runnable, big = materialise_split(model, {"batch": 2}, inline_max_bytes=64)
    assert sorted(big) == ["W", "W2"]
    assert big["W"].shape == (16, 8, 3, 3)
    w = next(t for t in runnable.graph.initializer if t.name == "W")
    assert w.data_location == TensorProto.EXTERNAL
    assert w.external_data[0].value == IN_MEMORY_LOCATION
    feeds, _ = make_feeds(runnable)
    runs, wall, optimized = run_profiled(runnable, feeds, MeasureConfig(repeats=2, warmup=0),
                                         tmp_path, big)
    assert {n.op_type for n in optimized.graph.node} >= {"Gemm"}  # MatMul+Add fused
    assert len(runs) == len(wall) == 2
    assert all(r.kernels for r in runs)
