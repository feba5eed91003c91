"""Attention: QKᵀ and AV matmuls (2 FLOPs per MAC), 6 + extras per score, projections only
where the op includes them."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from roofcast.graph_import.types import Engine
from tests.graph_import.costs.builders import MS_DOMAIN, cost, f16, f32, i32, i64, out, weights

SCORE = 1 + 5  # scale + softmax, per score


def test_onnx_attention_4d():
    c = cost("Attention", [f32("q", 2, 4, 8, 16), f32("k", 2, 4, 10, 16), f32("v", 2, 4, 10, 32)],
             [out("y")], opset=23)
    scores = 2 * 4 * 8 * 10
    assert c.flops == 2 * (2 * 4 * 8 * 16) * 10 + 2 * (2 * 4 * 8 * 32) * 10 + SCORE * scores
    assert c.bytes_read == 4 * (2 * 4 * 8 * 16 + 2 * 4 * 10 * 16 + 2 * 4 * 10 * 32)
    assert c.bytes_written == 4 * 2 * 4 * 8 * 32
    assert c.engine == Engine.MATRIX


def test_onnx_attention_3d_with_mask_and_past():
    c = cost(
        "Attention",
        [f32("q", 2, 8, 64), f32("k", 2, 10, 64), f32("v", 2, 10, 64), f32("m", 8, 16),
         f32("pk", 2, 4, 6, 16), f32("pv", 2, 4, 6, 16)],
        [out("y"), out("present_k"), out("present_v")],
        attrs={"q_num_heads": 4, "kv_num_heads": 4}, opset=23,
    )
    keys = 10 + 6
    scores = 2 * 4 * 8 * keys
    assert c.flops == 2 * (2 * 8 * 64) * keys * 2 + (SCORE + 1) * scores


def test_ms_attention_with_projection_bias_mask_and_past():
    c = cost(
        "Attention",
        [f32("x", 2, 8, 64), f32("w", 64, 192), f32("b", 192), i32("mask", 2),
         f32("past", 2, 2, 4, 6, 16)],
        [f32("y", 2, 8, 64), f32("present", 2, 2, 4, 14, 16)],
        attrs={"num_heads": 4}, domain=MS_DOMAIN,
        initializers={"w": weights(64, 192), "b": weights(192)},
    )
    keys = 6 + 8
    projection = 2 * (2 * 8) * 64 * 192 + (2 * 8) * 192
    attention = 2 * (2 * 8 * 64) * keys * 2 + (SCORE + 1) * (2 * 4 * 8 * keys)
    assert c.flops == projection + attention
    assert c.weight_bytes == 4 * (64 * 192 + 192)


def test_ms_attention_unequal_qkv_sizes():
    c = cost("Attention", [f32("x", 1, 4, 32), f32("w", 32, 32 + 32 + 64)],
             [f32("y", 1, 4, 64)], attrs={"num_heads": 2, "qkv_hidden_sizes": [32, 32, 64]},
             domain=MS_DOMAIN)
    assert c.flops == 2 * 4 * 32 * 128 + 2 * (4 * 32) * 4 + 2 * (4 * 64) * 4 + SCORE * 2 * 4 * 4


def test_ms_multi_head_attention_cross_with_bias():
    c = cost(
        "MultiHeadAttention",
        [f32("q", 2, 8, 64), f32("k", 2, 10, 64), f32("v", 2, 10, 64), f32("b", 192)],
        [f32("y", 2, 8, 64)], attrs={"num_heads": 4}, domain=MS_DOMAIN,
    )
    assert c.flops == 2 * (2 * 8 * 64) * 10 * 2 + SCORE * (2 * 4 * 8 * 10) + 2 * 8 * 192


def test_ms_multi_head_attention_packed_qkv_and_4d_kv():
    packed = cost("MultiHeadAttention", [f32("qkv", 2, 8, 4, 3, 16)], [f32("y", 2, 8, 64)],
                  attrs={"num_heads": 4}, domain=MS_DOMAIN)
    assert packed.flops == 2 * (2 * 8 * 64) * 8 * 2 + SCORE * (2 * 4 * 8 * 8)
    kv4d = cost("MultiHeadAttention",
                [f32("q", 2, 8, 64), f32("k", 2, 4, 12, 16), f32("v", 2, 4, 12, 16)],
                [f32("y", 2, 8, 64)], attrs={"num_heads": 4}, domain=MS_DOMAIN)
    assert kv4d.flops == 2 * (2 * 8 * 64) * 12 * 2 + SCORE * (2 * 4 * 8 * 12)


def test_ms_group_query_attention_with_rotary():
    heads, kv_heads, d, seq = 4, 2, 16, 8
    c = cost(
        "GroupQueryAttention",
        [f32("q", 2, seq, heads * d), f32("k", 2, seq, kv_heads * d),
         f32("v", 2, seq, kv_heads * d), None, None, i32("seqlens", 2), i32("total"),
         f32("cos", 32, d // 2), f32("sin", 32, d // 2)],
        [f32("y", 2, seq, heads * d), f32("pk", 2, kv_heads, seq, d),
         f32("pv", 2, kv_heads, seq, d)],
        attrs={"num_heads": heads, "kv_num_heads": kv_heads, "do_rotary": 1},
        initializers={"total": np.array(seq, dtype=np.int32)}, domain=MS_DOMAIN,
    )
    attention = 2 * (2 * seq * heads * d) * seq * 2 + SCORE * (2 * heads * seq * seq)
    rotary = 3 * 2 * seq * (heads + kv_heads) * d
    assert c.flops == attention + rotary


def test_rotary_embedding_onnx_and_ms():
    full = cost("RotaryEmbedding",
                [f32("x", 2, 4, 8, 16), f32("cos", 32, 8), f32("sin", 32, 8), i64("pos", 2, 8)],
                [out("y")], opset=23)
    assert full.flops == 3 * 2 * 4 * 8 * 16
    assert full.engine == Engine.VECTOR
    half = cost("RotaryEmbedding",
                [f32("x", 2, 4, 8, 16), f32("cos", 32, 4), f32("sin", 32, 4), i64("pos", 2, 8)],
                [out("y")], attrs={"rotary_embedding_dim": 8}, opset=23)
    assert half.flops == 3 * 2 * 4 * 8 * 8
    ms = cost("RotaryEmbedding",
              [f32("x", 2, 8, 64), i64("pos", 2, 8), f32("cos", 32, 8), f32("sin", 32, 8)],
              [f32("y", 2, 8, 64)], attrs={"num_heads": 4}, domain=MS_DOMAIN)
    assert ms.flops == 3 * 2 * 8 * 64
    assert ms.bytes_written == 4 * 2 * 8 * 64


def test_attention_output_dtype_half():
    c = cost("Attention", [f16("q", 1, 2, 4, 8), f16("k", 1, 2, 4, 8), f16("v", 1, 2, 4, 8)],
             [out("y", TensorProto.FLOAT16)], opset=23)
    assert c.bytes_written == 2 * 1 * 2 * 4 * 8
