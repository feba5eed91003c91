"""ONNX decoder detection on tiny decoders built in code (fast), and on hostile input."""

from __future__ import annotations

import builtins
import math
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from roofcast.graph_import.errors import LLMConfigError, ModelImportError
from roofcast.graph_import.llm.onnx_decoder import (
    DEFAULT_MAX_CONTEXT,
    arch_from_onnx,
    detect_decoder,
    onnx_weight_elements,
)
from tests.graph_import.llm.decoder_fixtures import tiny_decoder


def _extra_params(**spec) -> int:
    """Weights a tiny decoder holds that ``LLMArch.params`` does not count: the final
    LayerNorm's bias (LLMArch counts one d_model vector for the final norm)."""
    return spec.get("d_model", 32) if spec.get("norm") == "layernorm" else 0


CASES = {
    "llama-gqa": {},
    "mha-learned-gelu-biases-tied": {"norm": "layernorm", "activation": "gelu", "gated": False,
                                         "positions": "learned", "qkv_bias": True, "mlp_bias": True,
                                         "kv_heads": 4, "tied": True},
    "mqa-packed-parallel-gelu_tanh": {"activation": "gelu_tanh", "packed_qkv": True, "kv_heads": 1,
                                          "parallel": True},
    "relu-rmsnorm-op-3-layers": {"activation": "relu", "norm": "rms_op", "layers": 3},
    "moe-4-experts-top2": {"experts": 4, "top_k": 2},
    "moe-ungated-top1": {"experts": 3, "top_k": 1, "gated": False, "activation": "relu"},
    "fused-gqa-op": {"attention": "gqa_op"},
    "fused-onnx-attention": {"attention": "onnx_op", "positions": "learned"},
}


@pytest.mark.parametrize("spec", CASES.values(), ids=CASES.keys())
def test_tiny_decoder_structure_is_found(spec):
    data = tiny_decoder(**spec)
    arch = arch_from_onnx(data, name="tiny")
    want = {
        "n_layers": spec.get("layers", 2), "d_model": 32, "n_heads": 4,
        "n_kv_heads": spec.get("kv_heads", 2), "head_dim": 8, "d_ff": 48, "vocab": 64,
        "gated_mlp": spec.get("gated", True), "activation": spec.get("activation", "silu"),
        "norm": "layernorm" if spec.get("norm") == "layernorm" else "rmsnorm",
        "positions": spec.get("positions", "rope"),
        "n_experts": spec.get("experts", 1),
        "experts_per_token": spec.get("top_k", 2) if spec.get("experts", 1) > 1 else 1,
        "tied_embeddings": spec.get("tied", False), "parallel_block": spec.get("parallel", False),
        "qkv_bias": spec.get("qkv_bias", False), "mlp_bias": spec.get("mlp_bias", False),
    }
    got = {k: getattr(arch, k) for k in want}
    assert got == want
    assert arch.name == "tiny"
    assert arch.family == "onnx"
    assert onnx_weight_elements(data) == arch.params + _extra_params(**spec)


def test_attention_kind_and_kv_names_with_past():
    info = detect_decoder(tiny_decoder(past=True, layers=3))
    assert info.has_kv_cache
    assert info.layers == 3
    assert info.attention == "gqa"
    assert info.kv_inputs == tuple(f"past_key_values.{i}.{kv}" for i in range(3)
                                   for kv in ("key", "value"))
    assert info.kv_outputs == tuple(
        f"present.{i}.{kv}" for i in range(3) for kv in ("key", "value")
    )
    assert info.arch.kv_elements_per_token() == 2 * 3 * 2 * 8


@pytest.mark.parametrize("attention", ["gqa_op", "onnx_op"])
def test_fused_attention_ops_give_kv_names(attention):
    info = detect_decoder(tiny_decoder(attention=attention, past=True))
    assert info.kv_inputs == ("past_key_values.0.key", "past_key_values.0.value",
                              "past_key_values.1.key", "past_key_values.1.value")
    assert info.kv_outputs[:2] == ("present.0.key", "present.0.value")
    assert (info.arch.n_heads, info.arch.n_kv_heads) == (4, 2)


