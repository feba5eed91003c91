"""The multi-device flags of ``predict`` / ``compare`` / ``llm`` and ``roofcast systems``,
through ``app.cli.main``: every bad input is one line without a traceback (argparse's usage
error for a malformed value, the command's own error for a contradiction), parsing stays light,
and a command without a parallel flag is the one-device command."""

from __future__ import annotations

import json

import pytest

import roofcast
from roofcast.app.cli import build_parser, main
from roofcast.app.parallel_args import is_parallel
from tests.app.test_cli_imports import heavy_modules_after


def user_error(capsys, command: str, *argv: str) -> str:
    """stderr of a user error (exit 2, one line ``roofcast CMD: error: ...``)."""
    assert main([command, *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith(f"roofcast {command}: error: "), err
    assert len(err.strip().splitlines()) == 1, err
    return err


def arg_error(capsys, command: str, *argv: str) -> str:
    """argparse's refusal of a malformed value (exit 2, usage + one error line)."""
    with pytest.raises(SystemExit) as exc:
        main([command, *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.split("error: ", 1)[1]


@pytest.mark.parametrize(("argv", "match"), [
    (("--tp", "0"), "must be >= 1"),
    (("--pp", "two"), "is not an integer"),
    (("--zero", "4"), "no ZeRO stage"),
    (("--micro-batches", "-1"), "must be >= 1"),
    (("--global-batch", "0"), "must be >= 1"),
    (("--devices", "1.5"), "is not an integer"),
])
def test_malformed_degrees_are_refused_by_the_parser(capsys, argv, match):
    assert match in arg_error(capsys, "predict", "resnet50", "--system", "hgx-h100", *argv)


@pytest.mark.parametrize(("argv", "match"), [
    (("--system", "hgx-h100", "--hw", "h100-sxm"), "not both"),
    (("--system", "hgx-h100", "--devices", "8"), "--devices goes with --hw"),
    (("--hw", "h100-sxm", "--tp", "2"), "--devices 2"),
    (("--tp", "2"), "give --system ID"),
    (("--system", "hgx-h100", "--batch", "8"), "--global-batch"),
    (("--system", "hgx-h100", "--max-batch"), "roofcast plan"),
    (("--system", "no-such-box"), "no-such-box"),
])
def test_contradictions_and_unknown_systems_are_one_line_errors(capsys, argv, match):
    assert match in user_error(capsys, "predict", "resnet50", *argv)


def test_a_degree_that_does_not_divide_the_devices_names_it(capsys):
    err = user_error(capsys, "predict", "resnet50", "--system", "hgx-h100", "--tp", "3")
    assert "tp=3" in err


def test_compare_takes_a_list_of_systems_and_refuses_a_device_baseline(capsys):
    args = build_parser().parse_args(["compare", "resnet50", "--system",
                                      "hgx-h100:nodes=2,nic_GBps=100,dgx-a100"])
    assert args.system == ["hgx-h100:nodes=2,nic_GBps=100", "dgx-a100"]
    assert "first one is the baseline" in user_error(
        capsys, "compare", "resnet50", "--system", "hgx-h100,dgx-a100", "--baseline", "x")
    assert "not both" in user_error(capsys, "compare", "resnet50", "--system", "hgx-h100",
                                    "--hw", "h100-sxm")


def test_llm_placement_errors(capsys):
    assert "not both" in user_error(capsys, "llm", "llama-3.1-8b", "--system", "hgx-h100",
                                    "--hw", "h100-sxm")
    assert "give --hw" in user_error(capsys, "llm", "llama-3.1-8b", "--devices", "4")
    assert "no-such-box" in user_error(capsys, "llm", "llama-3.1-8b", "--system", "no-such-box")


@pytest.mark.parametrize("argv", [
    ("predict", "resnet50", "--hw", "t4"),
    ("predict", "resnet50", "--hw", "t4", "--precision", "fp16", "--mode", "train"),
    ("compare", "resnet50", "--hw", "t4,l4"),
    ("llm", "llama-3.1-8b", "--hw", "h100-sxm"),
])
def test_without_a_parallel_flag_the_command_is_the_one_device_command(argv):
    assert not is_parallel(build_parser().parse_args(list(argv)))


def test_one_device_predict_output_is_unchanged_by_the_new_flags(capsys):
    """The JSON of a one-device predict is the library's one-device Prediction, key for key
    as before (no multi-device key leaks in)."""
    assert main(["predict", "resnet50", "--hw", "t4", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    pred = roofcast.predict("resnet50", "t4")
    assert doc["total_ms"] == pytest.approx(pred.total_ms)
    assert doc["precision"] == "fp32"
    assert doc["device"] == "t4"
    assert not {"system", "plan", "step_s", "dp"} & set(doc)


@pytest.mark.parametrize("argv", [
    ("systems", "list"), ("plan", "--help"), ("systems", "show", "--help"),
    ("predict", "resnet50", "--system", "hgx-h100", "--tp", "2", "--zero", "1"),
    ("plan", "llama-3.1-70b", "--system", "hgx-h100-x4", "--global-batch", "1024"),
])
def test_parsing_the_new_flags_imports_nothing_heavy(argv):
    assert heavy_modules_after(*argv) == []


# ----------------------------------------------------------------------------- systems
def test_systems_list_matches_the_api_in_every_format(capsys):
    api = roofcast.systems()
    assert main(["systems", "list", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n_systems"] == len(api)
    assert [r["id"] for r in doc["systems"]] == list(api["id"])
    assert doc["systems"][0]["devices"] == int(api["devices"].iloc[0])
    assert main(["systems", "list", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split(",")[:3] == ["id", "name", "device"]
    assert len(lines) == len(api) + 1
    assert main(["systems", "list"]) == 0
    out = capsys.readouterr().out
    assert all(i in out for i in api["id"])
    assert "nvswitch" in out


def test_systems_show_a_what_if_and_refuse_an_unknown_key(capsys):
    assert main(["systems", "show", "hgx-h100:nodes=4", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    figures = {r["key"]: r["value"] for r in doc["figures"]}
    assert (figures["nodes"], figures["devices"]) == ("4", "32")
    assert any("derived from 'hgx-h100'" in r["source"] for r in doc["sources"])
    assert "nodez" in user_error(capsys, "systems", "show", "hgx-h100:nodez=4")
    assert "no-such-box" in user_error(capsys, "systems", "show", "no-such-box")


# ----------------------------------------------------------------------------- llm
def test_llm_on_a_system_is_the_api_replica_over_its_devices(capsys):
    assert main(["llm", "llama-3.1-70b", "--system", "hgx-h100", "--tp", "8",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    want = roofcast.llm("llama-3.1-70b", system="hgx-h100", tp=8)
    assert doc["devices"] == want.devices == 8
    assert doc["config"]["tp"] == 8
    assert doc["tpot_ms"] == pytest.approx(want.as_dict()["tpot_ms"], rel=1e-12)
    one = roofcast.llm("llama-3.1-70b", "h100-sxm")
    assert want.memory.weights_bytes < one.memory.weights_bytes / 4  # weights split 8 ways


def test_llm_tp_on_hw_alone_takes_tp_devices_and_shows_them(capsys):
    assert main(["llm", "llama-3.1-8b", "--hw", "h100-sxm", "--tp", "2"]) == 0
    out = capsys.readouterr().out
    assert "devices: 2" in out
    assert "tp: 2" in out
    assert "tp=3" in user_error(capsys, "llm", "llama-3.1-8b", "--hw", "h100-sxm", "--tp", "3")


def test_llm_without_parallel_flags_prints_no_replica_lines(capsys):
    assert main(["llm", "llama-3.1-8b", "--hw", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "devices:" not in out
    assert "tp:" not in out


def test_predict_without_hw_or_system_says_what_to_give(capsys):
    assert "give --hw ID" in user_error(capsys, "predict", "resnet50")
    assert "give --hw A,B,C" in user_error(capsys, "compare", "resnet50")


def test_zero_and_recompute_flags_reach_the_plan_and_shrink_memory(capsys):
    base = ("predict", "llama-3.1-8b", "--system", "hgx-h100", "--global-batch", "8",
            "--mode", "train", "--format", "json")
    docs = {}
    for extra in ((), ("--zero", "3"), ("--recompute",), ("--tp", "2", "--sequence-parallel")):
        assert main([*base, *extra]) == 0
        docs[extra] = json.loads(capsys.readouterr().out)
    plain, zero3 = docs[()], docs[("--zero", "3")]
    assert (plain["zero"], zero3["zero"]) == (0, 3)
    assert zero3["optimizer_bytes"] == pytest.approx(plain["optimizer_bytes"] / 8)
    assert zero3["weights_bytes"] < plain["weights_bytes"]
    rc = docs[("--recompute",)]
    assert rc["recompute"] is True
    assert rc["activations_bytes"] < plain["activations_bytes"]
    sp = docs[("--tp", "2", "--sequence-parallel")]
    assert sp["plan"] == "dp4 tp2 pp1 m1 sp"


def test_tp_comm_overlap_flag_reaches_the_plan_and_hides_tensor_comm(capsys):
    base = ("predict", "llama-3.1-8b", "--system", "hgx-h100", "--global-batch", "8",
            "--mode", "train", "--tp", "8", "--sequence-parallel", "--format", "json")
    docs = {}
    for value in ("on", "off"):
        assert main([*base, "--tp-comm-overlap", value]) == 0
        docs[value] = json.loads(capsys.readouterr().out)
    assert (docs["on"]["tp_comm_overlap"], docs["off"]["tp_comm_overlap"]) == (True, False)
    assert docs["off"]["plan"].endswith("no-tp-overlap")
    assert docs["on"]["comm_tp_s"] == pytest.approx(docs["off"]["comm_tp_s"])
    assert docs["on"]["exposed_comm_s"] < docs["off"]["exposed_comm_s"]
    assert "choose from 'on', 'off'" in arg_error(capsys, *base, "--tp-comm-overlap", "maybe")
