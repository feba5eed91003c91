"""MatMul family: 2 FLOPs per multiply-add, broadcasting batch dims, Einsum parsing."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from roofcast.graph_import.costs import CostRuleError, cost_of
from roofcast.graph_import.types import Engine
from tests.graph_import.costs.builders import (
    MS_DOMAIN,
    cost,
    direct_cost,
    direct_node,
    f16,
    f32,
    i8,
    import_one,
    out,
    tensor,
    u8,
    weights,
)


def test_matmul_2d_with_weight():
    c = cost("MatMul", [f32("a", 64, 128), f32("w", 128, 256)], [out("y")],
             initializers={"w": weights(128, 256)})
    assert c.flops == 2 * 64 * 128 * 256
    assert c.bytes_read == 4 * (64 * 128 + 128 * 256)
    assert c.bytes_written == 4 * 64 * 256
    assert c.weight_bytes == 4 * 128 * 256
    assert c.engine == Engine.MATRIX


def test_matmul_batched_broadcast():
    c = cost("MatMul", [f16("a", 2, 1, 8, 16), f16("b", 3, 16, 4)], [out("y", TensorProto.FLOAT16)])
    assert c.flops == 2 * (2 * 3 * 8 * 4) * 16
    assert c.bytes_read == 2 * (2 * 8 * 16 + 3 * 16 * 4)
    assert c.bytes_written == 2 * 2 * 3 * 8 * 4


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((16,), (16, 4), 2 * 4 * 16),  # vector @ matrix
        ((16,), (2, 16, 5), 2 * 2 * 5 * 16),  # vector @ batched matrix
        ((7, 16), (16,), 2 * 7 * 16),  # matrix @ vector
    ],
)
def test_matmul_one_dimensional_operands(a, b, expected):
    assert cost("MatMul", [f32("a", *a), f32("b", *b)], [out("y")]).flops == expected


def test_gemm_transposed_with_bias():
    c = cost(
        "Gemm", [f32("a", 32, 8), f32("w", 16, 32), f32("c", 16)], [out("y")],
        attrs={"transA": 1, "transB": 1}, initializers={"w": weights(16, 32), "c": weights(16)},
    )
    assert c.flops == 2 * 8 * 16 * 32 + 8 * 16  # MACs + bias add
    assert c.weight_bytes == 4 * (16 * 32 + 16)
    assert c.bytes_read == 4 * (32 * 8 + 16 * 32 + 16)
    assert c.bytes_written == 4 * 8 * 16


def test_gemm_alpha_beta_and_no_bias():
    scaled = cost("Gemm", [f32("a", 8, 32), f32("b", 32, 16), f32("c", 8, 16)], [out("y")],
                  attrs={"alpha": 0.5, "beta": 2.0})
    plain = cost("Gemm", [f32("a", 8, 32), f32("b", 32, 16)], [out("y")])
    assert scaled.flops == 2 * 8 * 16 * 32 + 3 * 8 * 16  # alpha·AB, beta·C, + C
    assert plain.flops == 2 * 8 * 16 * 32


def test_matmul_integer():
    c = cost("MatMulInteger", [u8("a", 4, 8), i8("w", 8, 3)], [out("y", TensorProto.INT32)],
             initializers={"w": weights(8, 3, dtype=np.int8)})
    assert c.flops == 2 * 4 * 3 * 8
    assert c.bytes_read == 1 * (4 * 8 + 8 * 3)
    assert c.bytes_written == 4 * 4 * 3
    assert c.weight_bytes == 8 * 3


def test_qlinear_matmul_adds_requantisation():
    inputs = [u8("a", 4, 8), f32("sa"), u8("za"), u8("b", 8, 3), f32("sb"), u8("zb"), f32("sy"),
              u8("zy")]
    c = cost("QLinearMatMul", inputs, [out("y", TensorProto.UINT8)])
    assert c.flops == (2 * 8 + 2) * 4 * 3
    assert c.bytes_read == 1 * (4 * 8 + 8 * 3) + 3 * 4 + 3 * 1  # tensors + scales + zero points
    assert c.bytes_written == 4 * 3


def test_ms_fused_matmul():
    c = cost("FusedMatMul", [f32("a", 2, 16, 8), f32("b", 16, 4)], [f32("y", 2, 8, 4)],
             attrs={"transA": 1, "alpha": 0.5}, domain=MS_DOMAIN)
    assert c.flops == (2 * 16 + 1) * 2 * 8 * 4


def test_ms_fused_matmul_trans_batch_is_reported_not_guessed():
    graph, node = import_one(
        "FusedMatMul", [f32("a", 2, 16, 8), f32("b", 16, 4)], [f32("y", 2, 8, 4)],
        attrs={"transBatchA": 1}, domain=MS_DOMAIN,
    )
    assert node.cost is None
    assert "transBatchA" in graph.unresolved["node"]


def test_ms_matmul_nbits():
    n, k, block = 32, 64, 32
    blob = block * 4 // 8
    c = cost(
        "MatMulNBits",
        [f32("a", 1, 5, k), u8("b", n, k // block, blob), f32("s", n * k // block)],
        [f32("y", 1, 5, n)],
        attrs={"K": k, "N": n, "bits": 4, "block_size": block},
        initializers={"b": weights(n, k // block, blob, dtype=np.uint8),
                      "s": weights(n * k // block)},
        domain=MS_DOMAIN,
    )
    assert c.flops == 2 * 5 * n * k + 2 * n * k
    assert c.weight_bytes == n * (k // block) * blob + 4 * n * k // block
    assert c.bytes_read == 4 * 5 * k + c.weight_bytes


@pytest.mark.parametrize(
    ("equation", "shapes", "flops", "engine"),
    [
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], 2 * 2 * 3 * 4 * 5, Engine.MATRIX),
        ("bhqd,bhkd->bhqk", [(2, 4, 8, 16), (2, 4, 10, 16)], 2 * 2 * 4 * 8 * 10 * 16,
         Engine.MATRIX),
        ("...ij,jk->...ik", [(2, 3, 4, 5), (5, 6)], 2 * 2 * 3 * 4 * 5 * 6, Engine.MATRIX),
        ("ij,jk", [(3, 4), (4, 5)], 2 * 3 * 4 * 5, Engine.MATRIX),  # implicit output "ik"
        ("i,j->ij", [(3,), (4,)], 3 * 4, Engine.VECTOR),  # outer product: 1 multiply
        ("ij->ji", [(3, 4)], 0, Engine.DATA),  # permutation only
        ("ii->", [(5, 5)], 5, Engine.VECTOR),  # trace: 5 adds
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], (2 + 1) * 2 * 3 * 4 * 5, Engine.MATRIX),
    ],
)
def test_einsum(equation, shapes, flops, engine):
    inputs = [f32(f"x{i}", *s) for i, s in enumerate(shapes)]
    c = cost("Einsum", inputs, [out("y")], attrs={"equation": equation})
    assert c.flops == flops
    assert c.engine == engine
    assert c.bytes_read == 4 * sum(int(np.prod(s)) for s in shapes)


def test_einsum_broadcast_ellipsis():
    # onnx shape inference does not broadcast ellipsis dims: cost the node directly
    c = direct_cost(
        "Einsum", [tensor("a", "float", 2, 1, 3, 4), tensor("b", "float", 5, 4, 6)],
        [tensor("y", "float", 2, 5, 3, 6)], attrs={"equation": "...ij,...jk->...ik"},
    )
    assert c.flops == 2 * (2 * 5) * 3 * 4 * 6


def test_einsum_bad_equation_raises():
    node = direct_node("Einsum", [tensor("a", "float", 2, 3)], [tensor("y", "float", 3)],
                       attrs={"equation": "ij,jk->ik"})
    with pytest.raises(CostRuleError, match="does not match 1 operands"):
        cost_of(node)
