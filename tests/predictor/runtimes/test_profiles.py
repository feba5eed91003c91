"""Execution profile TOMLs: the built-ins load and say what they do; user files are validated
(every problem a PredictionError naming the file and the key)."""

from __future__ import annotations

import pytest

from roofcast.hw_catalog import get_device
from roofcast.predictor.engine_tables.store import load as load_tables
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.runtimes import (
    default_serving_engine,
    get_runtime,
    resolve_engine,
    resolve_runtime,
    runtime_names,
)
from roofcast.predictor.runtimes.profile import profile_from_document

BUILTINS = ("onnxruntime-cpu", "pytorch-eager", "pytorch-eager-fp32-strict", "torch-compile",
            "tensorrt", "vllm",
            "vllm-2024", "tensorrt-llm", "tensorrt-llm-2024", "sglang", "llama.cpp",
            "deepspeed-mii", "megatron-lm")
ENGINES = ("vllm-2024", "tensorrt-llm-2024", "llama.cpp", "deepspeed-mii", "vllm",
           "tensorrt-llm", "sglang")
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


def test_a_kernel_costs_the_slower_of_runtime_floor_and_device_launch():
    eager = get_runtime("pytorch-eager")
    assert eager.dispatch_floor_s("gpu", 50e-6) == pytest.approx(50e-6)  # the device's wins
    assert eager.dispatch_floor_s("gpu", 0.5e-6) == pytest.approx(15e-6)  # the floor wins
    assert "below pytorch-eager's host dispatch floor 15" in eager.hidden_launch_note("gpu",
                                                                                      0.5e-6)
    assert eager.hidden_launch_note("gpu", 50e-6) == ""
    assert get_runtime("tensorrt").hidden_launch_note("gpu", 0.5e-6) == ""


def test_a_whatif_launch_overhead_acts_or_says_why_not():
    from roofcast.hw_catalog import get_device
    from roofcast.predictor.runtimes.profile import whatif_launch_notes

    eager = get_runtime("pytorch-eager")
    assert whatif_launch_notes(eager, get_device("h100-sxm")) == ()  # not a what-if
    assert whatif_launch_notes(eager, get_device("h100-sxm:mem_bw_scale=2")) == ()
    assert whatif_launch_notes(eager, get_device("h100-sxm:launch_overhead_us=50")) == ()
    (note,) = whatif_launch_notes(eager, get_device("h100-sxm:launch_overhead_us=0.5"))
    assert "changes nothing under this runtime" in note


def test_the_strict_fp32_eager_profile_is_pytorch_eager_without_tf32():
    """Every execution key equal to pytorch-eager's but ``tf32_families`` (and 'tf32', which a
    run with TF32 switched off cannot ask for)."""
    eager, strict = get_runtime("pytorch-eager"), get_runtime("pytorch-eager-fp32-strict")
    assert strict.tf32_families == ()
    assert eager.tf32_families == ("conv",)
    assert strict.precisions == tuple(p for p in eager.precisions if p != "tf32")
    same = ("device_kinds", "patterns", "fusion_patterns", "fusion_default", "graph_capture",
            "attention", "attention_score_passes", "learned_from", "vendors", "serving")
    assert {k: getattr(strict, k) for k in same} == {k: getattr(eager, k) for k in same}
    assert dict(strict.dispatch_floor_us) == dict(eager.dispatch_floor_us)


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
    ('precisions = ["fp5"]\n', "precisions"),
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


SERVING = """
[serving]
weights = ["fp16", "int4"]
kv_cache = ["fp16", "fp8"]
batching = "static"
memory_utilization = 0.85
max_prefill_tokens = 512
step_overhead_us = 30
"""


