"""``roofcast llm --rate/--trace/--concurrency``: the simulated road through ``app.cli.main``,
its outputs, and every bad input refused in one line (exit 2)."""

from __future__ import annotations

import math

import pytest

from roofcast.app.cli import main
from tests.app.test_llm_cli import run_json, run_out


def error_line(capsys, *argv) -> str:
    """The one error line of a refusal (exit 2): found by the command (the only line) or by
    argparse (after its usage)."""
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse: the usage, then one error line
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("roofcast llm: error: ")]
    assert len(lines) == 1, err
    assert err.strip().endswith(lines[0])
    return lines[0]


def test_rate_gives_percentiles_and_goodput_per_device_and_names_its_road(capsys):
    doc = run_json(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm,l40s", "--rate", "4",
                   "--requests", "200", "--output-tokens", "32", "--slo-ttft", "1000",
                   "--slo-tpot", "50")
    assert doc["road"].startswith("simulated: vllm-v1 policy, poisson arrivals at 4")
    assert [r["device"] for r in doc["devices"]] == ["h100-sxm", "l40s"]
    for r in doc["devices"]:
        assert r["ttft_p50_ms"] <= r["ttft_p90_ms"] <= r["ttft_p99_ms"]
        assert 0 < r["goodput_per_s"] <= r["requests_per_s"]
        assert r["in_flight"] == pytest.approx(r["requests_per_s"] * r["e2e_mean_ms"] / 1e3,
                                               rel=0.05)
        series = doc["series"][r["device"]]
        assert 2 <= len(series) <= 200
        assert [p["time_s"] for p in series] == sorted(p["time_s"] for p in series)
        assert all(0 <= p["kv_used"] <= 1 and p["queued"] >= 0 for p in series)


def test_concurrency_above_capacity_queues_instead_of_nan(capsys):
    doc = run_json(capsys, "llm", "llama-3.1-8b", "--hw", "l40s", "--concurrency", "512",
                   "--output-tokens", "16", "--input-tokens", "128")
    row = doc["devices"][0]
    assert all(v is not None and not (isinstance(v, float) and math.isnan(v))
               for k, v in row.items() if k.endswith("_ms"))
    assert row["in_flight"] == pytest.approx(512, rel=1e-6)


def test_a_trace_file_is_replayed(capsys, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n" +
                     "".join(f"{i * 0.1:.1f},{100 + i},{8 + i % 5}\n" for i in range(60)))
    out, _ = run_out(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--trace", str(trace))
    assert "simulated: vllm-v1 policy, trace" in out
    assert "60 requests" in out


@pytest.mark.parametrize(("argv", "needle"), [
    (("--rate", "0"), "must be a finite number > 0"),
    (("--rate", "-3"), "must be a finite number > 0"),
    (("--rate", "nan"), "must be a finite number > 0"),
    (("--rate", "inf"), "must be a finite number > 0"),
    (("--rate", "fast"), "is not a number"),
    (("--rate", "1", "--slo-ttft", "0"), "must be a finite number > 0"),
    (("--rate", "1", "--slo-tpot", "-1"), "must be a finite number > 0"),
    (("--rate", "1", "--arrival", "weibull"), "the arrival must be one of"),
    (("--rate", "1", "--arrival", "gamma"), "gamma arrivals need a cv"),
    (("--rate", "1", "--policy", "orca"), "unknown scheduler policy 'orca'"),
    (("--rate", "1", "--concurrency", "4"), "not both"),
    (("--arrival", "closed"), "needs --concurrency"),
    (("--rate", "1", "--batch", "4"), "--batch is the static road"),
    (("--rate", "1", "--input-tokens", "131000"), "maximum context"),
])
def test_bad_simulation_inputs_are_refused_in_one_line(capsys, argv, needle):
    err = error_line(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", *argv)
    assert needle in err


@pytest.mark.parametrize(("body", "needle"), [
    ("time,in,out\n0,1,1\n", "the header must be"),
    ("arrival_s,input_tokens,output_tokens\n0,10\n", "expected 3 values"),
    ("arrival_s,input_tokens,output_tokens\n-1,10,10\n", "arrival_s must be a finite"),
    ("arrival_s,input_tokens,output_tokens\nnan,10,10\n", "arrival_s must be a finite"),
    ("arrival_s,input_tokens,output_tokens\n0,10.5,10\n", "input_tokens must be an integer"),
    ("arrival_s,input_tokens,output_tokens\n0,10,0\n", "output_tokens must be an integer"),
    ("arrival_s,input_tokens,output_tokens\n0,x,1\n", "values must be numbers"),
    ("arrival_s,input_tokens,output_tokens\n2,10,10\n1,10,10\n", "must not decrease"),
    ("arrival_s,input_tokens,output_tokens\n", "has no requests"),
    ("arrival_s,input_tokens,output_tokens\n0,200000,10\n", "maximum context"),
])
def test_malformed_traces_are_refused_in_one_line(capsys, tmp_path, body, needle):
    trace = tmp_path / "bad.csv"
    trace.write_text(body)
    err = error_line(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--trace", str(trace))
    assert needle in err


def test_huge_binary_or_missing_traces_are_refused(capsys, tmp_path, monkeypatch):
    big = tmp_path / "big.csv"
    big.write_text("arrival_s,input_tokens,output_tokens\n" + "0,10,10\n" * 50)
    monkeypatch.setenv("ROOFCAST_MAX_TRACE_ROWS", "20")
    err = error_line(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--trace", str(big))
    assert "more than 20 rows" in err
    assert "ROOFCAST_MAX_TRACE_ROWS" in err
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert "cannot be read" in error_line(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm",
                                          "--trace", str(binary))
    for where in (tmp_path / "nope.csv", tmp_path):
        assert "not a readable file" in error_line(
            capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--trace", str(where))


def test_the_table_format_names_the_road_first(capsys):
    out, _ = run_out(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--rate", "2",
                     "--requests", "100", "--output-tokens", "16")
    assert out.splitlines()[0].startswith("road: simulated: vllm-v1 policy")
