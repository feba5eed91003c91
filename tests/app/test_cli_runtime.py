"""The runtime as a CLI input: ``--runtime`` / ``--fusion``/``--no-fusion`` on predict, compare,
sweep and advise, every output naming the runtime and the estimator, and ``roofcast runtimes``
(built-in and user profiles, hostile user files) — all through ``app.cli.main``."""

from __future__ import annotations

import io
import json
import os

import pandas as pd
import pytest

from roofcast.app.cli import main
from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.predictor.runtimes import default_runtime_name, get_runtime, runtime_names

GPU, CPU = "t4", "xeon-8480plus"


@pytest.fixture(autouse=True)
def empty_user_runtimes(tmp_path, monkeypatch):
    """A user runtime folder of the test's own (empty unless the test writes into it)."""
    folder = tmp_path / "runtimes"
    folder.mkdir()
    monkeypatch.setenv("ROOFCAST_RUNTIME_DIR", str(folder))
    return folder


def run_json(capsys, *argv):
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def run_error(capsys, *argv) -> str:
    """stderr of a command that must fail as a user error (exit 2, no traceback)."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def user_error(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# ----------------------------------------------------------------------------- --runtime
def test_unknown_runtime_lists_every_runtime_with_its_description(capsys):
    err = run_error(capsys, "predict", "resnet50", "--hw", GPU, "--runtime", "pytorch")
    assert "unknown runtime 'pytorch'" in err
    for name in runtime_names():
        prof = get_runtime(name)
        assert f"{name} ({', '.join(prof.device_kinds)}): {prof.description}" in err


@pytest.mark.parametrize("command", ["predict", "compare", "sweep", "advise"])
def test_a_runtime_is_refused_on_a_device_kind_it_does_not_run_on(capsys, command):
    err = user_error(capsys, command, "resnet50", "--hw", GPU, "--runtime", "onnxruntime-cpu")
    assert "runtime 'onnxruntime-cpu' runs on cpu devices, not gpu" in err
    runs_on_gpu = [n for n in runtime_names() if get_runtime(n).runs_on("gpu")]
    assert f"for a gpu choose one of: {', '.join(runs_on_gpu)}" in err


def test_help_says_the_default_runtime_of_each_device_kind(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"{default_runtime_name('cpu')} on cpus" in text
    assert f"{default_runtime_name('gpu')} on gpus" in text
    assert "--fusion, --no-fusion" in text


def test_predict_states_the_runtime_and_estimator_in_every_format(capsys):
    doc = run_json(capsys, "predict", "resnet50", "--hw", GPU, "--estimator", "roofline")
    assert (doc["runtime"], doc["estimator"]) == (default_runtime_name("gpu"), "roofline")
    assert doc["fusion"] is get_runtime(doc["runtime"]).fusion_default
    doc = run_json(capsys, "predict", "resnet50", "--hw", CPU, "--runtime", "torch-compile")
    assert (doc["runtime"], doc["estimator"]) == ("torch-compile", GRAPH_ESTIMATOR)
    assert main(["predict", "resnet50", "--hw", GPU, "--runtime", "tensorrt"]) == 0
    head = capsys.readouterr().out.split("== ops ==")[0]
    assert "runtime: tensorrt\n" in head
    assert f"estimator: {GRAPH_ESTIMATOR}\n" in head
    assert main(["predict", "resnet50", "--hw", CPU, "--format", "csv", "--top", "3"]) == 0
    ops = pd.read_csv(io.StringIO(capsys.readouterr().out.split("\n\n")[0]), comment="#")
    assert len(ops) == 3
    assert set(ops["runtime"]) == {"onnxruntime-cpu"}
    assert set(ops["estimator"]) == {GRAPH_ESTIMATOR}


FUSION_ARGV = ("predict", "resnet50", "--hw", CPU, "--runtime", "onnxruntime-cpu")


def test_fusion_is_tri_state(capsys):
    """No flag: the runtime's default is reported; --fusion / --no-fusion: forced, and it
    changes the kernels run."""
    default = run_json(capsys, *FUSION_ARGV)
    on = run_json(capsys, *FUSION_ARGV, "--fusion")
    off = run_json(capsys, *FUSION_ARGV, "--no-fusion")
    assert default["fusion"] is get_runtime("onnxruntime-cpu").fusion_default
    assert (on["fusion"], off["fusion"]) == (True, False)
    assert len(on["ops"]) < len(off["ops"])  # fused kernels: fewer rows


def test_no_fusion_flag_predicts_as_the_runtime_default(capsys):
    default = run_json(capsys, *FUSION_ARGV)
    forced = run_json(capsys, *FUSION_ARGV,
                      "--fusion" if default["fusion"] else "--no-fusion")
    assert default["total_ms"] == pytest.approx(forced["total_ms"])


def test_compare_gives_each_device_its_runtime(capsys):
    doc = run_json(capsys, "compare", "resnet50", "--hw", f"{GPU},{CPU}")
    by_device = {r["device"]: r["runtime"] for r in doc["devices"]}
    assert by_device == {GPU: default_runtime_name("gpu"), CPU: default_runtime_name("cpu")}
    assert doc["runtime"] == f"{default_runtime_name('gpu')}, {default_runtime_name('cpu')}"
    assert doc["estimator"] == GRAPH_ESTIMATOR
    doc = run_json(capsys, "compare", "resnet50", "--hw", f"{GPU},{CPU}",
                   "--runtime", "torch-compile", "--estimator", "roofline")
    assert {r["runtime"] for r in doc["devices"]} == {"torch-compile"}
    assert (doc["runtime"], doc["estimator"]) == ("torch-compile", "roofline")
    assert main(["compare", "resnet50", "--hw", f"{GPU},{CPU}", "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(table["runtime"]) == [default_runtime_name("gpu"), default_runtime_name("cpu")]
    assert set(table["estimator"]) == {GRAPH_ESTIMATOR}


def test_sweep_command_cells_runtime_and_estimator(capsys):
    doc = run_json(capsys, "sweep", "resnet50", "--hw", f"{GPU},a100-40gb-pcie",
                   "--batches", "1,4", "--precisions", "fp32,fp16", "--runtime", "tensorrt")
    cells = pd.DataFrame(doc["cells"])
    assert len(cells) == 2 * 2 * 2
    assert set(cells["runtime"]) == {"tensorrt"}
    assert (doc["runtime"], doc["estimator"]) == ("tensorrt", GRAPH_ESTIMATOR)
    base = cells[cells["device"] == GPU]
    assert (base["speedup"] == 1.0).all()
    b1 = base[(base["batch"] == 1) & (base["precision"] == "fp32")]["time_ms"].item()
    b4 = base[(base["batch"] == 4) & (base["precision"] == "fp32")]["time_ms"].item()
    assert b4 > b1
    assert main(["sweep", "resnet50", "--hw", CPU, "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(table["runtime"]) == [default_runtime_name("cpu")]
    assert list(table["estimator"]) == [GRAPH_ESTIMATOR]


def test_advise_states_runtime_and_estimator(capsys):
    doc = run_json(capsys, "advise", "resnet50", "--hw", CPU, "--estimator", "time-roofline",
                   "--top", "2")
    assert (doc["runtime"], doc["estimator"]) == (default_runtime_name("cpu"), "time-roofline")
    doc = run_json(capsys, "advise", "resnet50", "--hw", CPU, "--estimator", "time-roofline",
                   "--runtime", "torch-compile", "--top", "2")
    assert doc["runtime"] == "torch-compile"
    assert main(["advise", "resnet50", "--hw", CPU, "--estimator", "time-roofline", "--top", "2",
                 "--format", "csv"]) == 0
    settings = pd.read_csv(io.StringIO(capsys.readouterr().out.split("\n\n")[0]), comment="#")
    assert set(settings["runtime"]) == {default_runtime_name("cpu")}
    assert set(settings["estimator"]) == {"time-roofline"}


# ----------------------------------------------------------------------------- roofcast runtimes
USER_PROFILE = """name = "my-rt"
description = "My serving stack"
device_kinds = ["gpu"]
patterns = ["epilogue"]
dispatch_floor_us = { gpu = 4.5 }
"""


def test_runtimes_lists_built_in_and_user_profiles(capsys, empty_user_runtimes):
    (empty_user_runtimes / "my-rt.toml").write_text(USER_PROFILE)
    doc = run_json(capsys, "runtimes")
    rows = {r["name"]: r for r in doc["runtimes"]}
    assert set(rows) == {*runtime_names()}
    assert rows["my-rt"] == {"name": "my-rt", "device_kinds": "gpu",
                             "description": "My serving stack", "origin": "user",
                             "source": str(empty_user_runtimes / "my-rt.toml")}
    assert rows["pytorch-eager"]["origin"] == "built-in"
    assert rows["pytorch-eager"]["source"].endswith("pytorch-eager.toml")
    assert doc["user_folder"] == str(empty_user_runtimes)
    assert main(["runtimes", "list"]) == 0
    assert "My serving stack" in capsys.readouterr().out
    doc = run_json(capsys, "predict", "resnet50", "--hw", GPU, "--runtime", "my-rt")
    assert doc["runtime"] == "my-rt"


def test_runtimes_show_every_field_patterns_and_floors(capsys, empty_user_runtimes):
    (empty_user_runtimes / "my-rt.toml").write_text(USER_PROFILE)
    doc = run_json(capsys, "runtimes", "show", "my-rt")
    assert doc["dispatch_floor_us"] == {"gpu": 4.5}
    assert doc["patterns"] == ["epilogue"]
    assert doc["fusion_patterns"] == []
    assert doc["pattern_rules"][0]["pattern"] == "epilogue"
    assert doc["pattern_rules"][0]["applies"] == "always"
    assert doc["pattern_rules"][0]["does"]  # the pattern's docstring, not empty
    assert doc["dispatch_floors"] == [{"device_kind": "gpu", "dispatch_floor_us": 4.5,
                                       "from": "this profile"}]
    from dataclasses import fields

    from roofcast.predictor.runtimes import ExecutionProfile

    assert {f.name for f in fields(ExecutionProfile)} <= set(doc)
    assert main(["runtimes", "show", "onnxruntime-cpu"]) == 0
    out = capsys.readouterr().out
    prof = get_runtime("onnxruntime-cpu")
    for section in ("== fields ==", "== pattern_rules ==", "== dispatch_floors =="):
        assert section in out
    assert prof.description in out
    assert prof.source in out
    err = user_error(capsys, "runtimes", "show", "nope")
    assert "unknown runtime 'nope'" in err
    assert "onnxruntime-cpu" in err


HOSTILE = {
    "unknown-key.toml": ('name = "unknown-key"\ndescription = "x"\ndevice_kinds = ["gpu"]\n'
                         'turbo = true\n', "unknown keys ['turbo']"),
    "wrong-types.toml": ('name = "wrong-types"\ndescription = "x"\ndevice_kinds = "gpu"\n',
                         "device_kinds must be a list of non-empty strings"),
    "bad-floor.toml": ('name = "bad-floor"\ndescription = "x"\ndevice_kinds = ["gpu"]\n'
                       'dispatch_floor_us = { gpu = "fast" }\n', "dispatch_floor_us must map"),
    "huge.toml": ("#" * 300_000 + "\n", "more than a runtime profile may have"),
    "not-toml.toml": ("name = = =\n", "not a valid TOML runtime profile"),
    "renamed.toml": ('name = "other"\ndescription = "x"\ndevice_kinds = ["gpu"]\n',
                     "file name must be 'other.toml'"),
}


def test_hostile_user_profiles_are_named_and_skipped_never_a_traceback(
        capsys, empty_user_runtimes, tmp_path):
    for name, (text, _) in HOSTILE.items():
        (empty_user_runtimes / name).write_text(text)
    outside = tmp_path / "outside.toml"
    outside.write_text(USER_PROFILE.replace("my-rt", "outside"))
    os.symlink(outside, empty_user_runtimes / "outside.toml")
    (empty_user_runtimes / "my-rt.toml").write_text(USER_PROFILE)
    assert main(["runtimes", "--format", "json"]) == 0
    captured = capsys.readouterr()
    listed = {r["name"] for r in json.loads(captured.out)["runtimes"]}
    assert listed == {*(p.stem for p in builtin_files()), "my-rt"}
    assert "Traceback" not in captured.err
    for name, (_, reason) in HOSTILE.items():
        stem = name.removesuffix(".toml")
        line = next(ln for ln in captured.err.splitlines() if f"runtime {stem!r} skipped" in ln)
        assert reason in line
    assert "outside the folder" in captured.err
    for name, (_, reason) in HOSTILE.items():
        err = user_error(capsys, "predict", "resnet50", "--hw", GPU, "--runtime",
                         name.removesuffix(".toml"))
        assert reason in err
        assert err.count("\n") == 1
    err = user_error(capsys, "runtimes", "show", "outside")
    assert "symbolic link" in err
    assert "outside the folder" in err


def builtin_files():
    from roofcast.predictor.runtimes.catalog import BUILTIN_DIR

    return sorted(BUILTIN_DIR.glob("*.toml"))


def test_a_user_profile_may_not_shadow_a_built_in(capsys, empty_user_runtimes):
    (empty_user_runtimes / "tensorrt.toml").write_text(
        USER_PROFILE.replace("my-rt", "tensorrt"))
    err = user_error(capsys, "runtimes")
    assert "runtime 'tensorrt' is already defined" in err


def test_a_broken_user_folder_is_named_when_parsing_runtime(capsys, empty_user_runtimes):
    """argparse turns a ValueError in a type= converter into "invalid value": the folder's own
    message must come through instead."""
    (empty_user_runtimes / "tensorrt.toml").write_text(
        USER_PROFILE.replace("my-rt", "tensorrt"))
    err = run_error(capsys, "predict", "resnet50", "--hw", GPU, "--runtime", "tensorrt")
    assert "runtime 'tensorrt' is already defined" in err
    assert "invalid" not in err
