"""``roofcast.llm`` and ``roofcast.llm_configs``: the same predictions as the serving model
called directly, one row per device for a list, every bad argument a ``PredictionError``, and
the docstring example run as written."""

from __future__ import annotations

import doctest
import json

import pandas as pd
import pytest

import roofcast
from roofcast import api
from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.llm.load import bundled_llms, load_llm
from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.serving import predict_serving
from roofcast.predictor.llm.types import ServingConfig, ServingPrediction

DEVICES = ["h100-sxm", "h200", "mi300x"]


def test_docstring_example_runs_as_written():
    tests = doctest.DocTestFinder().find(api.llm, "roofcast.llm", globs={})
    assert len(tests) == 1
    assert len(tests[0].examples) >= 5
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_one_device_is_the_serving_model_called_directly():
    got = roofcast.llm("llama-3.1-8b", "h100-sxm", input_tokens=1024, output_tokens=64,
                       batch=8, weights="fp8", kv_cache="fp8")
    assert isinstance(got, ServingPrediction)
    cfg = ServingConfig(input_tokens=1024, output_tokens=64, batch=8, weights="fp8",
                        kv_cache="fp8")
    want = predict_serving(load_llm("llama-3.1-8b"), get_device("h100-sxm"), cfg)
    assert got.config == want.config
    for field in ("ttft_s", "tpot_s", "e2e_latency_s", "output_tokens_per_s",
                  "total_tokens_per_s", "max_batch", "devices_needed"):
        assert getattr(got, field) == getattr(want, field), field
    assert got.memory == want.memory
    assert got.ttft_s < got.e2e_latency_s
    json.dumps(got.as_dict())  # a JSON record as it is


def test_a_list_of_devices_is_one_row_each_in_order():
    df = roofcast.llm("llama-3.1-70b", DEVICES, input_tokens=2048, output_tokens=256,
                      weights="fp8")
    assert isinstance(df, pd.DataFrame)
    assert list(df["device"]) == DEVICES
    cfg = ServingConfig(input_tokens=2048, output_tokens=256, weights="fp8")
    arch = load_llm("llama-3.1-70b")
    for row, device in zip(df.to_dict("records"), DEVICES, strict=True):
        want = predict_serving(arch, get_device(device), cfg).as_dict()
        for key in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "output_tokens_per_s",
                    "total_tokens_per_s", "max_batch"):
            assert row[key] == pytest.approx(want[key], rel=1e-9), (device, key)
        for part, col in roofcast.api.LLM_MEMORY.items():
            assert row[col] == pytest.approx(want["memory_GiB"][part], rel=1e-12), col
        parts = sum(row[c] for c in ("weights_GiB", "kv_cache_GiB", "activations_GiB",
                                     "reserve_GiB"))
        assert parts == pytest.approx(row["memory_GiB"], rel=1e-12)
        assert row["fits"] == (row["memory_GiB"] <= row["capacity_GiB"])
    assert df["speedup"].tolist() == pytest.approx(
        (df["output_tokens_per_s"] / df["output_tokens_per_s"].iloc[0]).tolist(), rel=1e-12)


def test_model_by_hf_id_or_arch_is_the_same_model():
    base = roofcast.llm(load_llm("llama-3.1-8b"), "h100-sxm")
    by_id = roofcast.llm("meta-llama/Llama-3.1-8B", "h100-sxm")
    assert by_id.ttft_s == base.ttft_s
    assert by_id.tpot_s == base.tpot_s


def test_llm_configs_lists_the_bundled_ones():
    df = roofcast.llm_configs()
    assert df["name"].tolist() == list(bundled_llms())
    row = df.set_index("name").loc["mixtral-8x7b"]
    assert row["active_params"] < row["params"]  # 2 of 8 experts per token
    assert row["kv_bytes_per_token_fp16"] == load_llm("mixtral-8x7b").kv_elements_per_token() * 2


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"batch": 0}, "batch= must be an integer from 1 to"),
    ({"batch": True}, "batch= must be an integer from 1 to"),
    ({"concurrency": "all"}, "concurrency= must be an integer from 1 to"),
    ({"batch": 2, "concurrency": 4}, "not both"),
    ({"input_tokens": 0}, "input_tokens= must be an integer from 1 to"),
    ({"input_tokens": 130000, "output_tokens": 2000}, "maximum context of 131072"),
    ({"weights": "int3"}, "weights dtype 'int3'"),
    ({"kv_cache": "int4"}, "kv_cache dtype 'int4'"),
    ({"runtime": "llama.cpp", "kv_cache": "fp8"}, "does not run fp8 KV cache"),
])
def test_bad_arguments_raise_prediction_error(kwargs, words):
    with pytest.raises(PredictionError, match=words):
        roofcast.llm("llama-3.1-8b", "h100-sxm", **kwargs)


def test_bad_model_and_devices_raise_the_projects_errors():
    with pytest.raises(ModelImportError):
        roofcast.llm("no-such-llm", "h100-sxm")
    with pytest.raises(HardwareSpecError):
        roofcast.llm("llama-3.1-8b", ["h100-sxm", "no-such-gpu"])
    with pytest.raises(PredictionError, match="no device"):
        roofcast.llm("llama-3.1-8b", [])
