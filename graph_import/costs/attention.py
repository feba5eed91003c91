"""Attention ops: ONNX Attention (opset 23/24), com.microsoft Attention, MultiHeadAttention,
GroupQueryAttention, RotaryEmbedding. Engine: MATRIX.

Scaled dot-product attention of a query block (B batch, S query positions, H heads) against
T key positions (past + new), with ``numel(Q)`` = B·S·H·d_qk and ``numel(O)`` = B·S·H·d_v:

    QKᵀ: 2 · numel(Q) · T      AV: 2 · numel(O) · T      (1 MAC = 2 FLOPs)
    per score (B·H·S·T scores): scale 1 + softmax 5 (+1 per additive mask/bias input,
    +3 for softcap: divide, tanh, multiply)

The full S×T score rectangle is counted even for causal attention (what a non-flash kernel
computes). Projections are counted only where the op includes them (com.microsoft Attention:
``2·B·S·D_in·(D_q + D_k + D_v)`` + bias adds). Bytes: the op's own inputs and outputs (the
op is a fused kernel; the score matrix is not counted as memory traffic).
"""

from __future__ import annotations

from roofcast.graph_import.costs._common import (
    CostRuleError,
    attr_float,
    attr_int,
    attr_ints,
    const_value,
    io_cost,
    need_input,
    need_output,
)
from roofcast.graph_import.costs.registry import MS_DOMAIN, register
from roofcast.graph_import.costs.softmax import SOFTMAX_FLOPS_PER_ELEMENT
from roofcast.graph_import.types import Engine, OpCost, OpNode, TensorInfo

SCALE_FLOPS_PER_SCORE = 1
SOFTCAP_FLOPS_PER_SCORE = 3
#: Rotary embedding per rotated element: x·cos + rotate(x)·sin -> mul, mul, add.
ROTARY_FLOPS_PER_ELEMENT = 3


def _sdpa_flops(q_numel: int, out_numel: int, scores: int, keys: int, per_score: int) -> int:
    """FLOPs of QKᵀ, AV and the per-score elementwise work (scale + softmax + extras)."""
    per_score_total = SCALE_FLOPS_PER_SCORE + SOFTMAX_FLOPS_PER_ELEMENT + per_score
    return 2 * q_numel * keys + 2 * out_numel * keys + per_score_total * scores


def _heads(node: OpNode, attr: str) -> int:
    heads = attr_int(node, attr, 0)
    if heads <= 0:
        raise CostRuleError(f"{node.op_type} node {node.name!r}: attribute {attr} must be > 0")
    return heads


def _softcap(node: OpNode) -> int:
    return SOFTCAP_FLOPS_PER_SCORE if attr_float(node, "softcap", 0.0) > 0 else 0


@register("Attention", family="attention", backward="whole_layer")
def cost_Attention(node: OpNode) -> OpCost:
    """ONNX Attention(Q, K, V, attn_mask?, past_key?, past_value?): Q/K/V 4-D [B, heads, L, d]
    or 3-D [B, L, heads·d] (heads from q_num_heads); T = K's sequence length + past length.
    ``2·numel(Q)·T + 2·numel(Y)·T + (6 + [mask] + [softcap 3])·B·H·S·T``."""
    q = need_input(node, 0, "Q")
    k = need_input(node, 1, "K")
    need_input(node, 2, "V")
    y = need_output(node, 0)
    if len(q.shape) == 4:
        batch, heads, seq = q.shape[0], q.shape[1], q.shape[2]
    elif len(q.shape) == 3:
        batch, seq, heads = q.shape[0], q.shape[1], _heads(node, "q_num_heads")
    else:
        raise CostRuleError(f"Attention node {node.name!r}: Q must be 3-D or 4-D, got {q.shape}")
    keys = k.shape[2] if len(k.shape) == 4 else k.shape[1]
    past = node.input(4)
    keys += past.shape[2] if past is not None and len(past.shape) == 4 else 0
    extra = (node.input(3) is not None) + _softcap(node)
    flops = _sdpa_flops(q.numel, y.numel, batch * heads * seq * keys, keys, extra)
    return io_cost(node, flops, Engine.MATRIX)


def _past_length(node: OpNode, past: TensorInfo | None, axis: int, length_input: int) -> int:
    """Past sequence length: the value of input ``length_input`` when known, else the past
    tensor's length along ``axis``."""
    known = const_value(node, length_input)
    if known is not None:
        return int(known.reshape(-1)[0])
    return past.shape[axis] if past is not None else 0


