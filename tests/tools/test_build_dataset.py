"""The bundled-dataset builder's user-facing arguments and plan (``tools/bundled/build_dataset.py``,
a dev script outside the package, loaded from its file)."""

import argparse

import pandas as pd
import pytest

from tests.scripts import load_script

build = load_script("bundled/build_dataset.py")
SEQ_CONFIGS, drop_micro, main = build.SEQ_CONFIGS, build.drop_micro, build.main
model_configs, seq_configs_arg = build.model_configs, build.seq_configs_arg


def test_seq_configs_parse_batch_by_sequence_pairs():
    assert seq_configs_arg("1x32,4x32") == ((1, 32), (4, 32))


@pytest.mark.parametrize("bad", ["", "1x", "x32", "1x32,", "0x32", "1x-4", "1x2x3", "a x b"])
def test_bad_seq_configs_say_what_to_write(bad):
    with pytest.raises(argparse.ArgumentTypeError, match="BATCHxSEQUENCE"):
        seq_configs_arg(bad)


def test_sequence_models_take_the_seq_configs_and_cnns_their_batches():
    assert model_configs("bert_base", ((1, 32),)) == [{"batch": 1, "sequence": 32}]
    assert model_configs("bert_base") == [{"batch": b, "sequence": s} for b, s in SEQ_CONFIGS]
    assert model_configs("resnet50", ((1, 32),)) == [{"batch": 1}, {"batch": 4}, {"batch": 16}]


def test_replace_micro_drops_only_the_remeasured_families():
    # summaries as build_dataset reads them back from cpu_summary.csv (NaN where empty)
    summaries = pd.DataFrame({"run_id": ["a", "b", "c"], "kind": ["micro", "micro", "zoo"],
                              "family": ["conv", "gemm", None],
                              "model": [None, None, "resnet50"]}).to_dict("records")
    rows = pd.DataFrame({"run_id": ["a", "a", "b", "c"], "latency_s": [1.0, 2.0, 3.0, 4.0]})
    kept, kept_summaries = drop_micro(rows, summaries, {"conv"})
    assert kept["run_id"].tolist() == ["b", "c"]
    assert [s["run_id"] for s in kept_summaries] == ["b", "c"]
    kept, kept_summaries = drop_micro(rows, summaries, {"all"})
    assert kept["run_id"].tolist() == ["c"]  # zoo measurements are never dropped
    assert [s["run_id"] for s in kept_summaries] == ["c"]


@pytest.mark.parametrize("args", [["--replace-micro"],
                                  ["--append", "--replace-micro", "--no-micro"],
                                  ["--append", "--replace-micro", "--quick"],
                                  ["--append", "--replace-micro"]])  # no dataset in the folder
def test_replace_micro_without_a_grid_to_replace_is_refused(args, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--out-dir", str(tmp_path), *args])
    assert exc.value.code == 2
    assert "--replace-micro" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written
