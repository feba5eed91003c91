"""Convolutions: 2 × numel(Y) × C_in/group × kernel volume, any stride/pad/dilation/group."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from roofcast.graph_import.types import Engine
from tests.graph_import.costs.builders import (
    MS_DOMAIN,
    T,
    cost,
    f32,
    out,
    u8,
    weights,
)


def test_conv2d_padded_with_bias():
    c = cost(
        "Conv", [f32("x", 1, 3, 32, 32), f32("w", 16, 3, 3, 3), f32("b", 16)], [out("y")],
        attrs={"pads": [1, 1, 1, 1]}, initializers={"w": weights(16, 3, 3, 3), "b": weights(16)},
    )
    assert c.flops == 2 * (16 * 32 * 32) * (3 * 3 * 3) + 16 * 32 * 32
    assert c.weight_bytes == 4 * (16 * 3 * 3 * 3 + 16)
    assert c.bytes_read == 4 * (3 * 32 * 32) + c.weight_bytes
    assert c.bytes_written == 4 * 16 * 32 * 32
    assert c.engine == Engine.MATRIX


def test_conv2d_strided_dilated():
    # output side = floor((17 - (2·(3-1)+1)) / 2) + 1 = 7
    c = cost("Conv", [f32("x", 2, 8, 17, 17), f32("w", 4, 8, 3, 3)], [out("y")],
             attrs={"strides": [2, 2], "dilations": [2, 2]})
    assert c.flops == 2 * (2 * 4 * 7 * 7) * (8 * 3 * 3)
    assert c.bytes_written == 4 * 2 * 4 * 7 * 7


def test_conv_grouped_is_matrix():
    c = cost("Conv", [f32("x", 1, 8, 10, 10), f32("w", 16, 4, 3, 3)], [out("y")],
             attrs={"group": 2, "pads": [1, 1, 1, 1]})
    assert c.flops == 2 * (16 * 10 * 10) * (4 * 3 * 3)
    assert c.engine == Engine.MATRIX


def test_conv_depthwise_is_vector():
    c = cost("Conv", [f32("x", 1, 8, 10, 10), f32("w", 8, 1, 3, 3)], [out("y")],
             attrs={"group": 8, "pads": [1, 1, 1, 1]})
    assert c.flops == 2 * (8 * 10 * 10) * (1 * 3 * 3)
    assert c.engine == Engine.VECTOR


def test_conv_single_input_channel_is_not_depthwise():
    c = cost("Conv", [f32("x", 1, 1, 10, 10), f32("w", 8, 1, 3, 3)], [out("y")])
    assert c.flops == 2 * (8 * 8 * 8) * (1 * 3 * 3)
    assert c.engine == Engine.MATRIX


@pytest.mark.parametrize(
    ("x", "w", "pads", "y_numel"),
    [
        ((1, 4, 50), (6, 4, 5), [0, 0], 6 * 46),  # 1-D
        ((1, 2, 4, 8, 8), (3, 2, 3, 3, 3), [1] * 6, 3 * 4 * 8 * 8),  # 3-D
    ],
)
def test_conv_1d_3d(x, w, pads, y_numel):
    c = cost("Conv", [f32("x", *x), f32("w", *w)], [out("y")], attrs={"pads": pads})
    assert c.flops == 2 * y_numel * int(np.prod(w[1:]))


def test_conv_transpose_strided_with_bias():
    # output side = (5 - 1)·2 + 3 = 11
    c = cost("ConvTranspose", [f32("x", 1, 8, 5, 5), f32("w", 8, 4, 3, 3), f32("b", 4)],
             [out("y")], attrs={"strides": [2, 2]})
    assert c.flops == 2 * (8 * 5 * 5) * (4 * 3 * 3) + 4 * 11 * 11
    assert c.bytes_written == 4 * 4 * 11 * 11
    assert c.engine == Engine.MATRIX


def test_conv_transpose_grouped():
    c = cost("ConvTranspose", [f32("x", 1, 8, 5, 5), f32("w", 8, 2, 3, 3)], [out("y")],
             attrs={"group": 2})
    assert c.flops == 2 * (8 * 5 * 5) * (2 * 3 * 3)


def test_conv_integer():
    c = cost("ConvInteger", [u8("x", 1, 2, 5, 5), u8("w", 3, 2, 3, 3)],
             [out("y", TensorProto.INT32)])
    assert c.flops == 2 * (3 * 3 * 3) * (2 * 3 * 3)
    assert c.bytes_read == 1 * (2 * 5 * 5 + 3 * 2 * 3 * 3)
    assert c.bytes_written == 4 * 3 * 3 * 3


def test_qlinear_conv_with_bias():
    inputs = [u8("x", 1, 2, 5, 5), f32("sx"), u8("zx"), u8("w", 3, 2, 3, 3), f32("sw"), u8("zw"),
              f32("sy"), u8("zy"), T("b", TensorProto.INT32, (3,))]
    c = cost("QLinearConv", inputs, [out("y", TensorProto.UINT8)])
    assert c.flops == (2 * 2 * 3 * 3 + 1 + 2) * (3 * 3 * 3)  # MACs, bias add, requantisation
    assert c.bytes_written == 1 * 3 * 3 * 3


def test_ms_fused_conv_relu_with_residual():
    c = cost("FusedConv",
             [f32("x", 1, 4, 6, 6), f32("w", 8, 4, 1, 1), f32("b", 8), f32("z", 1, 8, 6, 6)],
             [f32("y", 1, 8, 6, 6)], attrs={"activation": "Relu"}, domain=MS_DOMAIN)
    assert c.flops == (2 * 4 + 1 + 1 + 1) * (8 * 6 * 6)  # MACs, bias, Relu, residual add
