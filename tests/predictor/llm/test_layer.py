"""predictor.llm.layer: one builder gives both roads a layer kind's kernels."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofcast.graph_import.llm.decoder import Decoder, decoder_of
from roofcast.predictor.llm import kernels
from roofcast.predictor.llm.kernels import Segment, step_workload
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.parallel import llm_source
from roofcast.predictor.parallel.llm_source import LLMParallelSource

FP16 = TensorDtypes("fp16")
SKIP = {"Dequantize", "KvConvert"}


@pytest.mark.parametrize("name", ["llama-2-7b", "mixtral-8x7b", "opt-like", "gptj-like"])
def test_serving_and_training_layers_are_one_builders(archs, engine, name):
    arch = archs[name]
    serve = step_workload(arch, [Segment(2, 64, 64)], FP16, engine)
    layer = serve[(serve["scope"] == "layer") & ~serve["op_type"].isin(SKIP)]
    src = LLMParallelSource(arch, seq_tokens=64, runtime="tensorrt")  # the engine's kernels
    rows = src.build(tp=1, ep=1, micro_batch=2, sequence_parallel=False, mode="infer").rows
    block = rows[rows["layer"] == 1]
    served = [n for n in layer["node"] if n != "kv_write"]  # the KV cache is serving's own
    # the same kernels in the same order; the experts take each road's form (serving: one
    # module row where training runs grouped up, activation, down)
    rename = {"attn0": "attn", "qk0": "qk", "softmax0": "softmax", "pv0": "pv"}
    grouped = [n for n in block["node"] if n.startswith("experts_")]
    if arch.n_experts > 1:
        assert grouped[0] == "experts_up"
        assert grouped[-1] == "experts_down"
    expanded = [m for n in served for m in (grouped if n == "experts" else [rename.get(n, n)])]
    assert expanded == list(block["node"])


def test_non_uniform_layers_cost_each_kind_for_its_layers(archs, engine, monkeypatch):
    arch = archs["mixtral-8x7b"]
    moe = decoder_of(arch).layers[0]
    dense = decoder_of(replace(arch, n_experts=1, experts_per_token=1)).layers[0]
    mixed = Decoder(arch.name, (dense,) * 2 + (moe,) * (arch.n_layers - 2), arch.d_model,
                    arch.vocab, arch.max_context)
    monkeypatch.setattr(kernels, "decoder_of", lambda a: mixed)
    w = step_workload(arch, [Segment(1, 1, 128)], FP16, engine)
    assert w["key"].is_unique
    assert set(w.loc[w["node"] == "up", "count"]) == {2.0}           # the dense layers
    assert set(w.loc[w["node"] == "k1.router", "count"]) == {30.0}   # the MoE layers
    assert set(w.loc[w["scope"] == "step", "count"]) == {1.0}
    monkeypatch.setattr(llm_source, "decoder_of", lambda a: mixed)
    src = LLMParallelSource(arch, seq_tokens=64)
    rows = src.build(tp=1, ep=1, micro_batch=1, sequence_parallel=False, mode="infer").rows
    routed = set(rows.loc[rows["node"] == "router", "layer"])
    assert routed == set(range(3, arch.n_layers + 1))
