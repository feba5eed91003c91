"""Output shapes of operators ONNX shape inference has no schema for (onnxruntime contrib ops).

ONNX Runtime's transformer optimiser fuses subgraphs into ``com.microsoft`` operators
(Attention, SkipLayerNormalization, FastGelu, ...) and a few ONNX-domain operators that the
onnx package does not define (SimplifiedLayerNormalization). ``onnx.shape_inference`` leaves
their outputs untyped, which would leave everything downstream unresolved. These rules, written
from the onnxruntime contrib-op documentation (docs/ContribOperators.md), give each output's
shape from the input shapes and attributes; the import then re-runs ONNX inference downstream.

One registry dict keyed by (domain, op_type): ``rule(attrs, inputs) -> outputs`` where
``inputs`` are concrete shapes (tuples of ints, None for an absent or unknown input) and the
result lists ``(shape, dtype)`` per output, None where the rule cannot tell (an optional output
it does not model). A rule may raise ``ContribShapeError`` when required inputs are missing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

MS = "com.microsoft"
ONNX = ""

Shape = tuple[int, ...]
OutSpec = tuple[Shape, str | None] | None  # dtype None = same dtype as input 0
Rule = Callable[[dict[str, Any], Sequence[Shape | None]], list[OutSpec]]

SHAPE_RULES: dict[tuple[str, str], Rule] = {}


class ContribShapeError(Exception):
    """The rule cannot give shapes for this node (missing input); the node stays unresolved."""


def shape_rule(domain: str, *op_types: str) -> Callable[[Rule], Rule]:
    """Register ``fn`` as the output-shape rule of each op type of ``domain``."""

    def deco(fn: Rule) -> Rule:
        for op_type in op_types:
            key = (domain, op_type)
            if key in SHAPE_RULES:
                raise RuntimeError(f"shape rule for {domain}::{op_type} registered twice")
            SHAPE_RULES[key] = fn
        return fn

    return deco


def _need(inputs: Sequence[Shape | None], i: int, what: str) -> Shape:
    shape = inputs[i] if i < len(inputs) else None
    if shape is None:
        raise ContribShapeError(f"input {i} ({what}) has no known shape")
    return shape


def _reduced_last(shape: Shape, axis: int = -1) -> Shape:
    """``shape`` with the normalised axes (``axis`` .. end) set to 1 (mean / inv_std outputs)."""
    axis = axis + len(shape) if axis < 0 else axis
    return (*shape[:axis], *(1 for _ in shape[axis:]))


@shape_rule(MS, "FastGelu", "BiasGelu", "Gelu", "QuickGelu", "BiasAdd", "RotaryEmbedding")
@shape_rule(MS, "BiasDropout", "Inverse")
# ONNX-domain ops whose schema (in the onnx versions we support) infers no output shape:
@shape_rule(ONNX, "GroupNormalization", "MeanVarianceNormalization")
def _same_as_input(attrs, inputs):
    """Y has X's shape (bias/skip inputs broadcast into X; normalisation keeps the shape)."""
    return [(_need(inputs, 0, "X"), None)]


