"""Activation bytes of a decoder LLM: the peak of a serving prefill, the working set of a
forward per slot on one tensor-parallel rank, and what a training block keeps for its backward.

Prefill peak: ``T (2 d + max(q + 2 kv, up)) e`` for ``T`` prompt tokens (residual stream, its
normed copy, the widest intermediate of any layer kind; ``up = (1 + gated) d_ff k`` with ``k``
experts per token, shared ones included)
+ fp32 logits of the last tokens ``b V 4`` (+ eager attention's scores ``b H N N e``).
Training (Korthikanti et al. 2022 §4, term by term for any architecture): per block the norm
inputs, Q, K, V, O input, the MLP's intermediates (MoE: router probabilities and the rank's
token-expert pairs), the attention's scores (eager) or softmax statistics (fused), dropout
masks; embedding slot: token ids; head slot: final norm and head inputs + fp32 logits.
Recompute keeps a block's input only. Full derivation: docs/design/memory.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.decoder import LayerKind
from roofcast.predictor.llm.kernels import attended_keys

#: bytes of a dropout mask element (PyTorch's bool mask).
MASK_BYTES = 1.0
#: bytes of an fp32 element: logits, softmax statistics, router probabilities.
FP32_BYTES = 4.0
#: bytes of a token id.
ID_BYTES = 8.0


def prefill_activation_bytes(arch: LLMArch, *, batch: int, prompt_tokens: int,
                             elem_bytes: float, max_prefill_tokens: int = 0,
                             eager: bool = False) -> float:
    """Peak activation bytes of a prefill pass of ``batch`` prompts (module docstring);
    ``max_prefill_tokens`` (0: none) caps the tokens of one pass (chunked prefill)."""
    a = arch
    tokens = batch * int(prompt_tokens)
    if max_prefill_tokens:
        tokens = min(tokens, max_prefill_tokens)
    widest = max(_widest(k) for k in dict.fromkeys(a.kinds))
    total = tokens * (2 * a.d_model + widest) * elem_bytes + batch * a.vocab * FP32_BYTES
    if eager:
        n = int(prompt_tokens)
        total += batch * a.n_heads * n * n * elem_bytes
    return float(total)


def _widest(kind: LayerKind) -> int:
    """The widest intermediate of one layer per token: QKV (MLA: its decompressed K and V,
    ``H (n + v)``) or the MLP's up projection over ``top_k + n_shared`` experts."""
    a, m, moe = kind.attention, kind.mlp, kind.moe
    lat = a.latent
    qkv = a.q_dim + (lat.kv_lora_rank + a.n_heads * (lat.qk_nope_head_dim + lat.v_head_dim)
                     if lat else 2 * a.kv_dim)
    return max(qkv, m.up_width * (1 if moe is None else moe.top_k + moe.n_shared))


class RankDims(Protocol):
    """What one tensor/expert-parallel rank computes of a decoder: query and KV heads, the
    dense MLP's and an expert's width, vocabulary rows, and how many ways the token stream is
    split (sequence parallelism)."""

    heads: int
    kv_heads: int
    d_ff: int
    expert_d_ff: int
    vocab: int

    @property
    def seq_split(self) -> int: ...


@dataclass(frozen=True)
class ActivationCase:
    """A micro-batch of ``batch`` sequences of ``seq`` tokens at ``elem_bytes`` per
    activation element; ``attention`` ``fused`` or ``eager``; ``dropout`` on or off;
    ``moe_pairs``: token-expert pairs one rank's experts run (MoE only)."""

    batch: int
    seq: int
    elem_bytes: float
    attention: str
    dropout: bool = False
    moe_pairs: float = 0.0


def block_activation_bytes(arch: LLMArch, shard: RankDims, case: ActivationCase) -> float:
    """Bytes one block keeps for its backward on one rank (module docstring)."""
    e, hd, h = case.elem_bytes, arch.head_dim, arch.d_model
    tokens = float(case.batch * case.seq)
    split = shard.seq_split
    mask = MASK_BYTES if case.dropout else 0.0
    replicated = tokens * h / split
    norms = (1 if arch.parallel_block else 2)
    q_r, kv_r = shard.heads * hd, shard.kv_heads * hd
    span, _ = attended_keys(case.seq, case.seq, arch.sliding_window)
    # norm inputs, the attention's input (its norm's output), Q, K, V, the O-projection input
    total = norms * e * replicated + e * replicated + e * tokens * (q_r + 2 * kv_r + q_r)
    total += mask * replicated  # dropout after the O projection
    if case.attention == "eager":
        scores = float(case.batch * shard.heads * case.seq * span)
        total += e * scores + (mask + e) * scores * bool(case.dropout)
    else:
        total += FP32_BYTES * case.batch * shard.heads * case.seq
    total += (0.0 if arch.parallel_block else e * replicated) + mask * replicated
    return total + _mlp_bytes(arch, shard, case, tokens)


