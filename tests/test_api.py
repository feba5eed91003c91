"""The Python API (``roofcast/__init__`` -> ``roofcast.api``), starting with the README example."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import roofcast
from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.graph_import import import_model
from roofcast.graph_import.errors import ModelImportError
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.simulate import predict_graph
from roofcast.training_data import zoo
from tests.predictor.learned_helpers import measurement_csv_file

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    """The python block of the README's "Python API" section, as written there."""
    section = README.read_text().split("## Python API", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_example(capsys):
    example = readme_example()
    assert "roofcast.predict(" in example
    exec(compile(example, "README example", "exec"), {})
    out = capsys.readouterr().out
    assert "ms (" in out
    assert f", {GRAPH_ESTIMATOR}\n" in out  # the summary names the default road
    assert "speedup" in out
    assert "GiB" in out


def test_acceptance_one_liner_equals_the_library_pipeline():
    """``roofcast.predict('resnet50', 'a100-40gb-pcie', batch=8).total_ms`` is predict_graph of
    the model imported at batch 8 with the default config, in milliseconds."""
    got = roofcast.predict("resnet50", "a100-40gb-pcie", batch=8)
    graph = import_model(zoo.model_path("resnet50"), dims={"batch": 8})
    want = predict_graph(graph, "a100-40gb-pcie", RunConfig(dims={"batch": 8}))
    assert got.total_ms == want.total_s * 1e3
    assert got.config == want.config
    assert got.config.batch == 8
    assert got.estimator == GRAPH_ESTIMATOR


def test_import_roofcast_is_cheap():
    """``import roofcast`` loads no numpy/pandas: the API is imported on first attribute use."""
    code = "import sys, roofcast; print(sorted({'numpy', 'pandas', 'onnx'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_load_model_binds_dims_once_with_batch_1_by_default():
    m = roofcast.load_model("resnet50")
    assert m.batch == 1
    assert m.graph.unbound_dims == ()
    m8 = m.at(batch=8)
    assert m8.batch == 8
    assert m.at(batch=1) is m
    raw = zoo.model_path("resnet50").read_bytes()
    assert roofcast.load_model(raw, batch=8).graph.dims == m8.graph.dims
    p = roofcast.predict(m, "h100-sxm", batch=8)  # re-binds the loaded model
    assert p.config.dims == {"batch": 8}


def test_dims_by_mapping_for_names_that_are_not_identifiers():
    m = roofcast.load_model("gpt2", {"input_ids:1": 32})
    assert m.graph.unbound_dims == ()
    assert m.dims["input_ids:1"] == 32


def test_estimator_objects_carry_their_parameters():
    floor = roofcast.predict("resnet50", "h100-sxm", estimator="time-roofline")
    additive = roofcast.predict("resnet50", "h100-sxm",
                                estimator=roofcast.make_estimator("time-roofline",
                                                                  overhead="additive"))
    assert additive.total_s > floor.total_s
    assert additive.estimator == floor.estimator == "time-roofline"


def test_learned_prediction_exposes_ood_flags_and_the_end_to_end_summary():
    p = roofcast.predict("resnet50", "xeon-8480plus", estimator="auto")
    assert p.estimator == "auto"
    assert isinstance(p.ood, bool)
    assert 0 <= p.ood_ops <= len(p.per_op)
    assert p.summary["sum_ops_s"] == pytest.approx(p.total_s)


def test_sweep_and_compare_agree_with_predict():
    devices = ["a100-40gb-pcie", "h100-sxm", "xeon-8480plus"]
    sw = roofcast.sweep("resnet50", devices, [1, 4], precisions=["fp32"])
    cmp = roofcast.compare("resnet50", devices, batch=4)
    for hw in devices:
        want = roofcast.predict("resnet50", hw, batch=4).total_s
        row = sw[(sw["device"] == hw) & (sw["batch"] == 4)]
        assert np.isclose(float(row["time_s"].iloc[0]), want, rtol=1e-12)
        assert np.isclose(float(cmp.loc[cmp["device"] == hw, "time_s"].iloc[0]), want, rtol=1e-12)


def test_advise_returns_ranked_settings():
    a = roofcast.advise("mobilenet_v2", "h100-sxm", estimator="time-roofline")
    assert a.estimator == "time-roofline"
    assert a.device == "h100-sxm"
    assert a.table["recommended"].sum() == 1
    assert a.reasons


def test_device_accepts_ids_what_ifs_and_specs():
    hw = roofcast.device("h100-sxm")
    fast = roofcast.device("h100-sxm:mem_bw_scale=2")
    assert fast.mem_bw_Bps == 2 * hw.mem_bw_Bps
    assert roofcast.device(hw) is hw


def test_an_unknown_setting_is_an_error_that_lists_the_known_ones():
    with pytest.raises(PredictionError, match="precision"):
        roofcast.predict("resnet50", "h100-sxm", precison="fp16")


def test_unknown_attribute():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        roofcast.nope  # noqa: B018


def test_train_returns_a_fitted_estimator_that_predict_uses(tmp_path):
    """``roofcast.train`` on a small measurement file: the returned estimator holds the model
    (no environment variable, no saved folder needed) and the saved folder reloads the same."""
    csv = measurement_csv_file(tmp_path / "measurements.csv")
    est = roofcast.train([str(csv)], output=tmp_path / "model", quick=True, mode="learned")
    assert set(est.model_.models) == {"gpu/matmul", "gpu/elementwise"}
    p = roofcast.predict("resnet50", "v100-pcie-32gb", estimator=est)
    saved = roofcast.predict("resnet50", "v100-pcie-32gb",
                             estimator=roofcast.make_estimator("learned",
                                                               model_dir=tmp_path / "model"))
    assert p.estimator == "learned"
    assert p.per_op["predictor"].str.startswith("learned:gpu/matmul").any()
    assert p.total_s == pytest.approx(saved.total_s, rel=1e-9)


def test_an_imported_graph_is_used_as_is():
    graph = import_model(zoo.model_path("resnet50"), dims={"batch": 2})
    assert roofcast.predict(graph, "h100-sxm").config.batch == 2
    assert roofcast.predict(graph, "h100-sxm", batch=2).total_s > 0
    with pytest.raises(ModelImportError, match="cannot be re-bound"):
        roofcast.predict(graph, "h100-sxm", batch=4)


# ----------------------------------------------------------------------------- runtimes
def test_runtimes_are_the_catalog_profiles():
    from roofcast.predictor.runtimes import get_runtime, runtime_names

    profiles = roofcast.runtimes()
    assert [p.name for p in profiles] == list(runtime_names())
    assert all(isinstance(p, roofcast.ExecutionProfile) for p in profiles)
    assert profiles[0] == get_runtime(profiles[0].name)
    assert all(p.description and p.device_kinds and p.source for p in profiles)


def test_runtime_reaches_predict_sweep_compare_and_advise():
    """``runtime=`` is a setting like precision: every call models the runtime it was given,
    and a call without one models the device kind's default."""
    from roofcast.predictor.runtimes import default_runtime_name

    assert roofcast.predict("resnet50", "h100-sxm", runtime="tensorrt").runtime == "tensorrt"
    sw = roofcast.sweep("resnet50", ["h100-sxm"], [1, 2], runtime="torch-compile")
    assert set(sw["runtime"]) == {"torch-compile"}
    cmp = roofcast.compare("resnet50", ["h100-sxm"], runtime="tensorrt")
    assert set(cmp["runtime"]) == {"tensorrt"}
    advice = roofcast.advise("mobilenet_v2", "xeon-8480plus", estimator="time-roofline",
                             runtime="torch-compile")
    assert advice.runtime == "torch-compile"
    assert roofcast.predict("resnet50", "h100-sxm").runtime == default_runtime_name("gpu")


def test_compare_and_sweep_name_the_runtime_of_each_device():
    from roofcast.predictor.runtimes import default_runtime_name

    df = roofcast.compare("resnet50", ["h100-sxm", "xeon-8480plus"])
    assert list(df["runtime"]) == [default_runtime_name("gpu"), default_runtime_name("cpu")]
    sw = roofcast.sweep("resnet50", ["h100-sxm", "xeon-8480plus"], [1, 2],
                        runtime="torch-compile")
    assert set(sw["runtime"]) == {"torch-compile"}
    assert len(sw) == 4


@pytest.mark.parametrize("call", [
    lambda: roofcast.predict("resnet50", "h100-sxm", runtime="onnxruntime-cpu"),
    lambda: roofcast.compare("resnet50", ["xeon-8480plus", "h100-sxm"], runtime="onnxruntime-cpu"),
    lambda: roofcast.sweep("resnet50", ["h100-sxm"], [1], runtime="onnxruntime-cpu"),
    lambda: roofcast.advise("resnet50", "h100-sxm", runtime="onnxruntime-cpu"),
])
def test_a_runtime_that_does_not_run_on_the_device_is_refused(call):
    with pytest.raises(PredictionError, match="runs on cpu devices, not gpu; for a gpu choose"):
        call()


def test_an_unknown_runtime_lists_the_runtimes():
    with pytest.raises(PredictionError, match=r"unknown runtime 'eager'.*pytorch-eager"):
        roofcast.predict("resnet50", "h100-sxm", runtime="eager")
