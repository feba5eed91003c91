"""Elementwise unary, binary (broadcasting) and variadic ops, activations. Engine: VECTOR.

FLOPs = k × numel(output), where k counts the arithmetic operations, comparisons, selects and
elementary-function calls of the op's ONNX-spec formula (see the package docstring). Bytes:
each distinct input read once at its own (pre-broadcast) size, the output written once.
"""

from __future__ import annotations

from roofcast.graph_import.costs._common import attr_str, need_output, per_output_element
from roofcast.graph_import.costs.registry import MS_DOMAIN, register
from roofcast.graph_import.types import Engine, OpCost, OpNode

#: FLOPs per output element of unary ops, by the formula-count convention.
UNARY_FLOPS_PER_ELEMENT: dict[str, int] = {
    "Relu": 1,  # max(0, x)
    "Neg": 1,
    "Abs": 1,
    "Floor": 1,
    "Ceil": 1,
    "Round": 1,
    "Sign": 1,
    "Not": 1,
    "BitwiseNot": 1,
    "IsNaN": 1,
    "IsInf": 1,
    "Exp": 1,
    "Log": 1,
    "Sqrt": 1,
    "Reciprocal": 1,
    "Erf": 1,
    "Tanh": 1,
    "Sin": 1,
    "Cos": 1,
    "Tan": 1,
    "Asin": 1,
    "Acos": 1,
    "Atan": 1,
    "Sinh": 1,
    "Cosh": 1,
    "Asinh": 1,
    "Acosh": 1,
    "Atanh": 1,
    "LeakyRelu": 2,  # x < 0 ? alpha·x : x  -> mul, select
    "ThresholdedRelu": 2,  # x > alpha ? x : 0  -> compare, select
    "Sigmoid": 4,  # 1 / (1 + exp(-x))  -> neg, exp, add, div
    "HardSigmoid": 4,  # max(0, min(1, alpha·x + beta))  -> mul, add, min, max
    "HardSwish": 5,  # x · HardSigmoid(x)
    "Elu": 4,  # x < 0 ? alpha·(exp(x) - 1) : x  -> exp, sub, mul, select
    "Selu": 5,  # gamma·(x <= 0 ? alpha·exp(x) - alpha : x)  -> exp, mul, sub, select, mul
    "Celu": 7,  # max(0,x) + min(0, alpha·(exp(x/alpha) - 1))
    "Softplus": 3,  # log(exp(x) + 1)
    "Softsign": 3,  # x / (1 + |x|)
    "Mish": 5,  # x · tanh(softplus(x))
    "Swish": 6,  # x · sigmoid(alpha·x)  -> mul, sigmoid (4), mul
    "Shrink": 4,  # x < -l ? x + b : (x > l ? x - b : 0)  -> 2 compares, add/sub, select
}

#: FLOPs per output element of binary broadcasting ops.
BINARY_FLOPS_PER_ELEMENT: dict[str, int] = {
    "Add": 1,
    "Sub": 1,
    "Mul": 1,
    "Div": 1,
    "Pow": 1,
    "Mod": 1,
    "BitShift": 1,
    "And": 1,
    "Or": 1,
    "Xor": 1,
    "BitwiseAnd": 1,
    "BitwiseOr": 1,
    "BitwiseXor": 1,
    "Equal": 1,
    "Less": 1,
    "Greater": 1,
    "LessOrEqual": 1,
    "GreaterOrEqual": 1,
    "PRelu": 2,  # x < 0 ? slope·x : x  -> mul, select
    "Where": 1,  # select(condition, X, Y)
    "SwiGLU": 7,  # Swish(A) · B
}

#: FLOPs per element of a tanh-approximated Gelu:
#: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))  -> x³ (2), mul, add, mul, tanh, add, mul, mul.
GELU_TANH_FLOPS = 9
#: FLOPs per element of the exact Gelu: 0.5·x·(1 + erf(x/√2))  -> div, erf, add, mul, mul.
GELU_ERF_FLOPS = 5

