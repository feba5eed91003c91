"""Normalisations and softmax: per-element + per-row formula counts (see normalization.py)."""

from __future__ import annotations

import pytest
from onnx import TensorProto

from roofcast.graph_import.types import Engine
from tests.graph_import.costs.builders import (
    MS_DOMAIN,
    cost,
    direct_cost,
    f16,
    f32,
    i32,
    out,
    tensor,
    weights,
)

N_ELEM = 2 * 5 * 64
ROWS = 2 * 5


def test_layer_norm_with_bias_and_stats_outputs():
    c = cost(
        "LayerNormalization", [f32("x", 2, 5, 64), f32("g", 64), f32("b", 64)],
        [out("y"), out("mean"), out("inv_std")], initializers={"g": weights(64), "b": weights(64)},
    )
    assert c.flops == 7 * N_ELEM + 4 * ROWS
    assert c.weight_bytes == 4 * (64 + 64)
    assert c.bytes_read == 4 * (N_ELEM + 64 + 64)
    assert c.bytes_written == 4 * (N_ELEM + ROWS + ROWS)
    assert c.engine == Engine.VECTOR


def test_layer_norm_axis1_without_bias():
    c = cost("LayerNormalization", [f32("x", 2, 5, 64), f32("g", 5, 64)], [out("y")],
             attrs={"axis": 1})
    assert c.flops == 6 * N_ELEM + 4 * 2


def test_rms_normalization_opset23():
    c = cost("RMSNormalization", [f32("x", 2, 5, 64), f32("g", 64)], [out("y")], opset=23)
    assert c.flops == 4 * N_ELEM + 3 * ROWS


def test_simplified_layer_norm_ort():
    # ORT's contrib op lives in the ai.onnx domain, which onnx shape inference does not know
    c = direct_cost("SimplifiedLayerNormalization",
                    [tensor("x", "float", 2, 5, 64), tensor("g", "float", 64)],
                    [tensor("y", "float", 2, 5, 64)])
    assert c.flops == 4 * N_ELEM + 3 * ROWS


def test_skip_layer_norm_with_beta_and_bias():
    c = cost(
        "SkipLayerNormalization",
        [f32("x", 2, 5, 64), f32("s", 2, 5, 64), f32("g", 64), f32("beta", 64), f32("bias", 64)],
        [f32("y", 2, 5, 64)], domain=MS_DOMAIN,
    )
    assert c.flops == (1 + 1 + 7) * N_ELEM + 4 * ROWS  # skip add, bias add, LayerNorm
    assert c.bytes_read == 4 * (2 * N_ELEM + 3 * 64)


def test_skip_simplified_layer_norm():
    c = cost("SkipSimplifiedLayerNormalization",
             [f32("x", 2, 5, 64), f32("s", 2, 5, 64), f32("g", 64)], [f32("y", 2, 5, 64)],
             domain=MS_DOMAIN)
    assert c.flops == (1 + 4) * N_ELEM + 3 * ROWS


def test_batch_norm_inference():
    bn_inputs = [f32("x", 2, 16, 8, 8)] + [f32(n, 16) for n in ("s", "b", "m", "v")]
    inits = {n: weights(16) for n in ("s", "b", "m", "v")}
    c = cost("BatchNormalization", bn_inputs, [out("y")], initializers=inits)
    assert c.flops == 4 * (2 * 16 * 8 * 8) + 2 * 16
    assert c.weight_bytes == 4 * 4 * 16
    assert c.bytes_written == 4 * 2 * 16 * 8 * 8


def test_batch_norm_training_mode_adds_statistics():
    bn_inputs = [f32("x", 2, 16, 8, 8)] + [f32(n, 16) for n in ("s", "b", "m", "v")]
    c = cost("BatchNormalization", bn_inputs, [out("y"), out("rm"), out("rv")],
             attrs={"training_mode": 1})
    numel = 2 * 16 * 8 * 8
    assert c.flops == (4 + 4) * numel + (2 + 4 + 6) * 16
    assert c.bytes_written == 4 * (numel + 16 + 16)


