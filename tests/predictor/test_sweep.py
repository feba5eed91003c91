"""Sweeps: one vectorised call equals per-cell predict_graph; speedups, throughput, $ and W."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from roofcast.predictor.config import RunConfig, run_config
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.features import featurize
from roofcast.predictor.memory.graph import memory_footprint
from roofcast.predictor.simulate import predict_graph
from roofcast.predictor.sweep import sweep
from roofcast.predictor.workload import workload_table
from tests.predictor.graph_helpers import AS_WRITTEN, batched_chain, priced_devices

DEVICES = priced_devices()


@pytest.mark.parametrize("inter_op", [False, True])
def test_sweep_equals_predict_graph_in_every_cell(inter_op):
    df = sweep(batched_chain, DEVICES, [1, 4, 16], precisions=["fp32", "fp16"],
               modes=["infer", "train"], estimator="time-roofline", inter_op=inter_op)
    assert len(df) == 3 * 3 * 2 * 2
    for rec in df.to_dict("records"):
        cfg = RunConfig(dims={"batch": rec["batch"]}, precision=rec["precision"],
                        mode=rec["mode"], inter_op=inter_op)
        hw = next(d for d in DEVICES if d.id == rec["device"])
        p = predict_graph(batched_chain(rec["batch"]), hw, cfg, "time-roofline")
        assert rec["time_s"] == pytest.approx(p.time_s, rel=1e-12)
        assert rec["total_s"] == pytest.approx(p.total_s, rel=1e-12)
        assert rec["memory_bytes"] == memory_footprint(batched_chain(rec["batch"]), cfg).total_bytes


def test_speedup_throughput_and_efficiency_columns():
    df = sweep(batched_chain, DEVICES, [8], baseline="slow")
    by = {r["device"]: r for r in df.to_dict("records")}
    assert by["slow"]["speedup"] == 1.0
    assert by["fast"]["speedup"] == pytest.approx(by["slow"]["time_s"] / by["fast"]["time_s"])
    assert by["fast"]["speedup"] > 1
    for r in by.values():
        assert r["throughput_samples_per_s"] == pytest.approx(8 / r["time_s"])
        assert r["baseline"] == "slow"
    assert by["fast"]["throughput_per_usd"] == pytest.approx(
        by["fast"]["throughput_samples_per_s"] / 5000.0)
    assert by["slow"]["throughput_per_W"] == pytest.approx(
        by["slow"]["throughput_samples_per_s"] / 100.0)
    # no price / TDP in the catalog: NaN, never invented
    assert math.isnan(by["noprice"]["throughput_per_usd"])
    assert math.isnan(by["noprice"]["throughput_per_W"])
    # 4e6 B of weights + 8000 B per sample at batch 8 = 4.064e6 B > 4.05e6 B
    assert not by["noprice"]["fits"]
    assert by["slow"]["fits"]
    assert set(df["dominant_bound"]) <= {"compute", "memory", "overhead"}


def test_featurize_over_devices_stacks_the_one_device_tables():
    """One vectorised featurize over D devices = the D one-device tables, device-major."""
    graph = batched_chain(4)
    cfg = run_config(graph, threads=2)
    work = workload_table(graph, cfg, AS_WRITTEN)
    many = featurize(work, DEVICES, cfg)
    one = pd.concat([featurize(work, hw, cfg) for hw in DEVICES], ignore_index=True)
    pd.testing.assert_frame_equal(many, one, check_exact=True)
    assert list(featurize(work, DEVICES[0], cfg).index) == list(work.index)
    with pytest.raises(PredictionError, match="HardwareSpec"):
        featurize(work, ["h100-sxm"], cfg)


def test_bad_sweep_arguments():
    with pytest.raises(PredictionError, match="not among the swept devices"):
        sweep(batched_chain, DEVICES[:2], [1], baseline="h100-sxm")
    with pytest.raises(PredictionError, match="listed twice"):
        sweep(batched_chain, [DEVICES[0], DEVICES[0]], [1])
    with pytest.raises(PredictionError, match="no batch sizes"):
        sweep(batched_chain, DEVICES, [])


def test_graph_cache_imports_each_batch_once_after_learning_the_dims(tmp_path, monkeypatch):
    import onnx
    from onnx import TensorProto, helper

    from roofcast.predictor.sweeps import family_graph

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "seq",
                              [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "seq.onnx")
    calls = []
    real = family_graph.import_model

    def counted(source, dims, name):
        calls.append(dict(dims))
        return real(source, dims=dims, name=name)

    monkeypatch.setattr(family_graph, "import_model", counted)
    family_graph.clear_caches()
    dims = (("sequence", 16), ("unused", 3))
    graphs = [family_graph.graph_cache("seq.onnx", dims, b, str(tmp_path)) for b in (1, 4, 8)]
    # a probe at the first batch, then one import per batch with the dims the model names
    assert calls == [{"batch": 1}, {"sequence": 16, "batch": 1}, {"sequence": 16, "batch": 4},
                     {"sequence": 16, "batch": 8}]
    assert [g.dims["batch"] for g in graphs] == [1, 4, 8]
    assert all(g.dims["sequence"] == 16 for g in graphs)
    family_graph.clear_caches()
