"""`roofcast predict` and `roofcast compare` through app.cli.main, on a tiny ONNX model."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from roofcast.app.cli import main
from tests.predictor.sweeps.helpers import write_mlp


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory):
    """x[batch, 64] @ w[64, 32] + b[32] -> Relu -> y."""
    return str(write_mlp(tmp_path_factory.mktemp("models") / "mlp.onnx"))


def run_json(capsys, *argv):
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_predict_table(mlp_path, capsys):
    assert main(["predict", mlp_path, "--hw", "a100-40gb-sxm", "--batch", "4"]) == 0
    out = capsys.readouterr().out
    for section in ("== ops ==", "== by_op_type ==", "== by_bound ==", "== by_phase ==",
                    "== memory =="):
        assert section in out
    assert "device: a100-40gb-sxm" in out
    assert "total_ms:" in out


def test_predict_json_infer_and_train(mlp_path, capsys):
    doc = run_json(capsys, "predict", mlp_path, "--hw", "h100-sxm", "--batch", "4")
    assert len(doc["ops"]) == 2  # pytorch-eager (a GPU's default): the bias add is in addmm
    assert doc["dims"] == {"batch": 4}
    assert doc["throughput_samples_per_s"] == pytest.approx(4 / (doc["time_ms"] / 1e3))
    assert sum(r["time_ms"] for r in doc["by_phase"]) == pytest.approx(doc["total_ms"])
    train = run_json(capsys, "predict", mlp_path, "--hw", "h100-sxm", "--batch", "4",
                     "--mode", "train", "--optimizer", "sgd_momentum")
    assert {r["phase"] for r in train["by_phase"]} == {"forward", "backward", "update"}
    assert train["total_ms"] > doc["total_ms"]
    mem = {r["component"]: r["GiB"] for r in train["memory"]}
    assert mem["optimizer state"] == pytest.approx(4 * (64 * 32 + 32) / 2**30)


def test_the_default_road_on_a_cpu_is_learned_and_prints_its_summary(mlp_path, capsys):
    """best-measured times CPUs with ``auto`` (roofcast/defaults.py): the road says so and the
    learned end-to-end estimate is printed beside the total; a GPU's analytical part prints
    none."""
    doc = run_json(capsys, "predict", mlp_path, "--hw", "epyc-9755", "--batch", "4")
    assert doc["estimator"] == "best-measured"
    assert doc["road"].startswith("best-measured: learned")
    assert doc["e2e_lower_ms"] <= doc["e2e_estimate_ms"] <= doc["e2e_upper_ms"]
    gpu = run_json(capsys, "predict", mlp_path, "--hw", "h100-sxm", "--batch", "4")
    assert gpu["road"] == "best-measured: roofline+eff 100%"
    assert "e2e_estimate_ms" not in gpu


def test_predict_fusion_top_and_csv(mlp_path, capsys):
    # epilogue fusion is ONNX Runtime's (a CPU's default runtime); eager PyTorch has none
    doc = run_json(capsys, "predict", mlp_path, "--hw", "epyc-9654", "--batch", "2", "--fusion")
    assert [r["op_type"] for r in doc["ops"]] == ["MatMul+Add+Relu"]
    doc = run_json(capsys, "predict", mlp_path, "--hw", "t4", "--dim", "batch=2", "--top", "1",
                   "--inter-op", "--max-batch", "--estimator", "time-roofline")  # its numbers
    assert len(doc["ops"]) == 1
    assert doc["critical_path_ms"] == pytest.approx(doc["total_ms"])  # a chain: no overlap
    assert [r["node"] for r in doc["critical_path"]] == ["mm"]  # --top 1
    assert doc["max_batch_that_fits"] > 1000
    assert main(["predict", mlp_path, "--hw", "t4", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    ops_csv = out.split("# ops\n")[1].split("\n# ")[0]
    assert len(pd.read_csv(io.StringIO(ops_csv))) == 2  # MatMul+Add (addmm), Relu


def test_compare_devices(mlp_path, capsys):
    doc = run_json(
        capsys,
        "compare",
        mlp_path,
        "--hw",
        "t4,a100-40gb-sxm,h100-sxm:mem_bw_GBps=6700",
        "--baseline",
        "a100-40gb-sxm",
        "--batch",
        "8",
        "--precision",
        "fp16",
    )
    rows = {r["device"]: r for r in doc["devices"]}
    assert len(rows) == 3
    assert rows["a100-40gb-sxm"]["speedup"] == 1.0
    assert doc["baseline"] == "a100-40gb-sxm"
    for r in rows.values():
        assert r["throughput_per_s"] == pytest.approx(8 / (r["time_ms"] / 1e3))
        assert r["fits"] is True
    t4 = rows["t4"]
    assert t4["usd_per_throughput"] == pytest.approx(t4["price_usd"] / t4["throughput_per_s"])
    assert main(["compare", mlp_path, "--hw", "t4,l4", "--mode", "train"]) == 0
    assert "== devices ==" in capsys.readouterr().out


def test_compare_zoo_model_by_name(capsys):
    doc = run_json(capsys, "compare", "resnet50", "--hw", "v100-sxm2-16gb,a100-80gb-sxm",
                   "--batch", "16")
    a100, v100 = doc["devices"][1], doc["devices"][0]
    assert a100["speedup"] > 1 > v100["speedup"] * 0.999


@pytest.mark.parametrize(("argv", "message"), [
    (["predict", "{m}", "--hw", "t4", "--estimator", "magic"], "unknown estimator"),
    (["predict", "{m}", "--hw", "t4", "--precision", "fp12"], "precision='fp12'"),
    (["predict", "{m}", "--hw", "t4", "--mode", "serve"], "mode='serve'"),
    (["predict", "{m}", "--hw", "h100-smx"], "h100"),
    (["predict", "no/such/model.onnx", "--hw", "t4"], "no file"),
    (["compare", "{m}", "--hw", "t4,l4", "--baseline", "a100-40gb-sxm"], "not among"),
    (["compare", "{m}", "--hw", ","], "lists no device"),
])
def test_bad_arguments_exit_2_with_one_line(mlp_path, capsys, argv, message):
    assert main([a.replace("{m}", mlp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert message in err


def test_seq_binds_an_onnx_models_sequence_dim(capsys):
    by_seq = run_json(capsys, "predict", "bert_base", "--hw", "h100-sxm", "--seq", "32")
    by_dim = run_json(capsys, "predict", "bert_base", "--hw", "h100-sxm", "--dim", "sequence=32")
    assert by_seq["dims"]["sequence"] == 32
    assert by_seq["total_ms"] == by_dim["total_ms"]
    assert main(["predict", "bert_base", "--hw", "h100-sxm", "--seq", "32", "--dim",
                 "sequence=64"]) == 2
    assert "contradicts" in capsys.readouterr().err