def test_no_past_means_no_kv_cache():
    info = detect_decoder(tiny_decoder())
    assert not info.has_kv_cache
    assert info.kv_inputs == ()
    assert info.kv_outputs == ()


@pytest.mark.parametrize(("kv_heads", "kind"), [(4, "mha"), (2, "gqa"), (1, "mqa")])
def test_attention_kind(kv_heads, kind):
    assert detect_decoder(tiny_decoder(kv_heads=kv_heads)).attention == kind


def test_max_context_default_is_noted_and_can_be_given():
    info = detect_decoder(tiny_decoder())
    assert info.arch.max_context == DEFAULT_MAX_CONTEXT
    assert any(n.startswith("max_context") for n in info.notes)
    given = detect_decoder(tiny_decoder(), max_context=8192)
    assert given.arch.max_context == 8192
    assert not any(n.startswith("max_context") for n in given.notes)
    with pytest.raises(LLMConfigError, match="max_context"):
        detect_decoder(tiny_decoder(), max_context=0)


def test_learned_position_table_gives_max_context():
    arch = arch_from_onnx(tiny_decoder(positions="learned", max_positions=96))
    assert (arch.positions, arch.max_context) == ("learned", 96)


def test_untied_head_is_noted():
    info = detect_decoder(tiny_decoder(tied=False))
    assert not info.arch.tied_embeddings
    assert any("LM head" in n for n in info.notes)
    assert not any("LM head" in n for n in detect_decoder(tiny_decoder(tied=True)).notes)


# ------------------------------------------------------------------ refusals


