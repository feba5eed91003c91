"""Matrix-multiply family: Gemm, MatMul (batched, broadcasting), Einsum, integer/quantised and
com.microsoft variants. Engine: MATRIX. One multiply-add = 2 FLOPs.

For MatMul-like ops the output already has the broadcast batch shape, so
``FLOPs = 2 × numel(Y) × K`` covers batching and broadcasting exactly.
"""

from __future__ import annotations

import re

from roofcast.graph_import.costs._common import (
    CostRuleError,
    attr_float,
    attr_int,
    attr_str,
    io_cost,
    need_input,
    need_output,
    prod,
)
from roofcast.graph_import.costs.gemm_dims import (
    gemm_einsum,
    gemm_gemm,
    gemm_matmul,
    gemm_qlinear_matmul,
)
from roofcast.graph_import.costs.registry import MS_DOMAIN, register
from roofcast.graph_import.types import Engine, OpCost, OpNode, TensorInfo

#: FLOPs per output element to requantise an int32 accumulator (scale mul, zero-point add).
REQUANT_FLOPS_PER_ELEMENT = 2


def _contraction_size(node: OpNode, a: TensorInfo, transposed: bool = False) -> int:
    """K of ``A @ B``: A's last dim (its only dim when 1-D; its second-last when transposed)."""
    if not a.shape:
        raise CostRuleError(f"{node.op_type} node {node.name!r}: input A is a scalar")
    if transposed:
        if len(a.shape) < 2:
            raise CostRuleError(f"{node.op_type} node {node.name!r}: transA needs rank >= 2")
        return a.shape[-2]
    return a.shape[-1]


def _matmul_cost(node: OpNode, a_index: int, extra_flops_per_output: float = 0.0) -> OpCost:
    a = need_input(node, a_index, "A")
    y = need_output(node, 0)
    k = _contraction_size(node, a)
    return io_cost(node, (2 * k + extra_flops_per_output) * y.numel, Engine.MATRIX)


@register("MatMul", family="matmul", backward="gemm", gemm_dims=gemm_matmul)
def cost_MatMul(node: OpNode) -> OpCost:
    """MatMul (numpy semantics, batched + broadcasting): ``2 × numel(Y) × K``, K = A.shape[-1]."""
    need_input(node, 1, "B")
    return _matmul_cost(node, 0)


@register("MatMulInteger", family="matmul", backward="gemm", gemm_dims=gemm_matmul)
def cost_MatMulInteger(node: OpNode) -> OpCost:
    """MatMulInteger (int8/uint8 → int32): ``2 × numel(Y) × K``; zero points folded in."""
    need_input(node, 1, "B")
    return _matmul_cost(node, 0)


@register("QLinearMatMul", family="matmul", backward="gemm",
          gemm_dims=gemm_qlinear_matmul)
def cost_QLinearMatMul(node: OpNode) -> OpCost:
    """QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp):
    ``2 × numel(Y) × K`` + 2 requantisation FLOPs per output element."""
    need_input(node, 3, "b")
    return _matmul_cost(node, 0, REQUANT_FLOPS_PER_ELEMENT)


@register("Gemm", family="matmul", backward="gemm", gemm_dims=gemm_gemm)
def cost_Gemm(node: OpNode) -> OpCost:
    """Gemm Y = alpha·op(A)·op(B) + beta·C: ``2·M·N·K`` plus, per output element, 1 for
    alpha ≠ 1, 1 for beta·C when beta ≠ 1, and 1 for adding C when C is given."""
    a = need_input(node, 0, "A")
    need_input(node, 1, "B")
    y = need_output(node, 0)
    k = _contraction_size(node, a, transposed=bool(attr_int(node, "transA", 0)))
    per_output = 2 * k
    if attr_float(node, "alpha", 1.0) != 1.0:
        per_output += 1
    if node.input(2) is not None:
        per_output += 1 + (attr_float(node, "beta", 1.0) != 1.0)
    return io_cost(node, per_output * y.numel, Engine.MATRIX)


@register("FusedMatMul", domain=MS_DOMAIN, family="matmul", backward="gemm",
          gemm_dims=gemm_matmul)
