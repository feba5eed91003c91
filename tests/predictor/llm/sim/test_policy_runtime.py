"""A named policy's engine times the steps when no runtime is given (``--policy sglang``:
SGLang's profile); a given runtime keeps its own step times and says so."""

from __future__ import annotations

from roofcast import api
from roofcast.predictor.llm.sim.run import SimSpec, simulate
from roofcast.predictor.llm.types import ServingConfig

CFG = ServingConfig(input_tokens=128, output_tokens=8)


def test_sglang_policy_runs_on_the_sglang_profile():
    arch, hw = api.llm_arch("llama-3.1-8b"), api.device("h100-sxm")
    spec = SimSpec(rate=2.0, requests=20, policy="sglang")
    res = simulate(arch, [hw], CFG, spec)[0]
    assert res.runtime == "sglang"
    assert not any("step times are" in n for n in res.notes)
    forced = simulate(arch, [hw], ServingConfig(input_tokens=128, output_tokens=8,
                                                runtime="vllm"), spec)[0]
    assert forced.runtime == "vllm"
    assert any("step times are vllm's" in n for n in forced.notes)
