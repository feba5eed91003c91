"""Errors speak the surface's words: ``roofcast.X`` names keywords, the CLI names flags."""

from __future__ import annotations

import json

import pytest

import roofcast
from roofcast.api_words import python_words
from roofcast.app.cli import main
from roofcast.graph_import.errors import ModelImportError
from roofcast.predictor.errors import PredictionError


def test_python_words_maps_flags_to_keywords():
    assert python_words("bind those, e.g. --dim sequence=N") == \
        "bind those, e.g. dims={'sequence': N}"
    assert python_words("(--allow-incomplete) or --batch 8") == \
        "(allow_incomplete=True) or batch=8"
    assert python_words("give --seq, --precision") == "give seq_tokens=, precision="
    assert python_words("use --objective latency") == "use objective='latency'"


def test_api_errors_name_keywords_not_flags():
    with pytest.raises(ModelImportError) as exc:
        roofcast.predict("bert_base", "h100-sxm", dims={"seq": 128})
    assert "dims={'sequence': N}" in str(exc.value)
    assert "--" not in str(exc.value)
    with pytest.raises(PredictionError) as exc:
        roofcast.predict("llama-3.1-8b", system="hgx-h100", dims={"sequence": 4096})
    assert "seq_tokens=" in str(exc.value)
    assert "--" not in str(exc.value)


def test_cli_errors_name_flags_not_keywords(capsys):
    assert main(["predict", "llama-3.1-8b", "--dim", "sequence=4096", "--system",
                 "hgx-h100"]) == 2
    err = capsys.readouterr().err
    assert "--seq" in err
    assert "--precision" in err
    assert "seq_tokens" not in err
    assert "=," not in err


def _step_s(capsys, *argv) -> float:
    assert main(["predict", "llama-3.1-8b", "--system", "hgx-h100", "--tp", "2", *argv,
                 "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["step_s"]


def test_predict_seq_sets_an_llm_configs_sequence_length(capsys):
    default = _step_s(capsys)
    assert _step_s(capsys, "--seq", "4096") == default  # 4096: the default
    assert _step_s(capsys, "--seq", "1024") < default
    assert _step_s(capsys, "--seq", "1024") == roofcast.predict(
        "llama-3.1-8b", system="hgx-h100", tp=2, seq_tokens=1024).step_s