def test_the_serving_engines_say_what_they_run():
    engines = {n for n in runtime_names() if get_runtime(n).serving is not None}
    assert engines == set(ENGINES)
    vllm, trt, cpp, mii = (get_runtime(n) for n in ENGINES[:4])
    assert mii.vendors == ("NVIDIA",)
    assert vllm.serving.memory_utilization == pytest.approx(0.9)
    assert "fp8" in vllm.serving.kv_cache
    assert "int8" not in vllm.serving.kv_cache
    assert {"fp8", "int8"} <= set(trt.serving.kv_cache)
    # their decode kernels convert a quantised KV element once per query head
    assert vllm.serving.kv_convert_per == trt.serving.kv_convert_per == "query-head"
    assert cpp.serving.kv_convert_per == "kv-head"
    assert "fp8" not in cpp.serving.weights
    assert "int4" in cpp.serving.weights
    assert trt.vendors == ("NVIDIA",)
    assert get_runtime("tensorrt").vendors == ("NVIDIA",)
    assert vllm.attention == trt.attention == "fused"
    assert vllm.graph_capture
    assert default_serving_engine("gpu") == default_serving_engine("accelerator") == "vllm"
    assert default_serving_engine("cpu") == "llama.cpp"


def test_engines_are_refused_on_other_vendors_naming_those_that_run_there():
    mi300x, h100 = get_device("mi300x"), get_device("h100-sxm")
    assert resolve_engine("tensorrt-llm", h100).name == "tensorrt-llm"
    assert resolve_engine(None, mi300x).name == "vllm"
    with pytest.raises(PredictionError, match="NVIDIA devices only") as err:
        resolve_engine("tensorrt-llm", mi300x)
    assert "vllm" in str(err.value)
    assert "tensorrt-llm," not in str(err.value)
    with pytest.raises(PredictionError, match=r"not an LLM serving engine.*vllm"):
        resolve_engine("pytorch-eager", h100)
    with pytest.raises(PredictionError, match="runs on cpu, gpu devices, not accelerator"):
        resolve_engine("llama.cpp", get_device("gaudi2"))
    # the vendor check is case-insensitive and by prefix; without a vendor only the kind counts
    assert resolve_runtime("tensorrt", "gpu", "nvidia corporation").name == "tensorrt"
    assert resolve_runtime("tensorrt", "gpu").name == "tensorrt"
    with pytest.raises(PredictionError, match="NVIDIA devices only"):
        resolve_runtime("tensorrt", "gpu", "AMD")


def test_a_user_serving_engine_is_parsed(user_dir):
    write(user_dir, "my-eng", GOOD.format(name="my-eng") + 'vendors = ["AMD"]\n' + SERVING)
    prof = get_runtime("my-eng")
    assert prof.vendors == ("AMD",)
    assert prof.serving.weights == ("fp16", "int4")
    assert prof.serving.kv_cache == ("fp16", "fp8")
    assert prof.serving.batching == "static"
    assert prof.serving.max_prefill_tokens == 512
    assert prof.serving.memory_utilization == pytest.approx(0.85)
    assert prof.serving.step_overhead_us == pytest.approx(30.0)
    assert prof.runs_on_vendor("amd")
    assert not prof.runs_on_vendor("NVIDIA")


@pytest.mark.parametrize(("line", "message"), [
    ('weights = ["fp16", "nf4"]', "weights must name some of.*unknown \\['nf4'\\]"),
    ('weights = []', "weights must name some of"),
    ('kv_cache = ["int4"]', "kv_cache must name some of"),
    ('batching = "dynamic"', "batching = 'dynamic'; choose one of continuous, static"),
    ('memory_utilization = 0', "memory_utilization must be a number in \\(0, 1\\]"),
    ('memory_utilization = 1.2', "memory_utilization"),
    ('memory_utilization = true', "memory_utilization"),
    ('max_prefill_tokens = -1', "max_prefill_tokens must be an integer"),
    ('max_prefill_tokens = 1.5', "max_prefill_tokens must be an integer"),
    ('step_overhead_us = -3', "step_overhead_us"),
    ('kv_convert_per = "block"', "kv_convert_per = 'block'; choose one of kv-head, query-head"),
    ('paged = true', "unknown keys \\['paged'\\]"),
])
def test_bad_serving_tables_are_refused_naming_the_key(user_dir, line, message):
    key = line.split("=")[0].strip()
    table = "\n".join(ln for ln in SERVING.splitlines() if not ln.startswith(key + " "))
    write(user_dir, "bad", GOOD.format(name="bad") + table + "\n" + line + "\n")
    with pytest.raises(PredictionError, match=message) as err:
        get_runtime("bad")
    assert "bad.toml" in str(err.value)
    assert "[serving]" in str(err.value)