def cost_FusedMatMul(node: OpNode) -> OpCost:
    """com.microsoft FusedMatMul = alpha·op(A)·op(B): ``2 × numel(Y) × K`` (+1/elem when
    alpha ≠ 1). transBatchA/transBatchB are not supported (CostRuleError)."""
    if attr_int(node, "transBatchA", 0) or attr_int(node, "transBatchB", 0):
        raise CostRuleError(
            f"FusedMatMul node {node.name!r}: transBatchA/transBatchB are not supported by the "
            "cost rule; export the model without ORT transformer fusions"
        )
    a = need_input(node, 0, "A")
    need_input(node, 1, "B")
    y = need_output(node, 0)
    k = _contraction_size(node, a, transposed=bool(attr_int(node, "transA", 0)))
    per_output = 2 * k + (attr_float(node, "alpha", 1.0) != 1.0)
    return io_cost(node, per_output * y.numel, Engine.MATRIX)


@register("MatMulNBits", domain=MS_DOMAIN, family="matmul", backward="gemm")
def cost_MatMulNBits(node: OpNode) -> OpCost:
    """com.microsoft MatMulNBits (A float, B block-quantised N×K): ``2 × numel(Y) × K`` plus
    dequantisation of B, 2 FLOPs per weight ((q - zp)·scale) = ``2·N·K``."""
    a = need_input(node, 0, "A")
    need_input(node, 1, "B")
    y = need_output(node, 0)
    k = attr_int(node, "K", a.shape[-1] if a.shape else 0)
    n = attr_int(node, "N", y.shape[-1] if y.shape else 0)
    return io_cost(node, 2 * y.numel * k + 2 * n * k, Engine.MATRIX)


_EINSUM_TERM = re.compile(r"^[A-Za-z]*(\.\.\.)?[A-Za-z]*$")


def _einsum_indices(node: OpNode, equation: str, operands: list[TensorInfo]):
    """Parse an einsum equation into per-operand index lists and the output index list.

    Ellipsis dims become indices ``'…997'``, ``'…998'``, ``'…999'`` aligned from the right, so
    broadcasting operands share them.
    Returns (operand index lists, output index list, index -> size).
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands) or not all(_EINSUM_TERM.match(t) for t in terms):
        raise CostRuleError(
            f"Einsum node {node.name!r}: equation {equation!r} does not match "
            f"{len(operands)} operands"
        )
    sizes: dict[str, int] = {}
    per_operand: list[list[str]] = []
    for term, t in zip(terms, operands, strict=True):
        head, has_ell, tail = term.partition("...")
        n_ell = len(t.shape) - len(head) - len(tail) if has_ell else 0
        if n_ell < 0 or (not has_ell and len(term) != len(t.shape)):
            raise CostRuleError(
                f"Einsum node {node.name!r}: term {term!r} does not fit shape {t.shape}"
            )
        # right-align ellipsis names so broadcasting operands share indices
        idx = list(head) + [f"…{i + 1000 - n_ell}" for i in range(n_ell)] + list(tail)
        for name, d in zip(idx, t.shape, strict=True):
            sizes[name] = max(sizes.get(name, 1), int(d))
        per_operand.append(idx)
    ell_names = sorted({n for idx in per_operand for n in idx if n.startswith("…")})
    if arrow:
        head, has_ell, tail = rhs.partition("...")
        out = list(head) + (ell_names if has_ell else []) + list(tail)
    else:
        letters = [c for idx in per_operand for c in idx if not c.startswith("…")]
        out = ell_names + sorted(c for c in set(letters) if letters.count(c) == 1)
    return per_operand, out, sizes


@register("Einsum", family="matmul", backward="gemm_every_input", gemm_dims=gemm_einsum)
def cost_Einsum(node: OpNode) -> OpCost:
    """Einsum, naive (unoptimised) evaluation over the full index space of size P = product of
    all distinct index sizes: per point, (n_operands - 1) multiplies, plus 1 accumulate when
    some index is summed out. A 2-operand contraction is thus ``2·P`` (= 2 × MACs), MATRIX;
    without contraction (outer/elementwise product) VECTOR; a 1-operand permutation is DATA.
    """
    operands = [t for t in node.inputs if t is not None]
    if not operands:
        raise CostRuleError(f"Einsum node {node.name!r}: no operands")
    equation = attr_str(node, "equation", "")
    _operands_idx, out, sizes = _einsum_indices(node, equation, operands)
    space = prod(sizes.values())
    contracted = bool(set(sizes) - set(out))
    n = len(operands)
    flops = ((n - 1) + (1 if contracted else 0)) * space
    if n >= 2 and contracted:
        engine = Engine.MATRIX
    elif flops == 0:
        engine = Engine.DATA
    else:
        engine = Engine.VECTOR
    return io_cost(node, flops, engine)
