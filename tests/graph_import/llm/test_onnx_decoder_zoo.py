"""ONNX decoder detection on real (weightless) exports: the shipped ``training_data/zoo/llm``
files and the zoo's decoders, each against the Hugging Face config it was exported from
(its JSON sidecar); non-decoders refused; FLOPs of the imported graph against the arch."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm.onnx_decoder import (
    DEFAULT_MAX_CONTEXT,
    decoder_graph,
    detect_decoder,
    onnx_weight_elements,
)

ZOO = Path(__file__).resolve().parents[3] / "training_data" / "zoo"
LLM_ZOO = ZOO / "llm"

#: what a family's config implies and a config field does not say
FAMILY = {
    "llama": {"activation": "silu", "norm": "rmsnorm", "positions": "rope", "gated_mlp": True},
    "qwen2": {"activation": "silu", "norm": "rmsnorm", "positions": "rope", "gated_mlp": True,
              "qkv_bias": True},
    "mixtral": {"activation": "silu", "norm": "rmsnorm", "positions": "rope", "gated_mlp": True},
    "gpt2": {"activation": "gelu_tanh", "norm": "layernorm", "positions": "learned",
             "gated_mlp": False, "qkv_bias": True, "mlp_bias": True},
    "falcon": {"activation": "gelu", "norm": "layernorm", "positions": "rope",
               "gated_mlp": False, "parallel_block": True},
}
#: exports whose config ties the head but whose file holds a folded copy of it (TorchScript
#: constant folding): the file is what is detected
UNTIED_COPY = {"gpt2", "gpt3_xl", "gpt3_27"}

EXPORTS = sorted(p.stem for p in LLM_ZOO.glob("*.onnx"))
ZOO_DECODERS = ["llama", "gpt2", "gpt3_xl", "gpt3_27"]


def _path(name: str) -> Path:
    return LLM_ZOO / f"{name}.onnx" if name in EXPORTS else ZOO / f"{name}.onnx"


@functools.cache
def _detect(name: str):
    return detect_decoder(_path(name))


def _meta(name: str) -> dict:
    return json.loads(_path(name).with_suffix(".json").read_text())


def _config(meta: dict) -> dict:
    return meta["source"].get("config") or meta["source"]["config_non_default"]


def expected_arch(name: str) -> dict:
    """The LLMArch fields the export's config gives (read here independently of hf_config)."""
    cfg = _config(_meta(name))
    kind = cfg["model_type"]
    d = cfg.get("hidden_size") or cfg["n_embd"]
    heads = cfg.get("num_attention_heads") or cfg["n_head"]
    kv = cfg.get("num_key_value_heads") or heads
    if kind == "falcon" and cfg.get("multi_query") and not cfg.get("new_decoder_architecture"):
        kv = 1
    d_ff = cfg.get("intermediate_size") or cfg.get("n_inner") or cfg.get("ffn_hidden_size") or 4 * d
    want = {
        "n_layers": cfg.get("num_hidden_layers") or cfg["n_layer"], "d_model": d,
        "n_heads": heads, "n_kv_heads": kv, "head_dim": cfg.get("head_dim") or d // heads,
        "d_ff": d_ff, "vocab": cfg["vocab_size"],
        "n_experts": cfg.get("num_local_experts", 1),
        "experts_per_token": cfg.get("num_experts_per_tok", 1),
        "tied_embeddings": cfg.get("tie_word_embeddings", True) and name not in UNTIED_COPY,
        "qkv_bias": False, "mlp_bias": False, "parallel_block": False,
        "max_context": cfg.get("n_positions", DEFAULT_MAX_CONTEXT),
    }
    want.update(FAMILY[kind])
    return want


def extra_weights(name: str) -> int:
    """Float initializers the file holds that LLMArch.params does not count: the final
    LayerNorm's bias and, for GPT-2, each layer's output-projection bias; the RoPE inverse
    frequencies (``head_dim / 2``) that the dynamo exporter keeps as an initializer."""
    want = expected_arch(name)
    rope_buffer = want["head_dim"] // 2 if _meta(name)["exporter"] == "dynamo" else 0
    if want["norm"] != "layernorm":
        return rope_buffer
    o_bias = want["n_layers"] * want["d_model"] if want["qkv_bias"] else 0
    return want["d_model"] + o_bias + rope_buffer


def test_the_llm_zoo_ships_the_exports():
    assert {"llama_kv", "llama_kv_dynamo", "qwen2_kv", "gpt2_kv", "mixtral_moe",
            "mixtral_moe_kv", "falcon_mqa_kv"} <= set(EXPORTS)
    total = sum(_path(n).stat().st_size for n in EXPORTS)
    assert total < 6e6  # weightless: a few MB for all of them


@pytest.mark.parametrize("name", EXPORTS + ZOO_DECODERS)
def test_export_gives_the_arch_of_its_config(name):
    info = _detect(name)
    arch = info.arch
    want = expected_arch(name)
    assert {k: getattr(arch, k) for k in want} == want
    assert arch.family == "onnx"
    assert arch.name == name
    assert info.layers == want["n_layers"]
    if want["positions"] == "rope":
        assert any(n.startswith("max_context") for n in info.notes)


@pytest.mark.parametrize("name", EXPORTS + ZOO_DECODERS)
def test_arch_params_equal_the_files_weights(name):
    arch = _detect(name).arch
    assert onnx_weight_elements(_path(name)) == arch.params + extra_weights(name)


