"""`roofcast train` on a small measurement file.

Then `predict`/`compare --estimator learned|auto`.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from roofcast.app.cli import main
from tests.predictor.learned_helpers import measurement_csv_file


@pytest.fixture(scope="module")
def measurement_csv(tmp_path_factory):
    """``learned_helpers.measurement_csv_file``, once for the module."""
    return measurement_csv_file(tmp_path_factory.mktemp("data") / "measurements.csv")


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 512])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.zeros((512, 256), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="relu"),
             ]
    graph = helper.make_graph(nodes, "mlp", [x], [y], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("models") / "mlp.onnx"
    onnx.save(model, path)
    return str(path)


@pytest.fixture(scope="module")
def trained(measurement_csv, tmp_path_factory):
    """(model folder, JSON report) of one `roofcast train` run on the file."""
    out = tmp_path_factory.mktemp("learned")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["train", "--from", str(measurement_csv), "--output", str(out), "--quick",
                     "--holdout-device", "t4", "--per-group", "--format", "json"]) == 0
    return out, json.loads(buf.getvalue())


@pytest.fixture(scope="module")
def model_dir(trained):
    return trained[0]


def test_train_on_a_file_validates_and_saves(trained):
    out, doc = trained
    assert {r["key"] for r in doc["per_family"]} == {"gpu/matmul", "gpu/elementwise"}
    fam = {r["key"]: r for r in doc["per_family"]}
    assert (
        fam["gpu/matmul"]["learned_median_ape_pct"] < fam["gpu/matmul"]["analytical_median_ape_pct"]
    )
    assert {r["group"] for r in doc["per_group"]} == {"device:v100-pcie-32gb",
                                                      "device:p100-pcie-16gb"}
    assert doc["held_out_rows"] == 80
    assert {r["key"] for r in doc["holdout_per_family"]} == {"gpu/matmul", "gpu/elementwise"}
    assert (out / "metadata.json").is_file()
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["holdout_devices"] == ["t4"]
    assert doc["saved_to"] == str(out)


def test_train_bad_source_is_one_line(capsys):
    assert main(["train", "--from", "nowhere", "--no-save"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "unknown training source" in err


def test_predict_and_compare_with_learned_and_auto(model_dir, mlp_path, capsys, monkeypatch):
    monkeypatch.setenv("ROOFCAST_LEARNED_MODEL", str(model_dir))
    assert main(["predict", mlp_path, "--hw", "t4", "--batch", "64", "--estimator", "auto",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ops = {r["op_type"]: r for r in doc["ops"]}
    # the MatMul takes the learned matmul family; the T4's per-kernel host cost (its launch
    # overhead, above the eager floor the synthetic rows carry) is outside the training range,
    # so auto may transfer it
    assert ops["MatMul"]["predictor"].split(":")[1] == "gpu/matmul"
    assert ops["MatMul"]["predictor"].startswith("learned")
    # the elementwise model saw only two-input Adds (written/read = 0.5): a one-input Relu
    # (written/read = 1) is outside its range, so auto transfers the family's efficiency
    # (bounded, wider interval) instead of switching road
    assert ops["Relu"]["ood"]
    assert "write_over_read" in ops["Relu"]["ood_reason"]
    assert ops["Relu"]["predictor"].startswith("learned (transferred):gpu/elementwise")
    assert doc["e2e_lower_ms"] <= doc["e2e_estimate_ms"] <= doc["e2e_upper_ms"]
    assert main(["compare", mlp_path, "--hw", "t4,v100-pcie-32gb", "--estimator", "learned",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["device"] for r in doc["devices"]] == ["t4", "v100-pcie-32gb"]
    assert all(r["time_ms"] > 0 for r in doc["devices"])


def test_train_from_the_measurement_store_with_a_device_filter(measurement_csv, tmp_path, capsys):
    from roofcast.training_data.importers import import_file
    from roofcast.training_data.store import Store

    store = tmp_path / "store.sqlite"
    assert import_file(measurement_csv, Store(store)).added == 240
    assert main(["train", "--from", "store", "--store", str(store), "--devices",
                 "t4,v100-pcie-32gb", "--no-save", "--quick", "--per-group", "--format",
                 "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["training_rows"] == 160
    assert {r["group"] for r in doc["per_group"]} == {"device:t4", "device:v100-pcie-32gb"}
    assert "saved_to" not in doc