def _mlp_bytes(arch: LLMArch, shard: RankDims, case: ActivationCase, tokens: float) -> float:
    """The MLP's intermediates (dense: per token; MoE: router + per token-expert pair)."""
    e, h = case.elem_bytes, arch.d_model
    moe = arch.n_experts > 1
    f = shard.expert_d_ff if moe else shard.d_ff
    per = (3 * f) if arch.gated_mlp else (2 * f)
    if not moe:
        return e * tokens * per
    routed = tokens / shard.seq_split  # the router's input is the norm's output, counted
    return FP32_BYTES * routed * arch.n_experts + e * case.moe_pairs * (per + 2 * h)


def embedding_activation_bytes(arch: LLMArch, shard: RankDims, case: ActivationCase) -> float:
    """Slot 0: token ids (+ the embedding dropout mask)."""
    tokens = float(case.batch * case.seq)
    mask = MASK_BYTES * tokens * arch.d_model / shard.seq_split if case.dropout else 0.0
    return ID_BYTES * tokens + mask


def head_activation_bytes(arch: LLMArch, shard: RankDims, case: ActivationCase) -> float:
    """Slot L+1: final norm input, head input, fp32 logits (Korthikanti 4.3)."""
    tokens = float(case.batch * case.seq)
    return (2 * case.elem_bytes * tokens * arch.d_model / shard.seq_split
            + FP32_BYTES * tokens * shard.vocab)


def checkpoint_bytes_per_block(arch: LLMArch, shard: RankDims, case: ActivationCase) -> float:
    """What full recomputation keeps of a block: its input ``e s b h / t_s``."""
    return case.elem_bytes * case.batch * case.seq * arch.d_model / shard.seq_split


def forward_slot_bytes(arch: LLMArch, shard: RankDims, case: ActivationCase) -> np.ndarray:
    """Per slot 0..L+1 the working set of a forward pass on one rank (nothing kept for a
    backward), counted as the prefill peak counts a layer: a block's residual stream and its
    normed copy + its widest intermediate (QKV, or the MLP's up projection over the rank's
    tokens or token-expert pairs) + eager attention's scores; the embedding's ids and output;
    the head's input and the fp32 logits of every token."""
    e = case.elem_bytes
    tokens = float(case.batch * case.seq)
    stream = tokens * arch.d_model / shard.seq_split
    qkv = tokens * (shard.heads + 2 * shard.kv_heads) * arch.head_dim
    gated = 2 if arch.gated_mlp else 1
    up = (gated * shard.expert_d_ff * case.moe_pairs if arch.n_experts > 1
          else gated * shard.d_ff * tokens)
    block = e * (2 * stream + max(qkv, up))
    if case.attention == "eager":
        span, _ = attended_keys(case.seq, case.seq, arch.sliding_window)
        block += e * case.batch * shard.heads * case.seq * span
    act = np.full(arch.n_layers + 2, block)
    act[0] = ID_BYTES * tokens + e * stream
    act[-1] = e * stream + FP32_BYTES * tokens * shard.vocab
    return act


def slot_activation_bytes(arch: LLMArch, shard: RankDims,
                          case: ActivationCase) -> tuple[np.ndarray, np.ndarray]:
    """(activation_bytes, checkpoint_bytes) per slot 0..L+1; recompute keeps the embedding
    and head slots whole (Megatron recomputes transformer layers only)."""
    act = np.full(arch.n_layers + 2, block_activation_bytes(arch, shard, case))
    act[0] = embedding_activation_bytes(arch, shard, case)
    act[-1] = head_activation_bytes(arch, shard, case)
    ckpt = np.full_like(act, checkpoint_bytes_per_block(arch, shard, case))
    ckpt[0], ckpt[-1] = act[0], act[-1]
    return act, ckpt
