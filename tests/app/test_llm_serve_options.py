"""``roofcast llm`` / ``plan --mode serve`` options: speculative decoding flags, the runtime
help, the stored weight dtype as the default of the API and of the capacity planner."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import roofcast
from roofcast.app.cli import main


def user_error(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(("extra", "says"), [
    (("--spec-accept", "0.5"), "--spec-accept needs --spec-decode"),
    (("--spec-decode", "mtp:3"), "acceptance rate"),
    (("--spec-decode", "mtp:3", "--spec-accept", "2"), "acceptance rate must be"),
    (("--spec-decode", "eagle:3", "--spec-accept", "0.5"), "draft:MODEL:K or mtp:K"),
    (("--spec-decode", "draft:no-such-model:3", "--spec-accept", "0.5"), "draft model"),
])
def test_bad_spec_decode_refused_in_one_line(capsys, extra, says):
    assert says in user_error(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", *extra)


def test_spec_decode_lowers_tpot_and_is_in_the_header(capsys):
    args = ("llm", "llama-3.1-8b", "--hw", "h100-sxm", "--output-tokens", "32")
    assert main([*args, "--format", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*args, "--spec-decode", "mtp:3", "--spec-accept", "0.8", "--format",
                 "json"]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["tpot_ms"] < plain["tpot_ms"]
    assert spec["config"]["spec_decode"]["k"] == 3


def test_runtime_help_names_today_and_2024_engines(capsys):
    with pytest.raises(SystemExit):
        main(["llm", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in ("sglang", "vllm-2024", "tensorrt-llm-2024"):
        assert name in out


def test_api_weights_default_to_the_stored_dtype():
    p = roofcast.llm("gpt-oss-20b", "h100-sxm", input_tokens=128, output_tokens=16)
    assert p.config.weights == roofcast.api.llm_arch("gpt-oss-20b").weight_dtype == "mxfp4"
    assert roofcast.llm("llama-3.1-8b", "h100-sxm", input_tokens=128,
                        output_tokens=16).config.weights == "fp16"


def test_capacity_plan_weights_default_to_the_stored_dtype(capsys, monkeypatch):
    seen = {}

    def fake_plan(model, **kw):
        seen.update(kw)
        return pd.DataFrame({"meets": [], "notes": []})

    monkeypatch.setattr(roofcast.api, "plan", fake_plan)
    assert main(["plan", "gpt-oss-20b", "--mode", "serve", "--hw", "h100-sxm", "--rate", "2",
                 "--slo-tpot", "50"]) == 0
    assert seen["weights"] == "mxfp4"


def test_disagg_needs_an_open_loop(capsys):
    assert "--rate R or --trace" in user_error(capsys, "llm", "llama-3.1-8b", "--hw",
                                               "h100-sxm", "--disagg", "1:1")
    assert "open loops" in user_error(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm",
                                      "--concurrency", "4", "--disagg", "1:1")
    assert "P:D" in user_error(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--rate",
                               "2", "--disagg", "1")


def _sim(capsys, *extra) -> dict:
    assert main(["llm", "llama-3.1-8b", "--hw", "h100-sxm", "--rate", "4", "--requests",
                 "200", "--output-tokens", "64", "--format", "json", *extra]) == 0
    doc = json.loads(capsys.readouterr().out)
    return {**doc["devices"][0], "notes": doc["notes"]}


def test_simulated_spec_decode_and_disagg(capsys):
    plain = _sim(capsys)
    spec = _sim(capsys, "--spec-decode", "mtp:2", "--spec-accept", "0.9")
    assert spec["tpot_p50_ms"] < plain["tpot_p50_ms"]
    split = _sim(capsys, "--disagg", "1:1")
    assert any("disaggregated" in n for n in split["notes"])
    assert abs(split["in_flight"] / (split["requests_per_s"] * split["e2e_mean_ms"] / 1e3)
               - 1) < 0.03


@pytest.mark.parametrize(("argv", "says"), [
    (("mixtral-8x7b", "--hw", "h200", "--moe-imbalance", "abc"), "number >= 1"),
    (("mixtral-8x7b", "--hw", "h200", "--moe-imbalance", "0.5"), "number >= 1"),
    (("mixtral-8x7b", "--hw", "h200", "--moe-imbalance", "inf"), "number >= 1"),
    (("mixtral-8x7b", "--hw", "h200", "--moe-imbalance", "2"), "expert parallelism"),
    (("llama-3.1-8b", "--hw", "h200", "--moe-imbalance", "2"), "has no experts"),
    (("mixtral-8x7b", "--hw", "h200", "--devices", "2", "--tp", "2", "--ep", "2",
      "--moe-imbalance", "1e300"), "is above ep = 2"),
])
def test_bad_moe_imbalance_refused_in_one_line(capsys, argv, says):
    assert says in user_error(capsys, "llm", *argv)


def test_moe_imbalance_slows_an_expert_parallel_prefill_and_is_in_the_header(capsys):
    args = ("llm", "mixtral-8x7b", "--hw", "h100-sxm", "--devices", "2", "--tp", "2", "--ep",
            "2", "--batch", "8", "--input-tokens", "2048", "--format", "json")
    runs = []
    for x in ("1", "2"):
        assert main([*args, "--moe-imbalance", x]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[1]["ttft_ms"] > 1.5 * runs[0]["ttft_ms"]
    assert runs[1]["config"]["moe_imbalance"] == 2.0
    api = roofcast.llm("mixtral-8x7b", "h100-sxm", devices=2, tp=2, ep=2, batch=8,
                       input_tokens=2048, moe_imbalance=2.0)
    assert api.ttft_s * 1e3 == pytest.approx(runs[1]["ttft_ms"], rel=1e-6)
