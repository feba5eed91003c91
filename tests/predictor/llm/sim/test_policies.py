"""The policy registry: one entry per engine version, defaults, refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.sim.policies import (
    default_policy,
    get_policy,
    policy_names,
    register,
)


def test_each_engine_has_its_registered_policy():
    assert {"vllm-v1", "vllm-v0", "tensorrt-llm-1", "sglang", "static"} <= set(policy_names())
    assert default_policy("vllm").name == "vllm-v1"
    assert default_policy("tensorrt-llm").admission == "full"  # GUARANTEED_NO_EVICT
    assert default_policy("vllm", static=True).loop == "static"
    assert get_policy("sglang").prefix_cache


def test_unknown_duplicate_or_bad_policies_are_refused():
    with pytest.raises(PredictionError, match="unknown scheduler policy 'orca'"):
        get_policy("orca")
    with pytest.raises(PredictionError, match="already registered"):
        register(get_policy("vllm-v1"))
    with pytest.raises(PredictionError, match="loop must be one of"):
        register(replace(get_policy("vllm-v1"), name="x", loop="speculative"))
    with pytest.raises(PredictionError, match="max running sequences"):
        get_policy("vllm-v1").with_limits(max_seqs=0)


def test_user_limits_override_the_defaults():
    p = get_policy("vllm-v1").with_limits(max_seqs=7, max_tokens=99)
    assert (p.max_seqs, p.max_tokens) == (7, 99)
    assert get_policy("vllm-v1").max_seqs == 1024  # the registered entry is unchanged
