"""Hostile sweep specs: every one a one-line ``SweepSpecError`` (no traceback, no other error
type), nothing outside the spec's folder opened, and bounded work for any input."""

from __future__ import annotations

import os
import time

import pytest

from roofcast.predictor.sweeps import spec as spec_mod
from roofcast.predictor.sweeps.spec import read_spec
from roofcast.predictor.sweeps.types import SweepSpecError

from .helpers import write_spec

BASE = "[sweep]\nmodels=['resnet50']\ndevices=['t4']\n"

HOSTILE = {
    "list in a list": ("[sweep]\nmodels=['resnet50']\ndevices=['t4']\nbatches=[[1]]", "list"),
    "table in a list": ("[sweep]\nmodels=[{a=1}]\ndevices=['t4']", "dict"),
    "table as device": ("[sweep]\nmodels=['resnet50']\ndevices=[{x='t4'}]", "dict"),
    "list as baseline": (BASE + "baseline=['t4']", "baseline"),
    "dotted key 60 kB": (BASE + "a" + ".a" * 30_000 + " = 1", "dotted key"),
    "arrays 5000 deep": (BASE + "batches = " + "[" * 5000 + "]" * 5000, "nested too deeply"),
    "inline tables 3000 deep": (BASE + "x = " + "{a=" * 3000 + "1" + "}" * 3000,
                                "nested too deeply"),
    "absolute name": (BASE + "name='/abs/elsewhere/x'", "plain file name"),
    "climbing name": (BASE + "name='../fence/pwned'", "plain file name"),
    "dot name": (BASE + "name='..'", "plain file name"),
    "escape in name": (BASE + 'name="evil\\u001b[31mred"', "plain file name"),
    "bidi in name": (BASE + 'name="x\\u202egnp.exe"', "plain file name"),
    "escape in a device": ("[sweep]\nmodels=['resnet50']\ndevices=[\"t4\\u001b[2J\"]",
                           "control or formatting"),
    "upper-case ONNX suffix": ("[sweep]\nmodels=['MLP.ONNX']\ndevices=['t4']", "lower case"),
    "upper-case JSON outside": ("[sweep]\nmodels=['../x.JSON']\ndevices=['t4']",
                                "leads outside"),
    "llm: absolute path": ("[sweep]\nmodels=['llm:/etc/passwd']\ndevices=['t4']",
                           "nor a bundled LLM"),
    "llm: folder path": ("[sweep]\nmodels=['llm:../fence']\ndevices=['t4']",
                         "nor a bundled LLM"),
    "plain folder path": ("[sweep]\nmodels=['/etc']\ndevices=['t4']", "nor a bundled LLM"),
    "NUL in a path": ('[sweep]\nmodels=["a\\u0000.onnx"]\ndevices=["t4"]',
                      "control or formatting"),
    "batch 10**30": (BASE + "batches=[1000000000000000000]", "over the limit"),
    "tokens 2**40": ("[sweep]\nmodels=['gpt2']\ndevices=['t4']\nmodes=['serve']\n"
                     "input_tokens=[1099511627776]", "over the limit"),
    "token pairs 10**8": ("[sweep]\nmodels=['gpt2']\ndevices=['t4']\nmodes=['serve']\n"
                          f"input_tokens=[{','.join(map(str, range(1, 10_001)))}]\n"
                          f"output_tokens=[{','.join(map(str, range(1, 10_001)))}]",
                          "request shapes"),
    "not UTF-8": (b"[sweep]\nname='\xff'\n", "UTF-8"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_spec_is_one_line_refusal(tmp_path, case):
    body, message = HOSTILE[case]
    path = write_spec(tmp_path / "spec", "")
    (path.parent / "MLP.ONNX").write_bytes((path.parent / "mlp.onnx").read_bytes())
    (path.write_bytes if isinstance(body, bytes) else path.write_text)(body)
    start = time.perf_counter()
    with pytest.raises(SweepSpecError) as err:
        read_spec(path)
    assert time.perf_counter() - start < 10
    text = str(err.value)
    assert message in text
    assert "\n" not in text
    assert "\x1b" not in text


def _spec_with_model(tmp_path, model: str):
    folder = tmp_path / "spec"
    return write_spec(folder, f"[sweep]\nmodels=['{model}']\ndevices=['t4']")


def test_fifo_and_device_models_are_refused_without_opening(tmp_path):
    folder = tmp_path / "spec"
    folder.mkdir()
    os.mkfifo(folder / "pipe.onnx")  # opening it would block forever
    with pytest.raises(SweepSpecError, match="FIFO"):
        read_spec(_spec_with_model(tmp_path, "pipe.onnx"))
    os.symlink("/dev/zero", folder / "zero.json")
    with pytest.raises(SweepSpecError, match="leads outside"):
        read_spec(_spec_with_model(tmp_path, "zero.json"))


def test_link_to_a_file_outside_is_refused_in_any_case(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.JSON").write_text("{}")
    folder = tmp_path / "spec"
    folder.mkdir()
    os.symlink(outside / "config.JSON", folder / "cfg.JSON")
    os.symlink(outside, folder / "dir")
    for model in ("cfg.JSON", "dir/config.JSON"):
        with pytest.raises(SweepSpecError, match="leads outside"):
            read_spec(_spec_with_model(tmp_path, model))


def test_nothing_outside_is_opened_before_the_refusal(tmp_path, monkeypatch):
    opened = []
    real_open = os.open

    def spy(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    path = write_spec(tmp_path / "spec", "")
    for model in ("/etc/passwd", "llm:/etc/passwd", "../../../../etc/passwd.json",
                  "/etc/passwd.onnx"):
        path.write_text(f"[sweep]\nmodels=['{model}']\ndevices=['t4']")
        monkeypatch.setattr(os, "open", spy)
        with pytest.raises(SweepSpecError):
            read_spec(path)
        monkeypatch.setattr(os, "open", real_open)
    assert [p for p in opened if "passwd" in p] == []


def test_folders_and_sizes_of_a_spec_file(tmp_path):
    with pytest.raises(SweepSpecError, match="folder"):
        read_spec(tmp_path)
    fifo = tmp_path / "s.toml"
    os.mkfifo(fifo)
    with pytest.raises(SweepSpecError, match="FIFO"):
        read_spec(fifo)
    big = tmp_path / "big.toml"
    big.write_text("#" * (spec_mod.MAX_SPEC_BYTES + 1))
    with pytest.raises(SweepSpecError, match="bytes"):
        read_spec(big)


def test_one_entry_with_too_many_cells_is_refused_before_any_is_built(tmp_path, monkeypatch):
    """120,000 cells on one device (under MAX_CELLS): one task would hold them all."""
    path = write_spec(tmp_path / "spec", BASE + f"batches=[{','.join(map(str, range(1, 5_001)))}]"
                      "\nprecisions=['fp32','fp16','bf16','int8']\nmodes=['infer','train']\n"
                      "runtimes=['default','onnxruntime-cpu','pytorch-eager']")
    monkeypatch.setenv("ROOFCAST_MAX_TASK_CELLS", "100000")
    with pytest.raises(SweepSpecError, match="120,000 cells per hardware entry"):
        read_spec(path)
    monkeypatch.delenv("ROOFCAST_MAX_TASK_CELLS")
    assert read_spec(path).n_cells == 120_000


def test_limits_are_raisable_by_environment(tmp_path, monkeypatch):
    path = write_spec(tmp_path / "spec", BASE + "batches=[2000000]")
    with pytest.raises(SweepSpecError, match="ROOFCAST_MAX_BATCH"):
        read_spec(path)
    monkeypatch.setenv("ROOFCAST_MAX_BATCH", str(2**22))
    assert read_spec(path).batches == (2_000_000,)


def test_a_plain_name_and_lower_case_paths_still_work(tmp_path):
    spec = read_spec(write_spec(tmp_path / "spec", "[sweep]\nname='fleet 2 (h100)'\n"
                                "models=['mlp.onnx', 'gpt2', 'llm:gpt2']\ndevices=['t4']"))
    assert spec.name == "fleet 2 (h100)"
    assert spec.models == ("mlp.onnx", "gpt2", "llm:gpt2")
    assert spec.llms == ("llm:gpt2",)