@pytest.mark.parametrize(("text", "message"), [
    ('vendors = "NVIDIA"\n', "vendors must be a list"),
    ('vendors = [""]\n', "vendors must be a list of non-empty strings"),
    ('serving = 3\n', "must be a table"),
])
def test_bad_vendor_lists_and_serving_values_are_refused(user_dir, text, message):
    write(user_dir, "bad", text + GOOD.format(name="bad"))
    with pytest.raises(PredictionError, match=message):
        get_runtime("bad")


# --- [serving.custom_allreduce] -------------------------------------------------------------------

CUSTOM_AR = """
[serving.custom_allreduce]
world_sizes = [2, 4]
fabrics = ["nvswitch"]
rules = [
  { max_ranks = 2, below_bytes = 1000, algorithm = "one_shot" },
  { max_ranks = 4, below_bytes = 500, algorithm = "two_shot" },
]
"""


def test_a_custom_allreduce_table_picks_the_first_rule_that_admits_the_group(user_dir):
    write(user_dir, "car", GOOD.format(name="car") + SERVING + CUSTOM_AR)
    car = get_runtime("car").serving.custom_allreduce
    assert car.algorithm(999, 2, "nvswitch") == "one_shot"
    assert car.algorithm(1000, 2, "nvswitch") is None      # below_bytes is strict
    assert car.algorithm(499, 4, "nvswitch") == "two_shot"
    assert car.algorithm(499, 4, "pcie-switch") is None    # fabric not listed
    assert car.algorithm(10, 6, "nvswitch") is None        # world size not supported
    assert get_runtime("deepspeed-mii").serving.custom_allreduce is None


def test_todays_engines_are_versioned_profiles_with_sourced_host_time():
    for name, version, host_us in (("vllm", "0.24.0", 160), ("tensorrt-llm", "1.3.0rc20", 580),
                                   ("sglang", "0.5.14", 0)):
        spec = get_runtime(name).serving
        assert (spec.version, spec.step_overhead_us) == (version, host_us)
        assert spec.kernel_estimator == "engine-tables"
        # the shipped tables were measured in this very release on the devices they hold
        assert load_tables().version("h100-sxm", name) == version
        assert "add-norm" in spec.fused_kernels
        assert spec.native_kv == ("fp8",)
        assert spec.step_overhead_source  # every host figure names where it comes from
        assert not get_runtime(f"{name}-2024").serving.native_kv if name != "sglang" else True
    assert get_runtime("vllm-2024").serving.kernel_estimator == ""
    assert "2024" in get_runtime("tensorrt-llm-2024").serving.version


@pytest.mark.parametrize(("key", "value", "message"), [
    ("native_kv", ["fp16"], "native_kv must name quantised KV dtypes"),
    ("fused_kernels", ["add-everything"], "fused_kernels must name some of"),
    ("native_kv", ["fp9"], "native_kv must name quantised KV dtypes"),
    ("version", 3, "version must be one line of text"),
    ("kernel_estimator", "a\nb", "kernel_estimator must be one line of text"),
])
def test_bad_serving_engine_fields_are_refused(key, value, message):
    doc = {"name": "x", "description": "d", "device_kinds": ["gpu"], "serving": {key: value}}
    with pytest.raises(PredictionError, match=message):
        profile_from_document(doc, "x.toml", known_patterns=frozenset())


