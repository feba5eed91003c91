"""`roofcast advise` through app.cli.main on a tiny ONNX model (catalog CPU, and a synthetic
``local`` device for --verify)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from roofcast.app.cli import main

LOCAL_TOML = """
id = "local"
name = "local: test CPU"
vendor = "test"
kind = "cpu"
architecture = "test"
sources = ["written by the advise CLI test"]

[compute]
units = 2
unit_name = "core"
boost_clock_MHz = 2000

[peak_TOPS.matrix]
fp32 = 0.05

[peak_TOPS.vector]
fp32 = 0.05

[memory]
capacity_GB = 4
bandwidth_GBps = 10
type = "DRAM"

[cache]
l2_MB = 4

[overhead]
launch_overhead_us = 5
"""


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory):
    """x[batch, 64] @ w[64, 32] -> Relu, and x @ w2 -> Relu in parallel, then Add."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    rng = np.random.default_rng(0)
    w = [numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), f"w{i}")
         for i in (1, 2)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
             helper.make_node("Relu", ["h1"], ["r1"], name="relu1"),
             helper.make_node("MatMul", ["x", "w2"], ["h2"], name="mm2"),
             helper.make_node("Relu", ["h2"], ["r2"], name="relu2"),
             helper.make_node("Add", ["r1", "r2"], ["y"], name="join")]
    graph = helper.make_graph(nodes, "mlp2", [x], [y], initializer=w)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("models") / "mlp2.onnx"
    onnx.save(model, path)
    return str(path)


@pytest.fixture
def local_device(tmp_path, monkeypatch):
    (tmp_path / "local.toml").write_text(LOCAL_TOML)
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(tmp_path))
    return tmp_path


def run_json(capsys, *argv):
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_advise_json_has_default_and_recommendation(mlp_path, capsys):
    doc = run_json(capsys, "advise", mlp_path, "--hw", "xeon-8480plus", "--objective",
                   "throughput", "--max-batch", "8", "--estimator", "time-roofline")
    rows = doc["settings"]
    assert sum(r["is_default"] for r in rows) == 1
    assert sum(r["recommended"] for r in rows) == 1
    default = next(r for r in rows if r["is_default"])
    assert default["intra_threads"] == 56  # ONNX Runtime default: all physical cores
    assert default["inter_op"] is False
    assert default["opt_level"] == "all"
    assert default["gain"] == pytest.approx(1.0)
    assert {r["batch"] for r in rows} == {1, 2, 4, 8}
    assert doc["reasons"][0]["reason"].startswith(("recommended", "keep the default"))
    assert doc["default"] == "intra=56 inter=sequential batch=1 fp32 opt=all"


def test_advise_table_prints_reasons(mlp_path, capsys):
    assert main(["advise", mlp_path, "--hw", "xeon-8480plus", "--top", "3",
                 "--estimator", "time-roofline"]) == 0
    out = capsys.readouterr().out
    assert "== settings ==" in out
    assert "== reasons ==" in out
    assert "critical path" in out


def test_verify_on_a_catalog_device_is_a_one_line_error(mlp_path, capsys):
    assert main(["advise", mlp_path, "--hw", "xeon-8480plus", "--verify"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--hw local" in err
    assert "Traceback" not in err


def test_verify_smoke_on_local(mlp_path, capsys, local_device):
    doc = run_json(capsys, "advise", mlp_path, "--hw", "local", "--objective", "throughput",
                   "--max-batch", "4", "--estimator", "time-roofline", "--verify",
                   "--repeats", "3", "--warmup", "1")
    roles = {r["role"]: r for r in doc["verify"]}
    # a second default session (A/A) whenever the recommendation is not the default
    assert set(roles) == ({"default", "recommended"} if doc["recommended"] == doc["default"]
                          else {"default", "recommended", "default_again"})
    for r in roles.values():
        assert r["measured_ms"] > 0
        assert r["measured_samples_per_s"] == pytest.approx(r["batch"] / r["measured_ms"] * 1e3)
    measured = (roles["recommended"]["measured_samples_per_s"]
                / roles["default"]["measured_samples_per_s"])
    assert doc["measured_gain"] == pytest.approx(measured, rel=1e-3)
    assert doc["gain_error"] == pytest.approx(doc["predicted_gain"] / doc["measured_gain"] - 1,
                                              abs=2e-3)
    assert doc["measured_noise"] >= 0
    aa = (roles["default_again"] if "default_again" in roles else roles["recommended"])
    assert doc["session_noise"] == pytest.approx(abs(aa["measured_gain"] - 1), abs=1e-9)
    assert doc["measured_noise"] >= doc["session_noise"]


def test_verify_refuses_a_runtime_it_does_not_measure(mlp_path, capsys, local_device):
    """--verify times ONNX Runtime: advice for torch.compile cannot be checked by it."""
    assert main(["advise", mlp_path, "--hw", "local", "--verify", "--runtime",
                 "torch-compile"]) == 2
    err = capsys.readouterr().err
    assert "--verify measures the run with onnxruntime-cpu, not torch-compile" in err
    assert "Traceback" not in err


def test_advise_on_a_gpu_speaks_of_the_runtime_that_runs_there(mlp_path, capsys):
    """A GPU runs pytorch-eager: no ONNX Runtime wording, and no fusion setting (the runtime
    has no graph-optimiser fusions, so on and off would be the same kernels)."""
    doc = run_json(capsys, "advise", mlp_path, "--hw", "a100-40gb-pcie",
                   "--estimator", "time-roofline")
    text = json.dumps(doc)
    assert "ONNX Runtime" not in text
    assert doc["runtime"] == "pytorch-eager"
    assert "opt=" not in doc["default"]
    assert {r["opt_level"] for r in doc["settings"]} == {"n/a"}
    reasons = [r["reason"] for r in doc["reasons"]]
    assert "default of pytorch-eager" in reasons[0]
    assert not any("instead of" in r for r in reasons)  # no "N kernels instead of N"
    assert any("graph optimisation not searched: pytorch-eager" in n["note"]
               for n in doc["notes"])
