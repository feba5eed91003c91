"""Execution profile TOMLs: the built-ins load and say what they do; user files are validated
(every problem a PredictionError naming the file and the key)."""

from __future__ import annotations

import pytest

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.runtimes import get_runtime, resolve_runtime, runtime_names

BUILTINS = ("onnxruntime-cpu", "pytorch-eager", "torch-compile", "tensorrt")
GOOD = """name = "{name}"
description = "a test runtime"
device_kinds = ["gpu"]
patterns = ["views-free", "bias-into-gemm"]
dispatch_floor_us = {{ gpu = 7.0 }}
precisions = ["fp32", "fp16"]
"""


def write(folder, name: str, text: str):
    (folder / f"{name}.toml").write_text(text)


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFCAST_RUNTIME_DIR", str(tmp_path))
    return tmp_path


def test_builtins_load_with_the_documented_defaults():
    assert set(runtime_names()) == set(BUILTINS)  # the user folder is empty here
    eager = get_runtime("pytorch-eager")
    assert eager.attention == "eager"
    assert eager.attention_score_passes == 2
    assert eager.tf32_families == ("conv",)
    assert eager.dispatch_floor_s("gpu", 2e-6) == pytest.approx(15e-6)
    trt = get_runtime("tensorrt")
    assert trt.graph_capture
    assert trt.dispatch_floor_s("gpu", 2e-6) == 2e-6
    assert {"int8", "fp8"} <= set(trt.precisions)
    assert "fused-attention" in get_runtime("torch-compile").patterns
    assert resolve_runtime(None, "cpu").name == "onnxruntime-cpu"
    assert resolve_runtime(None, "gpu").name == "pytorch-eager"


def test_a_user_profile_is_found_and_used(user_dir):
    write(user_dir, "my-rt", GOOD.format(name="my-rt"))
    assert "my-rt" in runtime_names()
    prof = get_runtime("my-rt")
    assert prof.patterns == ("views-free", "bias-into-gemm")
    assert prof.dispatch_floor_s("gpu", 1e-6) == pytest.approx(7e-6)


@pytest.mark.parametrize(("change", "message"), [
    ('bogus = 1\n', "unknown keys"),
    ('overhead_mode = "floor"\n', "unknown keys"),
    ('patterns = ["no-such-pattern"]\n', "unknown patterns"),
    ('device_kinds = ["tpu"]\n', "device_kinds"),
    ('dispatch_floor_us = { gpu = -1 }\n', "dispatch_floor_us"),
    ('dispatch_floor_us = { quantum = 5 }\n', "dispatch_floor_us"),
    ('precisions = ["fp4"]\n', "precisions"),
    ('attention = "flash"\n', "attention"),
    ('attention = "fused"\n', "fused-attention"),
    ('attention_score_passes = 2\n', "attention-score-passes"),
    ('tf32_families = ["softmax"]\n', "tf32_families"),
    ('graph_capture = "yes"\n', "graph_capture"),
])
def test_bad_user_profiles_are_refused_naming_the_problem(user_dir, change, message):
    key = change.split("=")[0].strip()
    lines = [ln for ln in GOOD.format(name="bad").splitlines() if not ln.startswith(key + " ")]
    write(user_dir, "bad", "\n".join(lines) + "\n" + change)
    with pytest.raises(PredictionError, match=message) as err:
        get_runtime("bad")
    assert "bad.toml" in str(err.value)


def test_a_user_file_shadowing_a_builtin_is_refused(user_dir):
    write(user_dir, "pytorch-eager", GOOD.format(name="pytorch-eager"))
    with pytest.raises(PredictionError, match="already defined"):
        get_runtime("pytorch-eager")


def test_a_file_named_unlike_its_runtime_is_refused(user_dir):
    write(user_dir, "other", GOOD.format(name="mine"))
    with pytest.raises(PredictionError, match="file name"):
        get_runtime("other")


def test_a_broken_toml_is_refused(user_dir):
    write(user_dir, "broken", "name = [\n")
    with pytest.raises(PredictionError, match="not a valid TOML"):
        get_runtime("broken")


def test_unknown_runtime_lists_the_known_ones():
    with pytest.raises(PredictionError, match="pytorch-eager"):
        get_runtime("nope")
