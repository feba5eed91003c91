"""The execution profile reaches every pipeline: predict, sweep/compare (devices grouped by
their resolved profile), featurize (runtime columns, dispatch floor, TF32) and the estimators."""

from __future__ import annotations

import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.features import featurize
from roofcast.predictor.runtimes import get_runtime
from roofcast.predictor.simulate import predict_graph
from roofcast.predictor.sweep import sweep
from roofcast.predictor.workload import workload_table
from tests.predictor.runtimes import onnx_graphs as graphs

A100, V100, CPU = "a100-40gb-pcie", "v100-pcie-32gb", "epyc-9654"


def test_prediction_states_its_runtime_and_what_the_mapping_did():
    p = predict_graph(graphs.linear_bias(), A100, RunConfig(), "time-roofline")
    assert p.runtime == "pytorch-eager"
    assert "pytorch-eager: 1 bias adds in addmm" in p.notes
    assert len(p.per_op) == 1
    # the eager floor (15 µs) is the per-kernel overhead, not the device's 5 µs launch figure
    assert p.per_op["overhead_s"].iloc[0] == pytest.approx(15e-6)
    assert p.per_op["launch_overhead_s"].iloc[0] == pytest.approx(5e-6)
    assert p.total_s == pytest.approx(15e-6)
    trt = predict_graph(graphs.linear_bias(), A100, RunConfig(runtime="tensorrt"),
                        "time-roofline")
    assert trt.runtime == "tensorrt"
    assert trt.total_s == pytest.approx(5e-6)  # graph capture: the device's launch only
    cpu = predict_graph(graphs.linear_bias(), CPU, RunConfig(), "roofline")
    assert cpu.runtime == "onnxruntime-cpu"


def test_a_precision_the_runtime_does_not_run_is_refused_naming_those_that_do():
    with pytest.raises(PredictionError, match="does not run int8") as err:
        predict_graph(graphs.linear_bias(), A100, RunConfig(precision="int8"))
    assert "tensorrt" in str(err.value)
    assert "onnxruntime-cpu" in str(err.value)


def test_a_runtime_is_refused_on_a_device_kind_it_does_not_run_on():
    with pytest.raises(PredictionError, match="runs on gpu devices, not cpu"):
        predict_graph(graphs.linear_bias(), CPU, RunConfig(runtime="tensorrt"))
    with pytest.raises(PredictionError, match="not cpu"):
        sweep(lambda b: graphs.linear_bias(), [A100, CPU], [1], runtime="pytorch-eager")


def test_a_compare_of_a_cpu_and_a_gpu_gets_each_kinds_default():
    df = sweep(lambda b: graphs.linear_bias(), [CPU, A100, V100], [1],
               estimator="time-roofline")
    assert list(df["device"]) == [CPU, A100, V100]
    assert list(df["runtime"]) == ["onnxruntime-cpu", "pytorch-eager", "pytorch-eager"]
    one = predict_graph(graphs.linear_bias(), A100, RunConfig(), "time-roofline")
    assert df.loc[df["device"] == A100, "time_s"].iloc[0] == pytest.approx(one.time_s)
    named = sweep(lambda b: graphs.linear_bias(), [CPU, A100], [1], runtime="torch-compile")
    assert set(named["runtime"]) == {"torch-compile"}


def test_tf32_on_ampere_for_the_families_the_runtime_runs_as_tf32():
    conv, mm = graphs.conv_relu(), graphs.linear_bias()
    cfg = RunConfig()

    def peak(graph, device, runtime):
        prof = get_runtime(runtime)
        w = workload_table(graph, cfg, prof)
        f = featurize(w, get_device(device), cfg, prof)
        row = f[f["engine"] == "matrix"].iloc[0]
        return row["peak_dtype"], row["peak_flops_per_s"]

    a100 = get_device(A100)
    # PyTorch: cuDNN TF32 on by default, matmul TF32 off
    assert peak(conv, A100, "pytorch-eager") == ("tf32", a100.peak("matrix", "tf32").flops_per_s)
    assert peak(mm, A100, "pytorch-eager")[0] == "fp32"
    # TensorRT: TF32 for GEMMs too
    assert peak(mm, A100, "tensorrt")[0] == "tf32"
    # V100 has no TF32 unit: fp32 stays fp32
    assert peak(conv, V100, "pytorch-eager")[0] == "fp32"
    # PyTorch with cudnn.allow_tf32 = False: convolutions stay fp32 too
    assert peak(conv, A100, "pytorch-eager-fp32-strict") == (
        "fp32", a100.peak("matrix", "fp32").flops_per_s)
    assert peak(mm, A100, "pytorch-eager-fp32-strict")[0] == "fp32"
    # fp16 runs are untouched
    w16 = workload_table(conv, RunConfig(precision="fp16"), "pytorch-eager")
    f16 = featurize(w16, a100, RunConfig(precision="fp16"), get_runtime("pytorch-eager"))
    assert set(f16["peak_dtype"]) >= {"fp16"}


def test_featurize_runtime_columns_and_the_learned_inputs_stay():
    w = workload_table(graphs.linear_bias(), RunConfig(), "pytorch-eager")
    hw = get_device(A100)
    bare = featurize(w, hw, RunConfig())
    eager = featurize(w, hw, RunConfig(), get_runtime("pytorch-eager"))
    assert list(eager["runtime"]) == ["pytorch-eager"]
    assert list(eager["learned_from"]) == ["pytorch-eager"]
    assert eager["dispatch_floor_s"].iloc[0] == pytest.approx(15e-6)
    assert list(bare["runtime"]) == [""]
    assert bare["dispatch_floor_s"].iloc[0] == bare["launch_overhead_s"].iloc[0]
    # the device's own columns (the learned models' inputs) do not move with the runtime
    shared = [c for c in bare.columns if c not in ("runtime", "learned_from", "dispatch_floor_s")]
    assert bare[shared].equals(eager[shared])
    with pytest.raises(PredictionError, match="does not run on"):
        featurize(w, get_device(CPU), RunConfig(), get_runtime("tensorrt"))


def test_fusion_on_a_runtime_without_fusions_says_so():
    p = predict_graph(graphs.linear_bias(), A100, RunConfig(fusion=True), "roofline")
    assert any("changes nothing" in n for n in p.notes)


def test_a_profile_object_runs_through_a_sweep_like_a_name():
    from tests.predictor.graph_helpers import AS_WRITTEN, batched_chain, priced_devices

    df = sweep(batched_chain, priced_devices(), [2], estimator="time-roofline",
               runtime=AS_WRITTEN)
    assert set(df["runtime"]) == {"as-written"}
    one = predict_graph(batched_chain(2), priced_devices()[1],
                        RunConfig(dims={"batch": 2}, runtime=AS_WRITTEN), "time-roofline")
    assert df.loc[df["device"] == "fast", "time_s"].iloc[0] == pytest.approx(one.time_s)
