"""What a prediction says about the engine it ran on: the estimator really used for the
steps, the kernel model's interval carried through the calibration, how fp8 KV is read."""

from __future__ import annotations

import pytest

from roofcast.defaults import SERVING_ESTIMATOR
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.llm.phases import step_estimator
from roofcast.predictor.llm.serving import predict_serving
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.runtimes import get_runtime


@pytest.fixture(scope="module")
def preds(archs):
    arch = archs["llama-2-7b"]
    out = {}
    for dev, kv in (("h100-sxm", "fp8"), ("a100-80gb-sxm", "fp8"), ("h100-sxm", None)):
        cfg = ServingConfig(input_tokens=256, output_tokens=32, runtime="vllm", kv_cache=kv)
        out[(dev, kv)] = predict_serving(arch, get_device(dev), cfg)
    return out


def test_estimator_named_is_the_one_the_steps_used(preds):
    used = step_estimator(SERVING_ESTIMATOR, get_runtime("vllm"))
    assert used != SERVING_ESTIMATOR  # vllm v1 times its steps with its own kernel model
    assert {p.estimator for p in preds.values()} == {used}


def test_interval_is_not_zero_width(preds):
    p = preds[("h100-sxm", None)]
    for metric in ("ttft_s", "tpot_s"):
        assert p.lower[metric] < getattr(p, metric) < p.upper[metric]


def test_native_fp8_kv_is_not_called_converted(preds):
    native = [n for n in preds[("h100-sxm", "fp8")].notes if n.startswith("fp8 KV cache")]
    assert native
    assert "natively" in native[0]
    assert "converted" not in native[0]
    a100 = [n for n in preds[("a100-80gb-sxm", "fp8")].notes if n.startswith("fp8 KV cache")]
    assert a100
    assert "natively" not in a100[0]
