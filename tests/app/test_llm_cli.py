"""``roofcast llm`` through ``app.cli.main``: real serving predictions (``roofcast.llm``, the
bundled configs, the serving model), outputs in every format, every user error as one line
without a traceback, and the atomic ``--output``."""

from __future__ import annotations

import csv
import io
import json

import pytest

import roofcast
from roofcast.app.cli import main
from tests.app.test_cli_imports import heavy_modules_after
from tests.graph_import.llm.decoder_fixtures import tiny_decoder

THREE = "h100-sxm,h200,mi300x"
#: the issue's one command, and the same run through the API.
ONE_COMMAND = ("llm", "llama-3.1-70b", "--hw", THREE, "--input-tokens", "2048",
               "--output-tokens", "256", "--weights", "fp8")
JSON_KEYS = ("ttft_ms", "tpot_ms", "e2e_latency_ms", "output_tokens_per_s",
             "total_tokens_per_s", "max_batch", "memory_GiB")


def run_out(capsys, *argv) -> tuple[str, str]:
    assert main(list(argv)) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def run_json(capsys, *argv) -> dict:
    out, _ = run_out(capsys, *argv, "--format", "json")
    return json.loads(out)


def user_error(capsys, *argv) -> str:
    """stderr of a user error found by the command (exit 2, one line, no traceback)."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("roofcast llm: error: ")
    assert len(err.strip().splitlines()) == 1, err
    return err


def arg_error(capsys, *argv) -> str:
    """stderr of a bad argument refused by argparse (exit 2, the usage then the error)."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.split("roofcast llm: error: ", 1)[1]