@shape_rule(MS, "SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
def _skip_layer_norm(attrs, inputs):
    """output = input, mean and inv_std_var = input with the hidden axis 1, sum = input."""
    x = _need(inputs, 0, "input")
    stat = (_reduced_last(x), "float")
    return [(x, None), stat, stat, (x, None)]


@shape_rule(ONNX, "SimplifiedLayerNormalization")
@shape_rule(MS, "SimplifiedLayerNormalization")
def _simplified_layer_norm(attrs, inputs):
    """Y = X; inv_std_var has the normalised axes (``axis`` .. end, default -1) set to 1."""
    x = _need(inputs, 0, "X")
    return [(x, None), (_reduced_last(x, int(attrs.get("axis", -1))), "float")]


@shape_rule(MS, "Attention")
def _attention(attrs, inputs):
    """input [B, S, H], weights [H, Hq + Hk + Hv] -> output [B, S, Hv];
    Hv = qkv_hidden_sizes[2] if given else weights.shape[1] / 3.
    present [2, B, num_heads, P + S, Hk / num_heads] with P = past's sequence length."""
    x = _need(inputs, 0, "input")
    w = _need(inputs, 1, "weights")
    sizes = attrs.get("qkv_hidden_sizes")
    q_k_v = [int(s) for s in sizes] if sizes else [w[1] // 3] * 3
    out: list[OutSpec] = [((x[0], x[1], q_k_v[2]), None)]
    heads = int(attrs.get("num_heads", 0))
    past = inputs[4] if len(inputs) > 4 else None
    if heads > 0:
        past_len = past[3] if past is not None and len(past) == 5 else 0
        out.append(((2, x[0], heads, past_len + x[1], q_k_v[1] // heads), None))
    return out


@shape_rule(MS, "MultiHeadAttention")
def _multi_head_attention(attrs, inputs):
    """query [B, S, D] -> output [B, S, Dv]: Dv from value [B, L, Dv], or num_heads * head_size
    for packed key/value [B, L, N, 2, H], packed qkv [B, S, N, 3, H] or value [B, N, L, H]."""
    q = _need(inputs, 0, "query")
    k = inputs[1] if len(inputs) > 1 else None
    v = inputs[2] if len(inputs) > 2 else None
    if len(q) == 5:  # packed qkv
        return [((q[0], q[1], q[2] * q[4]), None)]
    if v is not None and len(v) == 3:
        return [((q[0], q[1], v[2]), None)]
    if v is not None and len(v) == 4:
        return [((q[0], q[1], v[1] * v[3]), None)]
    if k is not None and len(k) == 5:  # packed kv
        return [((q[0], q[1], k[2] * k[4]), None)]
    if v is None and k is None:
        return [((q[0], q[1], q[2]), None)]
    raise ContribShapeError("unrecognised query/key/value layout")


@shape_rule(MS, "GroupQueryAttention")
def _group_query_attention(attrs, inputs):
    """query [B, S, D] -> output [B, S, num_heads * head_size]; head_size = key.shape[2] /
    kv_num_heads, or D / (num_heads + 2 kv_num_heads) when query packs q, k and v."""
    q = _need(inputs, 0, "query")
    heads = int(attrs["num_heads"])
    kv_heads = int(attrs["kv_num_heads"])
    k = inputs[1] if len(inputs) > 1 else None
    head_size = k[2] // kv_heads if k is not None else q[2] // (heads + 2 * kv_heads)
    return [((q[0], q[1], heads * head_size), None)]


@shape_rule(MS, "EmbedLayerNormalization")
def _embed_layer_norm(attrs, inputs):
    """input_ids [B, S], word_embedding [V, H] -> output [B, S, H] (float), mask_index [B] (int32),
    embedding_sum [B, S, H]."""
    ids = _need(inputs, 0, "input_ids")
    word = _need(inputs, 2, "word_embedding")
    hidden = (ids[0], ids[1], word[1])
    return [(hidden, "float"), ((ids[0],), "int32"), (hidden, "float")]


@shape_rule(MS, "MatMulNBits")
def _matmul_nbits(attrs, inputs):
    """A [..., K], packed B -> Y [..., N] with N the attribute."""
    a = _need(inputs, 0, "A")
    return [((*a[:-1], int(attrs["N"])), None)]


def _broadcast(a: Shape, b: Shape) -> Shape:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + a
    b = (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise ContribShapeError(f"batch dims {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _matmul_shape(a: Shape, b: Shape, trans_a: bool = False, trans_b: bool = False) -> Shape:
    if len(a) < 2 or len(b) < 2:
        raise ContribShapeError("FusedMatMul needs inputs of rank >= 2")
    m = a[-1] if trans_a else a[-2]
    n = b[-2] if trans_b else b[-1]
    return (*_broadcast(a[:-2], b[:-2]), m, n)


@shape_rule(MS, "FusedMatMul")
def _fused_matmul(attrs, inputs):
    """MatMul of (optionally transposed) A and B with batch broadcasting."""
    a = _need(inputs, 0, "A")
    b = _need(inputs, 1, "B")
    trans = (bool(int(attrs.get("transA", 0))), bool(int(attrs.get("transB", 0))))
    return [(_matmul_shape(a, b, *trans), None)]


@shape_rule(MS, "GemmFastGelu")
def _gemm_fast_gelu(attrs, inputs):
    """FastGelu(X @ W + bias): X [..., K], W [K, N] -> [..., N]."""
    x = _need(inputs, 0, "X")
    w = _need(inputs, 1, "W")
    return [((*x[:-1], w[-1]), None)]


@shape_rule(MS, "BiasSplitGelu")
def _bias_split_gelu(attrs, inputs):
    """X [N, S, D] -> [N, S, D / 2]."""
    x = _need(inputs, 0, "X")
    return [((*x[:-1], x[-1] // 2), None)]