def test_the_shipped_engines_custom_allreduce_follows_their_sources():
    trt = get_runtime("tensorrt-llm-2024").serving.custom_allreduce
    vllm = get_runtime("vllm-2024").serving.custom_allreduce
    for car in (trt, vllm):
        assert car.world_sizes == (2, 4, 6, 8)
        assert "nvswitch" in car.fabrics
        assert not {"pcie-switch", "pcie-host"} & set(car.fabrics)
        assert car.algorithm(8192, 4, "nvswitch") == "one_shot"
        assert car.algorithm(64 * 2**20, 4, "nvswitch") is None   # NCCL above the maximum
        assert car.algorithm(8192, 3, "nvswitch") is None
    # TensorRT-LLM AUTO: 2 ranks one-shot up to the 16e6 B workspace; 4: one-shot below 1e6
    assert trt.algorithm(15e6, 2, "nvswitch") == "one_shot"
    assert trt.algorithm(999_999, 4, "nvswitch") == "one_shot"
    assert trt.algorithm(1e6, 4, "nvswitch") == "two_shot"
    assert trt.algorithm(5e5, 8, "nvswitch") == "two_shot"
    assert trt.algorithm(8e6, 8, "nvswitch") is None
    # vLLM: < 8 MiB; fully connected: one-shot below 512 KiB (<= 4 ranks) / 256 KiB (<= 8)
    assert vllm.algorithm(8 * 2**20 - 16, 2, "nvswitch") == "one_shot"
    assert vllm.algorithm(512 * 1024, 4, "nvswitch") == "two_shot"
    assert vllm.algorithm(256 * 1024 - 16, 8, "nvswitch") == "one_shot"
    assert vllm.algorithm(256 * 1024, 8, "nvswitch") == "two_shot"


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        (("world_sizes = [2, 4]", "world_sizes = [1, 4]"), "world_sizes must be a non-empty list"),
        (("world_sizes = [2, 4]", "world_sizes = []"), "world_sizes must be a non-empty list"),
        (('fabrics = ["nvswitch"]', 'fabrics = ["nvlink"]'), "fabrics must name some of.*'nvlink'"),
        (
            ('"one_shot"', '"three_shot"'),
            "algorithm = 'three_shot'; choose one of one_shot, two_shot",
        ),
        (("below_bytes = 1000", "below_bytes = 0"), "below_bytes must be a number in \\(0"),
        (("below_bytes = 1000", "below_bytes = -5"), "below_bytes must be a number"),
        (("max_ranks = 2,", "max_ranks = 1,"), "max_ranks must be an integer in \\[2"),
        (("max_ranks = 2,", "max_ranks = 2.5,"), "max_ranks must be an integer"),
        (("max_ranks = 2,", "ranks = 2,"), "rules\\[0\\] must be a table of exactly"),
        (("world_sizes = [2, 4]\n", ""), "missing \\['world_sizes'\\]"),
        (
            ("world_sizes = [2, 4]\n", "world_sizes = [2, 4]\nmax_bytes = 1\n"),
            "unknown \\['max_bytes'\\]",
        ),
    ],
)
def test_bad_custom_allreduce_tables_are_refused_naming_the_key(user_dir, replace, message):
    old, new = replace
    assert old in CUSTOM_AR
    write(user_dir, "bad", GOOD.format(name="bad") + SERVING + CUSTOM_AR.replace(old, new, 1))
    with pytest.raises(PredictionError, match=message) as err:
        get_runtime("bad")
    assert "custom_allreduce" in str(err.value)
    assert "bad.toml" in str(err.value)


def test_an_empty_rule_list_is_refused(user_dir):
    text = CUSTOM_AR.split("rules = [")[0] + "rules = []\n"
    write(user_dir, "bad", GOOD.format(name="bad") + SERVING + text)
    with pytest.raises(PredictionError, match="rules must be a non-empty list"):
        get_runtime("bad")