# ----------------------------------------------------------------------------- outputs
def test_one_device_table_prints_every_metric_with_its_interval(capsys):
    out, _ = run_out(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--input-tokens", "1024",
                     "--output-tokens", "128")
    pred = roofcast.llm("llama-3.1-8b", "h100-sxm", input_tokens=1024, output_tokens=128)
    for line in ("model: llama-3.1-8b", "device: h100-sxm", f"runtime: {pred.runtime}",
                 f"estimator: {pred.estimator}", f"max_batch: {pred.max_batch}",
                 "== metrics ==", "== memory =="):
        assert line in out
    metrics = out.split("== metrics ==\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert metrics[0].split() == ["metric", "value", "lower", "upper", "unit"]
    ttft = next(r for r in metrics if r.startswith("TTFT")).split()
    assert float(ttft[1]) == pytest.approx(pred.ttft_s * 1e3, rel=1e-3)  # 4 significant digits
    assert float(ttft[2]) <= float(ttft[1]) <= float(ttft[3])
    for label in ("TPOT", "end-to-end latency", "output tokens/s", "total tokens/s"):
        assert any(r.startswith(label) for r in metrics), label
    memory = out.split("== memory ==\n", 1)[1]
    for part in ("weights", "KV cache", "activations", "engine reserve", "device capacity"):
        assert part in memory


def test_one_device_json_has_the_issue_keys_at_full_precision(capsys):
    doc = run_json(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--batch", "4")
    pred = roofcast.llm("llama-3.1-8b", "h100-sxm", batch=4)
    want = pred.as_dict()
    for key in JSON_KEYS:
        assert doc[key] == want[key], key  # full precision, the library's own record
    assert doc["ttft_ms"] == pytest.approx(pred.ttft_s * 1e3, rel=1e-12)
    assert doc["device"] == "h100-sxm"
    assert doc["runtime"] == pred.runtime
    assert doc["estimator"] == pred.estimator
    assert doc["model"] == "llama-3.1-8b"
    assert doc["config"]["batch"] == 4
    assert doc["config"]["input_tokens"] == 512
    assert isinstance(doc["notes"], list)


def test_several_devices_one_row_each_with_speedup_over_the_first(capsys):
    doc = run_json(capsys, *ONE_COMMAND)
    rows = doc["devices"]
    assert [r["device"] for r in rows] == THREE.split(",")
    for row in rows:  # each device as the API predicts it alone, in the same record
        want = roofcast.llm("llama-3.1-70b", row["device"], input_tokens=2048,
                            output_tokens=256, weights="fp8").as_dict()
        for key in JSON_KEYS:
            assert row[key] == pytest.approx(want[key], rel=1e-9), key
        assert row["speedup"] == pytest.approx(
            row["output_tokens_per_s"] / rows[0]["output_tokens_per_s"], rel=1e-12)
        assert row["ttft_ms_lower"] <= row["ttft_ms"] <= row["ttft_ms_upper"]
    assert rows[0]["speedup"] == 1.0
    assert doc["config"]["weights"] == "fp8"
    out, _ = run_out(capsys, *ONE_COMMAND)
    for section in ("== devices ==", "== memory ==", "== intervals =="):
        assert section in out
    assert "baseline: h100-sxm" in out


def test_csv_has_one_row_per_device_and_full_precision(capsys):
    out, err = run_out(capsys, *ONE_COMMAND, "--format", "csv")
    assert "roofcast llm: note: mi300x: " in err  # the notes, outside the rows
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["device"] for r in rows] == THREE.split(",")
    for key in JSON_KEYS:
        assert key in rows[0]
    doc = run_json(capsys, *ONE_COMMAND)
    assert float(rows[1]["tpot_ms"]) == doc["devices"][1]["tpot_ms"]


def test_onnx_decoder_and_config_json_paths_are_models(capsys, tmp_path):
    onnx_path = tmp_path / "tiny.onnx"
    onnx_path.write_bytes(tiny_decoder(kv_heads=1))
    doc = run_json(capsys, "llm", str(onnx_path), "--hw", "h100-sxm", "--output-tokens", "16")
    want = roofcast.llm(str(onnx_path), "h100-sxm", output_tokens=16)
    assert doc["model"] == "tiny"
    assert doc["tpot_ms"] == want.tpot_s * 1e3
    folder = tmp_path / "downloaded"
    folder.mkdir()
    config = {"model_type": "mistral", "hidden_size": 1024, "intermediate_size": 4096,
              "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
              "vocab_size": 32000, "max_position_embeddings": 4096}
    (folder / "config.json").write_text(json.dumps(config))
    doc = run_json(capsys, "llm", str(folder), "--hw", "h100-sxm")
    assert doc["memory_GiB"]["kv_cache"] == pytest.approx(
        (512 + 128) * 2 * 8 * 4 * 64 * 2 / 2**30, rel=1e-12)  # K and V, 8 layers, 4 x 64, fp16
    del config["num_hidden_layers"]
    (folder / "config.json").write_text(json.dumps(config))
    err = user_error(capsys, "llm", str(folder), "--hw", "h100-sxm")
    assert "lacks 'num_hidden_layers'" in err  # the missing field, named


def test_csv_of_one_device_is_its_row(capsys):
    out, _ = run_out(capsys, "llm", "mistral-7b", "--hw", "l4", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 1
    want = roofcast.llm("mistral-7b", "l4")
    assert float(rows[0]["tpot_ms"]) == want.tpot_s * 1e3
    assert float(rows[0]["memory_GiB"]) == want.memory.total_bytes / 2**30
    assert rows[0]["device"] == "l4"


def test_concurrency_max_runs_the_engine_cap_as_a_closed_loop(capsys):
    doc = run_json(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--concurrency", "max",
                   "--output-tokens", "32", "--engine-max-seqs", "64")
    assert doc["config"]["concurrency"] == "max"
    assert doc["road"].startswith("simulated: vllm-v1 policy, closed loop of 64 clients")
    row = doc["devices"][0]
    assert row["clients"] == 64
    assert row["in_flight"] == pytest.approx(64, rel=1e-6)


def test_a_model_too_big_for_one_device_says_how_many_it_needs(capsys):
    doc = run_json(capsys, "llm", "llama-3.1-405b", "--hw", "h100-sxm")
    assert doc["max_batch"] == 0
    assert doc["devices_needed"] > 1
    assert doc["fits"] is False
    assert doc["ttft_ms"] is None  # not predicted, never a made-up number
    assert any("does not fit" in n and str(doc["devices_needed"]) in n for n in doc["notes"])


def test_list_shows_every_bundled_config(capsys):
    doc = run_json(capsys, "llm", "--list")
    names = [r["name"] for r in doc["models"]]
    assert doc["bundled_models"] == len(names) == len(roofcast.llm_configs())
    for name in ("llama-2-7b", "llama-3.1-70b", "mixtral-8x7b", "falcon-180b", "gpt-j-6b"):
        assert name in names
    l70 = next(r for r in doc["models"] if r["name"] == "llama-3.1-70b")
    assert l70["layers"] == 80
    assert 69 < l70["params_B"] < 72
    assert l70["kv_bytes_per_token_fp16"] == 2 * 80 * 8 * 128 * 2  # GQA: 8 KV heads of 128
    out, _ = run_out(capsys, "llm", "--list")
    assert "== models ==" in out


def test_output_file_is_written_whole_and_nothing_on_error(capsys, tmp_path):
    target = tmp_path / "serve.json"
    out, err = run_out(capsys, *ONE_COMMAND, "--format", "json", "--output", str(target))
    assert out == ""
    assert str(target) in err
    doc = json.loads(target.read_text())
    assert [r["device"] for r in doc["devices"]] == THREE.split(",")
    # a failing run leaves the previous file as it was and no temporary file behind
    before = target.read_text()
    user_error(capsys, "llm", "llama-3.1-70b", "--hw", "h100-sxm", "--input-tokens", "1000000",
               "--output", str(target))
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serve.json"]
    missing = tmp_path / "no-such-folder" / "x.json"
    err = user_error(capsys, *ONE_COMMAND, "--output", str(missing))
    assert "does not exist" in err
    assert not missing.parent.exists()


# ----------------------------------------------------------------------------- errors
def test_unknown_model_lists_close_names(capsys):
    err = user_error(capsys, "llm", "llama-3.1-7b", "--hw", "h100-sxm")
    assert "llama-3.1-70b" in err or "llama-3.1-8b" in err


def test_unknown_device_lists_close_ids(capsys):
    err = user_error(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm,h100-sxn")
    assert "h100-sxn" in err
    assert "h100-sxm" in err.split("h100-sxn", 1)[1]


def test_lengths_beyond_the_context_are_refused_with_the_limit(capsys):
    err = user_error(capsys, "llm", "llama-2-7b", "--hw", "h100-sxm", "--input-tokens", "4000",
                     "--output-tokens", "200")
    assert "4096" in err  # Llama-2's context


def test_kv_dtype_the_engine_does_not_run_is_refused(capsys):
    err = user_error(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "llama.cpp",
                     "--kv", "fp8")
    assert "fp8" in err
    assert "llama.cpp" in err


@pytest.mark.parametrize(("argv", "words"), [
    (("--batch", "0"), "0 must be >= 1"),
    (("--concurrency", "0"), "0 must be >= 1"),
    (("--concurrency", "lots"), "'lots' is not an integer"),
    (("--batch", "4", "--concurrency", "8"), "not allowed with argument"),
    (("--format", "xml"), "invalid choice: 'xml'"),
    (("--weights", "int3"), "invalid choice: 'int3'"),
    (("--kv", "int4"), "invalid choice: 'int4'"),
    (("--runtime", "vlm"), "unknown runtime 'vlm'"),
    (("--input-tokens", "-5"), "-5 must be >= 1"),
])
def test_bad_arguments_are_one_line(capsys, argv, words):
    line = arg_error(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", *argv)
    assert words in line


@pytest.mark.parametrize(("argv", "words"), [
    (("llm", "llama-3.1-8b"), "give --hw"),
    (("llm", "--hw", "h100-sxm"), "give a MODEL"),
    (("llm", "--list", "llama-3.1-8b"), "--list takes no MODEL"),
])
def test_missing_or_contradicting_parts_are_one_line(capsys, argv, words):
    assert words in user_error(capsys, *argv)


def test_parsing_the_command_imports_nothing_heavy():
    assert heavy_modules_after(*ONE_COMMAND[:4], "--help") == []
    assert heavy_modules_after("llm", "--help") == []