def test_instance_norm():
    c = cost("InstanceNormalization", [f32("x", 2, 16, 8, 8), f32("s", 16), f32("b", 16)],
             [out("y")])
    assert c.flops == 7 * (2 * 16 * 8 * 8) + 4 * (2 * 16)


def test_group_norm_opset21():
    # onnx shape inference leaves GroupNormalization's output shape unknown: cost it directly
    c = direct_cost("GroupNormalization",
                    [tensor("x", "float", 2, 16, 8, 8), tensor("s", "float", 16),
                     tensor("b", "float", 16)],
                    [tensor("y", "float", 2, 16, 8, 8)], attrs={"num_groups": 4})
    assert c.flops == 7 * (2 * 16 * 8 * 8) + 4 * (2 * 4)


@pytest.mark.parametrize(("p", "expected"), [(2, 3 * 4 * 10 + 4), (1, 3 * 4 * 10)])
def test_lp_normalization(p, expected):
    assert cost("LpNormalization", [f32("x", 4, 10)], [out("y")], attrs={"p": p}).flops == expected


def test_ms_embed_layer_norm_reads_only_gathered_rows():
    c = cost(
        "EmbedLayerNormalization",
        [i32("ids", 2, 5), i32("seg", 2, 5), f32("word", 100, 64), f32("pos", 16, 64),
         f32("segemb", 2, 64), f32("g", 64), f32("b", 64)],
        [f32("y", 2, 5, 64), i32("mask_index", 2)],
        initializers={"word": weights(100, 64), "pos": weights(16, 64),
                      "segemb": weights(2, 64), "g": weights(64), "b": weights(64)},
        domain=MS_DOMAIN,
    )
    assert c.flops == (7 + 2) * N_ELEM + 4 * ROWS  # two extra embedding adds per element
    gathered = N_ELEM + N_ELEM + 2 * 64  # word rows, position rows, whole 2-row segment table
    assert c.weight_bytes == 4 * (gathered + 64 + 64)
    assert c.bytes_read == 4 * (2 * ROWS) + c.weight_bytes
    assert c.bytes_written == 4 * N_ELEM + 4 * 2


def test_softmax():
    c = cost("Softmax", [f32("x", 4, 8, 32)], [out("y")])
    assert c.flops == 5 * 4 * 8 * 32
    assert (c.bytes_read, c.bytes_written) == (4 * 1024, 4 * 1024)
    assert c.engine == Engine.VECTOR


def test_log_softmax_adds_one_log_per_row():
    c = cost("LogSoftmax", [f32("x", 4, 8, 32)], [out("y")], attrs={"axis": 1})
    assert c.flops == 5 * 4 * 8 * 32 + 4 * 32


def test_hardmax():
    assert cost("Hardmax", [f32("x", 4, 8, 32)], [out("y")]).flops == 4 * 8 * 32


def test_softmax_half_precision_bytes():
    c = cost("Softmax", [f16("x", 3, 7)], [out("y", TensorProto.FLOAT16)])
    assert (c.bytes_read, c.bytes_written) == (2 * 21, 2 * 21)


def test_lrn():
    c = cost("LRN", [f32("x", 1, 8, 5, 5)], [out("y")], attrs={"size": 3})
    assert c.flops == (3 + 5) * 8 * 5 * 5


def test_mean_variance_normalization_default_axes():
    # a function op whose output shape onnx inference leaves unknown: cost it directly
    c = direct_cost("MeanVarianceNormalization", [tensor("x", "float", 2, 3, 4, 4)],
                    [tensor("y", "float", 2, 3, 4, 4)])
    assert c.flops == 5 * (2 * 3 * 4 * 4) + 4 * 3  # one group per channel
