"""``roofcast inspect``: the per-op table in three formats, and one-line errors (exit 2)."""

import csv
import io
import json

import pytest
from onnx import TensorProto, helper

from roofcast.app.cli import main
from roofcast.graph_import import import_model
from roofcast.graph_import.summary import totals
from roofcast.graph_import.types import Engine
from roofcast.training_data import zoo


def _tiny_model(path, batch_dim="batch"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 64])
    w = helper.make_tensor("w", TensorProto.FLOAT, [64, 32], [0.0] * (64 * 32))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])]
    out = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "tiny", [x], [out], initializer=[w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    path.write_bytes(model.SerializeToString())
    return path


def test_json_totals_match_the_library(capsys):
    assert main(["inspect", "resnet50", "--batch", "2", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    graph = import_model(zoo.model_path("resnet50"), dims={"batch": 2})
    expected = totals(graph)
    assert doc["gflop"] == pytest.approx(expected["gflop"])
    assert doc["params"] == expected["params"]
    kernels = [op for op in graph.ops() if op.cost.engine is not Engine.FREE]
    assert len(doc["ops"]) == len(kernels) == len(graph) - 1  # all but the free Flatten
    assert doc["by_op_type"][0]["op_type"] == "Conv"


def test_table_top_and_csv(tmp_path, capsys):
    path = _tiny_model(tmp_path / "tiny.onnx")
    assert main(["inspect", str(path), "--dim", "batch=4", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "== ops ==" in out
    assert "MatMul" in out
    assert main(["inspect", str(path), "--batch", "4", "--format", "csv", "--sort", "order"]) == 0
    text = capsys.readouterr().out
    ops_csv = text.split("# by_op_type")[0].replace("# ops\n", "")
    rows = list(csv.DictReader(io.StringIO(ops_csv)))
    assert [r["op_type"] for r in rows] == ["MatMul", "Relu"]
    assert float(rows[0]["gflop"]) == pytest.approx(2 * 4 * 64 * 32 / 1e9)


def test_unbound_dim_is_named_with_a_hint(tmp_path, capsys):
    path = _tiny_model(tmp_path / "tiny.onnx", batch_dim="n")
    assert main(["inspect", str(path)]) == 0
    captured = capsys.readouterr()
    assert "unresolved node" in captured.out
    assert "symbolic dims not bound: n" in captured.err
    assert "--dim n=N" in captured.err


def test_batch_defaults_to_1(capsys):
    """Without --batch a model with a batch dim is inspected at batch 1, nothing unresolved."""
    assert main(["inspect", "resnet50", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dims"] == {"batch": 1}
    assert doc["unresolved_nodes"] == 0
    one = totals(import_model(zoo.model_path("resnet50"), dims={"batch": 1}))
    assert doc["gflop"] == pytest.approx(one["gflop"])


def test_table_shows_15_largest_ops_by_default(capsys):
    assert main(["inspect", "resnet50"]) == 0
    out = capsys.readouterr().out
    ops = out.split("== ops ==\n")[1].split("\n\n")[0].splitlines()
    assert len(ops) == 1 + 15 + 1  # header, 15 rows, the count line
    assert ops[-1] == "(15 of 121 rows; --top 0 shows all)"
    assert main(["inspect", "resnet50", "--top", "0"]) == 0
    ops = capsys.readouterr().out.split("== ops ==\n")[1].split("\n\n")[0].splitlines()
    assert len(ops) == 1 + 121


def test_dim_name_the_model_lacks_is_an_error_listing_its_dims(tmp_path, capsys):
    assert main(["inspect", "gpt2", "--dim", "seq=128"]) == 2
    err = capsys.readouterr().err
    assert "has no dim named 'seq'" in err
    assert "its symbolic dims are: batch, sequence" in err
    assert err.count("\n") == 1
    # an explicit --batch on a model whose batch dim has another name is an error too
    path = _tiny_model(tmp_path / "tiny.onnx", batch_dim="n")
    assert main(["inspect", str(path), "--batch", "4"]) == 2
    assert "its symbolic dims are: n" in capsys.readouterr().err
    assert main(["inspect", str(path), "--dim", "n=4"]) == 0  # no batch dim: no default
    assert "'n': 4" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "no_such_model"], "no file 'no_such_model' and no zoo model of that name"),
        (["inspect", "resnet50", "--dim", "batch"], "bad --dim 'batch'"),
        (["inspect", "resnet50", "--dim", "batch=-3"], "out of range"),
        (["inspect", "resnet50", "--batch", "2", "--dim", "batch=3"], "contradicts"),
    ],
)
def test_user_errors_are_one_line_exit_2(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_garbage_file_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not an onnx file at all")
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofcast inspect: error:")
    assert err.count("\n") == 1