def _mlp_only_model() -> bytes:
    """An embedding, two matmuls and an LM head: no attention anywhere."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("emb", (64, 16)), ("w1", (16, 16)), ("head", (16, 64)))]
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["x"]),
             helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("MatMul", ["h", "head"], ["logits"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_model_without_attention_is_refused():
    with pytest.raises(LLMConfigError, match=r"found no attention.*config\.json"):
        detect_decoder(_mlp_only_model())


def test_headless_model_is_refused():
    model = onnx.load_from_string(tiny_decoder())
    graph = model.graph
    head = next(n for n in reversed(graph.node) if n.op_type == "MatMul")
    graph.node.remove(next(n for n in graph.node if n.output[0] == "logits"))
    graph.node.remove(head)
    graph.node.append(helper.make_node("Identity", [head.input[0]], ["logits"]))
    with pytest.raises(LLMConfigError, match="no LM head"):
        detect_decoder(model.SerializeToString())


@pytest.mark.parametrize("data", [b"\x00\x01garbage" * 10, b"not an onnx file at all"])
def test_garbage_bytes_give_a_clean_error(data):
    with pytest.raises(ModelImportError, match="ONNX"):
        detect_decoder(data)


def test_truncated_model_gives_a_clean_error():
    data = tiny_decoder()
    with pytest.raises(ModelImportError):
        detect_decoder(data[: len(data) // 2])


def test_missing_file_gives_a_clean_error(tmp_path):
    with pytest.raises(ModelImportError, match="no such file"):
        detect_decoder(tmp_path / "nope.onnx")


def _with_external(data: bytes, location: str) -> bytes:
    """The tiny decoder with its largest initializer declared as external data at ``location``."""
    model = onnx.load_from_string(data)
    big = max(model.graph.initializer, key=lambda t: math.prod(t.dims))
    nbytes = math.prod(big.dims) * 4
    big.ClearField("raw_data")
    big.ClearField("float_data")
    big.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(nbytes))):
        entry = big.external_data.add()
        entry.key, entry.value = key, value
    return model.SerializeToString()


def test_external_data_outside_the_folder_is_refused_and_never_opened(tmp_path, monkeypatch):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\x00" * (1 << 16))
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    path = folder / "model.onnx"
    path.write_bytes(_with_external(tiny_decoder(), "../../secret.bin"))
    opened: list[str] = []
    real_open = builtins.open

    def spy(file, *args, **kw):
        opened.append(str(file))
        return real_open(file, *args, **kw)

    real_os_open = os.open

    def os_spy(file, *args, **kw):  # the loader opens by descriptor to check size first
        opened.append(str(file))
        return real_os_open(file, *args, **kw)

    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(os, "open", os_spy)
    with pytest.raises(ModelImportError, match="outside the model's folder"):
        detect_decoder(path)
    assert opened == [str(path)]  # the model file only, never the secret


def test_weightless_model_is_detected_without_its_data_file(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(_with_external(tiny_decoder(), "model.weights.bin"))  # never written
    arch = arch_from_onnx(path)
    assert arch.name == "model"
    assert arch.vocab == 64
    assert arch.n_layers == 2


def test_onnxruntime_genai_layout_is_read():
    """4-bit MatMulNBits linears, one packed QKV projection split by GroupQueryAttention (empty
    key/value inputs), rotary inside the op with cos/sin caches that give max_context."""
    info = detect_decoder(tiny_decoder(attention="gqa_op", packed_qkv=True, nbits=True, past=True,
                                       rotary_cache=512, norm="rms_op"))
    arch = info.arch
    got = (arch.n_heads, arch.n_kv_heads, arch.head_dim, arch.d_ff, arch.gated_mlp)
    assert got == (4, 2, 8, 48, True)
    assert (arch.positions, arch.max_context) == ("rope", 512)
    assert not any(n.startswith("max_context") for n in info.notes)
    assert info.kv_inputs[:2] == ("past_key_values.0.key", "past_key_values.0.value")


def test_cross_attention_decoder_is_refused():
    with pytest.raises(LLMConfigError, match=r"cross-attention.*encoder_hidden_states"):
        detect_decoder(tiny_decoder(cross=True))


NON_UNIFORM = {
    # a wider first layer (the first or last layer looking different: the GPT-2-large refusal)
    "wider-first-mlp-gpt2-like": {"layers": 4, "layer_d_ff": (64, 48, 48, 48),
                                  "norm": "layernorm", "activation": "gelu_tanh",
                                  "gated": False, "positions": "learned", "qkv_bias": True,
                                  "mlp_bias": True, "kv_heads": 4, "tied": True},
    "per-layer-kv-heads": {"layers": 3, "layer_kv_heads": (4, 2, 1)},
    "last-layer-differs-with-past": {"layers": 3, "layer_d_ff": (48, 48, 96), "past": True},
}


@pytest.mark.parametrize("spec", NON_UNIFORM.values(), ids=NON_UNIFORM.keys())
def test_decoder_with_differing_layers_is_read_as_a_list_of_kinds(spec):
    """Once refused with 'layer 1 differs from layer 0 ((Heads(...), ...)); LLMArch describes
    uniform layers'; now each layer is its own kind and the note says what differs in words."""
    data = tiny_decoder(**spec)
    info = detect_decoder(data, "tiny")
    arch = info.arch
    n = spec["layers"]
    d_ffs = spec.get("layer_d_ff") or (48,) * n
    kv = spec.get("layer_kv_heads") or (spec.get("kv_heads", 2),) * n
    assert not arch.uniform
    assert len(arch.kinds) == n
    assert [k.mlp.d_ff for k in arch.kinds] == list(d_ffs)
    assert [k.attention.n_kv_heads for k in arch.kinds] == list(kv)
    note = next(x for x in info.notes if "differ" in x)
    assert "Heads(" not in note
    assert "(" in note
    assert "vs" in note
    assert onnx_weight_elements(data) == arch.params + _extra_params(**spec)
    assert arch.kv_elements_per_token() == sum(2 * k * 8 for k in kv)