@register("Attention", domain=MS_DOMAIN, family="attention", backward="whole_layer")
def cost_ms_Attention(node: OpNode) -> OpCost:
    """com.microsoft Attention(input[B, S, D_in], weights[D_in, D_q+D_k+D_v], bias?, mask_index?,
    past?[2, B, H, P, d], attention_bias?): QKV projection ``2·B·S·D_in·(D_q+D_k+D_v)`` (+ bias
    adds ``B·S·(D_q+D_k+D_v)``), then attention over T = P + S keys:
    ``2·B·S·T·D_q + 2·B·S·T·D_v + (6 + [mask] + [attention_bias])·B·H·S·T``."""
    x = need_input(node, 0, "input")
    w = need_input(node, 1, "weights")
    need_output(node, 0)
    if len(x.shape) != 3 or len(w.shape) != 2:
        raise CostRuleError(
            f"Attention node {node.name!r}: expected input [B, S, D] and weights [D, 3D], got "
            f"{x.shape} and {w.shape}"
        )
    heads = _heads(node, "num_heads")
    batch, seq, d_in = x.shape
    total = w.shape[1]
    sizes = attr_ints(node, "qkv_hidden_sizes") or (total // 3,) * 3
    d_q, _d_k, d_v = sizes
    past = node.input(4)
    keys = seq + _past_length(node, past, 3, 6)
    flops = 2 * batch * seq * d_in * total
    if node.input(2) is not None:
        flops += batch * seq * total
    extra = (node.input(3) is not None) + (node.input(5) is not None)
    flops += _sdpa_flops(
        batch * seq * d_q, batch * seq * d_v, batch * heads * seq * keys, keys, extra
    )
    return io_cost(node, flops, Engine.MATRIX)


@register("MultiHeadAttention", domain=MS_DOMAIN, family="attention",
          backward="whole_layer")
def cost_MultiHeadAttention(node: OpNode) -> OpCost:
    """com.microsoft MultiHeadAttention(query, key?, value?, bias?, key_padding_mask?,
    attention_bias?, past_key?, past_value?, ...): no projections. query [B, S, D] or packed
    QKV [B, S, H, 3, d]; key [B, L, D], [B, H, L, d] or packed KV [B, L, H, 2, d]. T = L + past.
    ``2·B·S·T·D_q + 2·numel(output)·T + (6 + masks)·B·H·S·T`` + bias adds ``B·S·numel(bias)``
    (exact for self-attention; L ≠ S cross-attention bias adds are approximated by S)."""
    q = need_input(node, 0, "query")
    y = need_output(node, 0)
    heads = _heads(node, "num_heads")
    batch, seq = q.shape[0], q.shape[1]
    q_numel = batch * seq * (q.shape[2] * q.shape[4] if len(q.shape) == 5 else q.shape[-1])
    key = node.input(1)
    present_key = node.outputs[1] if len(node.outputs) > 1 else None
    if present_key is not None and len(present_key.shape) == 4:
        keys = present_key.shape[2]
    elif key is None:
        keys = seq  # packed QKV
    else:
        keys = key.shape[2] if len(key.shape) == 4 else key.shape[1]
        past = node.input(6)
        if len(key.shape) == 3 and past is not None:
            keys += past.shape[2]
    flops = _sdpa_flops(q_numel, y.numel, batch * heads * seq * keys, keys,
                        (node.input(4) is not None) + (node.input(5) is not None))
    bias = node.input(3)
    if bias is not None:
        flops += batch * seq * bias.numel
    return io_cost(node, flops, Engine.MATRIX)


@register("GroupQueryAttention", domain=MS_DOMAIN, family="attention",
          backward="whole_layer")
def cost_GroupQueryAttention(node: OpNode) -> OpCost:
    """com.microsoft GroupQueryAttention(query, key?, value?, past_key?, past_value?, seqlens_k,
    total_sequence_length, cos_cache?, sin_cache?, ...): H = num_heads query heads share
    kv_num_heads KV heads; T = total_sequence_length (when known) else present_key's length.
    ``2·B·S·H·d·T·2 + (6 + [softcap 3])·B·H·S·T`` + rotary ``3·B·S·(H + H_kv)·d`` when
    do_rotary. Causal masking is not subtracted (full S×T counted)."""
    q = need_input(node, 0, "query")
    y = need_output(node, 0)
    heads = _heads(node, "num_heads")
    kv_heads = _heads(node, "kv_num_heads")
    batch, seq = q.shape[0], q.shape[1]
    head_size = y.shape[-1] // heads
    total = const_value(node, 6)
    present_key = node.outputs[1] if len(node.outputs) > 1 else None
    if total is not None:
        keys = int(total.reshape(-1)[0])
    elif present_key is not None and len(present_key.shape) == 4:
        keys = present_key.shape[2]
    else:
        raise CostRuleError(
            f"GroupQueryAttention node {node.name!r}: total_sequence_length is unknown; bind "
            "the sequence dims so it becomes a constant"
        )
    q_numel = batch * seq * heads * head_size
    flops = _sdpa_flops(q_numel, y.numel, batch * heads * seq * keys, keys, _softcap(node))
    if attr_int(node, "do_rotary", 0):
        flops += ROTARY_FLOPS_PER_ELEMENT * batch * seq * (heads + kv_heads) * head_size
    return io_cost(node, flops, Engine.MATRIX)


# costed beside the attention ops, but an elementwise rotation (a few FLOPs per element, no
# matmul): family and backward are elementwise
@register("RotaryEmbedding", family="elementwise", backward="elementwise")
@register("RotaryEmbedding", domain=MS_DOMAIN, family="elementwise", backward="elementwise")
def cost_RotaryEmbedding(node: OpNode) -> OpCost:
    """RotaryEmbedding (ONNX opset 23 and com.microsoft): 3 FLOPs per rotated element
    (x·cos + rotate(x)·sin); with rotary_embedding_dim r < head size d only r/d of the
    elements rotate (the rest are copied). VECTOR."""
    x = need_input(node, 0, "X")
    y = need_output(node, 0)
    rot = attr_int(node, "rotary_embedding_dim", 0)
    if len(x.shape) == 4:
        head_size = x.shape[-1]
    else:
        heads = attr_int(node, "num_heads", 0)
        head_size = x.shape[-1] // heads if heads > 0 else x.shape[-1]
    fraction = rot / head_size if 0 < rot < head_size else 1.0
    return io_cost(node, ROTARY_FLOPS_PER_ELEMENT * y.numel * fraction, Engine.VECTOR)
