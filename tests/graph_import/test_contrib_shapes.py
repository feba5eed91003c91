"""Shapes of onnxruntime contrib ops (no ONNX schema) and propagation past them."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from roofcast.graph_import.contrib_shapes import MS, SHAPE_RULES, ContribShapeError
from roofcast.graph_import.load import load_model
from roofcast.graph_import.shapes import infer_concrete
from tests.graph_import.import_helpers import external_weight, make_model, serialize

B, S, H, HEADS = 2, 7, 32, 4


def rule(op, domain=MS):
    return SHAPE_RULES[(domain, op)]


@pytest.mark.parametrize(
    "op", ["FastGelu", "BiasGelu", "Gelu", "QuickGelu", "BiasAdd", "RotaryEmbedding"]
)
def test_same_shape_ops(op):
    assert rule(op)({}, [(B, S, H), (H,)]) == [((B, S, H), None)]


def test_skip_layer_norm_outputs():
    out = rule("SkipLayerNormalization")({}, [(B, S, H), (B, S, H), (H,)])
    assert out == [((B, S, H), None), ((B, S, 1), "float"), ((B, S, 1), "float"), ((B, S, H), None)]


def test_simplified_layer_norm_in_onnx_domain():
    out = rule("SimplifiedLayerNormalization", "")({"axis": -1}, [(B, S, H), (H,)])
    assert out == [((B, S, H), None), ((B, S, 1), "float")]


def test_attention_output_and_present():
    attrs = {"num_heads": HEADS}
    out = rule("Attention")(attrs, [(B, S, H), (H, 3 * H), (3 * H,)])
    assert out[0] == ((B, S, H), None)
    assert out[1] == ((2, B, HEADS, 0 + S, H // HEADS), None)
    past = (2, B, HEADS, 5, H // HEADS)
    out = rule("Attention")(attrs, [(B, S, H), (H, 3 * H), (3 * H,), None, past])
    assert out[1] == ((2, B, HEADS, 5 + S, H // HEADS), None)
    sized = rule("Attention")(
        {"num_heads": HEADS, "qkv_hidden_sizes": [H, H, 2 * H]}, [(B, S, H), (H, 4 * H)]
    )
    assert sized[0] == ((B, S, 2 * H), None)


def test_multi_head_attention_layouts():
    mha = rule("MultiHeadAttention")
    assert mha({}, [(B, S, H), (B, 9, H), (B, 9, 48)]) == [((B, S, 48), None)]
    assert mha({}, [(B, S, HEADS, 3, 8)]) == [((B, S, HEADS * 8), None)]
    assert mha({}, [(B, S, H), (B, 9, HEADS, 2, 8)]) == [((B, S, HEADS * 8), None)]
    assert mha({}, [(B, S, H), (B, HEADS, 9, 8), (B, HEADS, 9, 8)]) == [((B, S, HEADS * 8), None)]


def test_group_query_attention_head_size():
    gqa = rule("GroupQueryAttention")
    attrs = {"num_heads": 8, "kv_num_heads": 2}
    assert gqa(attrs, [(B, S, 8 * 16), (B, S, 2 * 16), (B, S, 2 * 16)]) == [((B, S, 8 * 16), None)]
    packed = (B, S, (8 + 2 * 2) * 16)
    assert gqa(attrs, [packed]) == [((B, S, 8 * 16), None)]


def test_embed_layer_norm_and_matmul_variants():
    out = rule("EmbedLayerNormalization")({}, [(B, S), (B, S), (100, H), (512, H)])
    assert out == [((B, S, H), "float"), ((B,), "int32"), ((B, S, H), "float")]
    assert rule("MatMulNBits")({"K": H, "N": 64}, [(B, S, H), (64, 1, 16)]) == [((B, S, 64), None)]
    fused = rule("FusedMatMul")({"transB": 1}, [(B, HEADS, S, 8), (B, HEADS, 9, 8)])
    assert fused == [((B, HEADS, S, 9), None)]
    assert rule("GemmFastGelu")({}, [(B, S, H), (H, 4 * H)]) == [((B, S, 4 * H), None)]


def test_missing_required_input_raises():
    with pytest.raises(ContribShapeError, match="input 0"):
        rule("FastGelu")({}, [None])


def test_chain_of_contrib_ops_resolves_in_few_rounds():
    """A 12-layer ORT-style stack (MatMul -> FastGelu -> MatMul -> SkipLayerNormalization)
    resolves in a handful of whole-graph rounds, not one round per contrib op."""
    layers = 12
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", H])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits += [external_weight(f"w1_{i}", [H, 4 * H]), external_weight(f"w2_{i}", [4 * H, H]),
                  external_weight(f"g_{i}", [H]), external_weight(f"b_{i}", [4 * H])]
        nodes += [
            helper.make_node("MatMul", [prev, f"w1_{i}"], [f"h{i}"]),
            helper.make_node("FastGelu", [f"h{i}", f"b_{i}"], [f"a{i}"], domain=MS),
            helper.make_node("MatMul", [f"a{i}", f"w2_{i}"], [f"o{i}"]),
            helper.make_node(
                "SkipLayerNormalization",
                [f"o{i}", prev, f"g_{i}"],
                [f"n{i}", "", "", f"s{i}"],
                domain=MS,
                epsilon=1e-5,
            ),
        ]
        prev = f"n{i}"
    nodes.append(helper.make_node("Relu", [prev], ["y"]))
    model = make_model(nodes, [x], [y], inits)
    model.opset_import.append(helper.make_opsetid(MS, 1))
    res = infer_concrete(load_model(serialize(model)), {"batch": B, "sequence": S})
    assert res.tensors["y"].dims == (B, S, H)
    assert res.tensors[f"h{layers - 1}"].dims == (B, S, 4 * H)
    assert res.tensors[f"s{layers - 1}"].dims == (B, S, H)
    assert res.iterations <= 3
