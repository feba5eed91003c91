"""LSTM/GRU/RNN (D·S·B·(2·(I+H)·G·H + elementwise·H)) and (de)quantisation."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from roofcast.graph_import.types import Engine
from tests.graph_import.costs.builders import cost, f32, i8, out, u8, weights

S, B, I_SIZE, H = 7, 3, 10, 16


def test_lstm_forward_with_bias():
    c = cost(
        "LSTM", [f32("x", S, B, I_SIZE), f32("w", 1, 4 * H, I_SIZE), f32("r", 1, 4 * H, H),
                 f32("b", 1, 8 * H)],
        [out("y"), out("yh"), out("yc")], attrs={"hidden_size": H},
        initializers={"w": weights(1, 4 * H, I_SIZE), "r": weights(1, 4 * H, H),
                      "b": weights(1, 8 * H)},
    )
    assert c.flops == S * B * (2 * (I_SIZE + H) * 4 * H + (22 + 8) * H)
    assert c.weight_bytes == 4 * (4 * H * I_SIZE + 4 * H * H + 8 * H)
    assert c.bytes_read == 4 * S * B * I_SIZE + c.weight_bytes
    assert c.bytes_written == 4 * (S * B * H + B * H + B * H)
    assert c.engine == Engine.MATRIX


def test_lstm_bidirectional_batch_first_with_peepholes():
    c = cost(
        "LSTM",
        [
            f32("x", B, S, I_SIZE),
            f32("w", 2, 4 * H, I_SIZE),
            f32("r", 2, 4 * H, H),
            f32("b", 2, 8 * H),
            None,
            None,
            None,
            f32("p", 2, 3 * H),
        ],
        [out("y")],
        attrs={"hidden_size": H, "direction": "bidirectional", "layout": 1},
    )
    assert c.flops == 2 * S * B * (2 * (I_SIZE + H) * 4 * H + (22 + 8 + 6) * H)


def test_gru_without_bias():
    c = cost("GRU", [f32("x", 5, 2, 8), f32("w", 1, 3 * H, 8), f32("r", 1, 3 * H, H)],
             [out("y"), out("yh")], attrs={"hidden_size": H})
    assert c.flops == 5 * 2 * (2 * (8 + H) * 3 * H + 17 * H)


def test_rnn_with_bias():
    c = cost("RNN", [f32("x", 5, 2, 8), f32("w", 1, H, 8), f32("r", 1, H, H), f32("b", 1, 2 * H)],
             [out("y")], attrs={"hidden_size": H})
    assert c.flops == 5 * 2 * (2 * (8 + H) * 1 * H + (2 + 2) * H)


def test_quantize_linear():
    c = cost("QuantizeLinear", [f32("x", 4, 8), f32("s"), u8("z")], [out("y", TensorProto.UINT8)],
             initializers={"s": np.float32(0.1), "z": np.uint8(3)})
    assert c.flops == 5 * 32
    assert c.bytes_read == 4 * 32 + 4 + 1
    assert c.bytes_written == 1 * 32
    assert c.engine == Engine.VECTOR


def test_dequantize_linear_int8_weight():
    c = cost("DequantizeLinear", [i8("w", 4, 8), f32("s"), i8("z")], [out("y")],
             initializers={"w": weights(4, 8, dtype=np.int8), "s": np.float32(0.1),
                           "z": np.int8(0)})
    assert c.flops == 2 * 32
    assert c.weight_bytes == 1 * 32 + 4 + 1
    assert c.bytes_written == 4 * 32
    no_zp = cost("DequantizeLinear", [i8("w", 4, 8), f32("s")], [out("y")])
    assert no_zp.flops == 1 * 32


def test_dynamic_quantize_linear():
    c = cost("DynamicQuantizeLinear", [f32("x", 4, 8)],
             [out("y", TensorProto.UINT8), out("s"), out("z", TensorProto.UINT8)])
    assert c.flops == (2 + 5) * 32
    assert c.bytes_written == 1 * 32 + 4 + 1