@pytest.mark.parametrize("name", EXPORTS)
def test_kv_inputs_and_outputs_are_found(name):
    meta = _meta(name)
    info = _detect(name)
    names_in = [i["name"] for i in meta["onnx_inputs"]]
    names_out = [o["name"] for o in meta["onnx_outputs"]]
    assert info.has_kv_cache == meta["with_past"]
    assert list(info.kv_inputs) == [n for n in names_in if n.startswith("past_key_values.")]
    assert list(info.kv_outputs) == [n for n in names_out if n.startswith("present.")]
    if meta["with_past"]:
        assert len(info.kv_inputs) == 2 * info.layers
        assert info.kv_inputs[:2] == ("past_key_values.0.key", "past_key_values.0.value")


def test_attention_kinds_of_the_exports():
    kinds = {n: _detect(n).attention for n in ("gpt2_kv", "llama_kv", "falcon_mqa_kv")}
    assert kinds == {"gpt2_kv": "mha", "llama_kv": "gqa", "falcon_mqa_kv": "mqa"}


def test_alt_exporter_decoders_are_detected():
    """The dynamo exporter's graphs (opset 18): the same arch as the TorchScript ones."""
    for name in ("llama", "gpt2"):
        alt = detect_decoder(ZOO / "alt_exporter" / f"{name}.onnx").arch
        want = expected_arch(name)
        want["tied_embeddings"] = _config(_meta(name)).get("tie_word_embeddings", True)
        assert {k: getattr(alt, k) for k in want} == want  # dynamo keeps one tied table


@pytest.mark.parametrize(("name", "why"), [
    ("resnet50", "no token embedding"),
    ("bert_base", "no LM head"),
    ("t5_encoder", "no LM head"),
    ("whisper_encoder", "no token embedding"),
    ("switchxl4", "encoder-decoder"),
    ("lstm_lm", "no attention"),
])
def test_non_decoders_are_refused_clearly(name, why):
    with pytest.raises(LLMConfigError, match=why) as err:
        detect_decoder(ZOO / f"{name}.onnx")
    assert "config.json" in str(err.value)


def reference_matmul_flops(arch, sequence: int, past: int) -> float:
    """2 FLOPs per multiply-add: projections, active experts, router and LM head on ``sequence``
    tokens, plus QK^T and AV over ``past + sequence`` keys (all heads, full square)."""
    attn_w = arch.d_model * (arch.q_dim + 2 * arch.kv_dim) + arch.q_dim * arch.d_model
    mlp_w = arch.experts_per_token * (3 if arch.gated_mlp else 2) * arch.d_model * arch.d_ff
    router = arch.d_model * arch.n_experts if arch.n_experts > 1 else 0
    weights = arch.n_layers * (attn_w + mlp_w + router) + arch.vocab * arch.d_model
    attention = arch.n_layers * 4 * sequence * (past + sequence) * arch.q_dim
    return 2 * sequence * weights + attention


@pytest.mark.parametrize(("name", "sequence", "past"), [
    ("llama", 128, 0), ("llama_kv", 1, 64), ("qwen2_kv", 32, 16), ("gpt2_kv", 16, 100),
    ("falcon_mqa_kv", 64, 16), ("llama_kv_dynamo", 16, 32),
])
def test_graph_flops_match_the_arch(name, sequence, past):
    arch = _detect(name).arch
    graph = decoder_graph(_path(name), sequence=sequence, past=past)
    assert not graph.unresolved
    matmul = sum(op.cost.flops for op in graph.ops()
                 if op.cost is not None and op.op_type in ("MatMul", "Gemm"))
    # Gemm adds its bias (GPT-2): up to 0.1 % more than the multiply-adds
    assert matmul == pytest.approx(reference_matmul_flops(arch, sequence, past), rel=1e-3)
    if name == "llama":  # and the torch FLOP counter's figure the zoo recorded
        assert matmul == _meta("llama")["forward_flops"]


def test_decoder_graph_needs_a_past_for_kv_exports():
    with pytest.raises(LLMConfigError, match="past >= 1"):
        decoder_graph(_path("gpt2_kv"), sequence=8, past=0)


@pytest.mark.parametrize("name", [*EXPORTS, "llama", "gpt2"])
def test_onnx_road_and_config_road_agree(name):
    """The arch read from the export equals the arch hf_config reads from the same config.json,
    but for what the file cannot say: a RoPE model's max_context (noted default) and a tied head
    that the exporter copied."""
    from roofcast.graph_import.llm.hf_config import arch_from_config

    from_config = arch_from_config(_config(_meta(name)), name=name, source="sidecar")
    info = _detect(name)
    skip = {"name", "family", "source"}
    if any(n.startswith("max_context") for n in info.notes):
        skip.add("max_context")
    if name in UNTIED_COPY:
        skip.add("tied_embeddings")
    fields = [f for f in from_config.__dataclass_fields__ if f not in skip]
    assert {f: getattr(info.arch, f) for f in fields} == {
        f: getattr(from_config, f) for f in fields
    }


def test_load_llm_reads_an_onnx_export_by_path_and_bytes():
    from roofcast.graph_import.llm.load import load_llm

    path = _path("gpt2_kv")
    assert load_llm(path) == _detect("gpt2_kv").arch
    from_bytes = load_llm(path.read_bytes())
    assert from_bytes.n_layers == 12
    assert from_bytes.tied_embeddings