#: com.microsoft elementwise ops, FLOPs per output element.
MS_FLOPS_PER_ELEMENT: dict[str, int] = {
    "Gelu": GELU_ERF_FLOPS,
    "BiasGelu": 1 + GELU_ERF_FLOPS,  # Gelu(A + bias)
    "QuickGelu": 6,  # x · sigmoid(alpha·x)  -> mul, sigmoid (4), mul
    "BiasAdd": 2,  # X + bias + skip
}

#: linear ops: their derivative needs only the output gradient, so their backward reads no
#: saved input.
GRAD_NEEDS_NO_INPUT: frozenset[str] = frozenset({"Add", "Sub", "Sum", "Neg", "Mean"})


def _backward(op_type: str) -> str:
    return "elementwise_gout_only" if op_type in GRAD_NEEDS_NO_INPUT else "elementwise"


@register(*UNARY_FLOPS_PER_ELEMENT, family="elementwise", backward=_backward)
def cost_unary(node: OpNode) -> OpCost:
    """Unary elementwise: ``UNARY_FLOPS_PER_ELEMENT[op] × numel(Y)`` FLOPs; read X, write Y."""
    return per_output_element(node, UNARY_FLOPS_PER_ELEMENT[node.op_type], Engine.VECTOR)


@register(*BINARY_FLOPS_PER_ELEMENT, family="elementwise", backward=_backward)
def cost_binary(node: OpNode) -> OpCost:
    """Broadcasting binary op: ``BINARY_FLOPS_PER_ELEMENT[op] × numel(broadcast output)``.

    Each input is read at its own size (the broadcast is done in registers, not memory).
    """
    return per_output_element(node, BINARY_FLOPS_PER_ELEMENT[node.op_type], Engine.VECTOR)


@register("Sum", "Max", "Min", family="elementwise", backward=_backward)
def cost_variadic_combine(node: OpNode) -> OpCost:
    """Variadic Sum/Max/Min of n broadcasting inputs: ``(n - 1) × numel(Y)`` FLOPs."""
    n = sum(t is not None for t in node.inputs)
    return per_output_element(node, max(n - 1, 0), Engine.VECTOR)


@register("Mean", family="elementwise", backward=_backward)
def cost_mean(node: OpNode) -> OpCost:
    """Variadic Mean of n inputs: (n - 1) adds + 1 divide = ``n × numel(Y)`` FLOPs."""
    n = sum(t is not None for t in node.inputs)
    return per_output_element(node, n, Engine.VECTOR)


@register("Clip", family="elementwise", backward="elementwise")
def cost_clip(node: OpNode) -> OpCost:
    """Clip: one min/max per bound given (inputs 1, 2, or attrs before opset 11) per element."""
    bounds = sum(node.input(i) is not None for i in (1, 2))
    bounds += sum(name in node.attrs for name in ("min", "max"))
    return per_output_element(node, bounds, Engine.VECTOR)


@register("Gelu", family="elementwise", backward="elementwise")
def cost_gelu(node: OpNode) -> OpCost:
    """Gelu (opset 20): 5 FLOPs/elem (erf form) or 9 with ``approximate='tanh'``."""
    approx = attr_str(node, "approximate", "none")
    k = GELU_TANH_FLOPS if approx == "tanh" else GELU_ERF_FLOPS
    return per_output_element(node, k, Engine.VECTOR)


@register(*MS_FLOPS_PER_ELEMENT, domain=MS_DOMAIN, family="elementwise", backward="elementwise")
def cost_ms_elementwise(node: OpNode) -> OpCost:
    """com.microsoft Gelu/BiasGelu/QuickGelu/BiasAdd: ``MS_FLOPS_PER_ELEMENT[op] × numel(Y)``."""
    return per_output_element(node, MS_FLOPS_PER_ELEMENT[node.op_type], Engine.VECTOR)


@register("FastGelu", domain=MS_DOMAIN, family="elementwise", backward="elementwise")
def cost_fast_gelu(node: OpNode) -> OpCost:
    """com.microsoft FastGelu(X, bias?): tanh-Gelu (9/elem) plus 1 add/elem when bias is given."""
    need_output(node, 0)
    k = GELU_TANH_FLOPS + (1 if node.input(1) is not None else 0)
    return per_output_element(node, k, Engine.VECTOR)
