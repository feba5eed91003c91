"""Activation memory a decoder LLM keeps for the backward, per micro-batch and rank.

Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
section 4) count, for a GPT block of hidden ``h``, ``a`` heads, ``s`` tokens, micro-batch
``b``, 16-bit activations and 1-byte dropout masks:

    attention  11 s b h + 5 a s^2 b    (QKV input 2, Q and K 4, V 2, O-projection input 2,
                                        output dropout mask 1; softmax output 2, dropout mask
                                        1 and dropout output 2 per score)
    MLP        19 s b h                (input 2, GeLU input 8, GeLU output 8, dropout mask 1)
    norms       4 s b h                (two LayerNorm inputs)
    total      s b h (34 + 5 a s / h)  bytes per layer

with tensor parallelism ``t``: ``s b h (10 + 24/t + 5 a s / (h t))`` (norms, their outputs
and the dropout masks replicated); with sequence parallelism too: everything ``/ t``.

``block_activation_bytes`` is that count written term by term for any ``LLMArch`` so it
reduces to the formula above for a GPT-3 block (multi-head attention, GeLU MLP of ``4h``,
LayerNorm, dropout, eager attention) and follows the architecture elsewhere:

* grouped-query attention: K and V are ``Hkv_r hd`` wide (``Hkv_r``: KV heads per rank);
* gated MLP (SwiGLU): the gate and up outputs ``2 f_r`` and the product ``f_r`` (``f_r``: MLP
  width per rank); a plain MLP: the activation's input and output ``f_r`` each;
* fused (flash) attention keeps no score matrix: the output and the softmax statistics
  (fp32, one per query and head) — the kernel recomputes the scores in its backward
  (Dao et al. 2022); eager attention keeps the softmax output ``b H_r s s_k`` (and, with
  dropout, the mask and the dropped probabilities);
* dropout (``dropout=True``): the 1-byte masks after attention, MLP and embedding and the
  attention-probability dropout; modern LLMs (Llama, Mistral, Qwen) pre-train without it;
* a parallel block (GPT-J, Falcon) has one norm whose output feeds both branches;
* MoE: the router's probabilities (fp32), the dispatched tokens (the experts' input), the
  experts' intermediates and outputs for the rank's token-expert pairs ``P``.

Embedding slot: the token ids (8 bytes each: the Gather's backward needs them) and, with
dropout, its mask. Head slot (Korthikanti 4.3): the final norm's input and the head's input
(``2 s b h / t_s`` each) and the fp32 logits of the cross-entropy (``4 s b V_r``).
``t_s`` = ``t`` with sequence parallelism, else 1. Recompute keeps a block's input only:
``2 s b h / t_s`` (``checkpoint_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.predictor.llm.kernels import attended_keys
from roofcast.predictor.sharding import LLMShard

#: bytes of a dropout mask element (PyTorch's bool mask).
MASK_BYTES = 1.0
#: bytes of the softmax statistics flash attention keeps, and of the cross-entropy logits.
FP32_BYTES = 4.0
#: bytes of a token id.
ID_BYTES = 8.0


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


def block_activation_bytes(arch: LLMArch, shard: LLMShard, case: ActivationCase) -> float:
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


def _mlp_bytes(arch: LLMArch, shard: LLMShard, case: ActivationCase, tokens: float) -> float:
    """The MLP's intermediates (dense: per token; MoE: router + per token-expert pair)."""
    e, h = case.elem_bytes, arch.d_model
    moe = arch.n_experts > 1
    f = shard.expert_d_ff if moe else shard.d_ff
    per = (3 * f) if arch.gated_mlp else (2 * f)
    if not moe:
        return e * tokens * per
    routed = tokens / shard.seq_split  # the router's input is the norm's output, counted
    return FP32_BYTES * routed * arch.n_experts + e * case.moe_pairs * (per + 2 * h)


def embedding_activation_bytes(arch: LLMArch, shard: LLMShard, case: ActivationCase) -> float:
    """Slot 0: token ids (+ the embedding dropout mask)."""
    tokens = float(case.batch * case.seq)
    mask = MASK_BYTES * tokens * arch.d_model / shard.seq_split if case.dropout else 0.0
    return ID_BYTES * tokens + mask


def head_activation_bytes(arch: LLMArch, shard: LLMShard, case: ActivationCase) -> float:
    """Slot L+1: final norm input, head input, fp32 logits (Korthikanti 4.3)."""
    tokens = float(case.batch * case.seq)
    return (2 * case.elem_bytes * tokens * arch.d_model / shard.seq_split
            + FP32_BYTES * tokens * shard.vocab)


def checkpoint_bytes_per_block(arch: LLMArch, shard: LLMShard, case: ActivationCase) -> float:
    """What full recomputation keeps of a block: its input ``e s b h / t_s``."""
    return case.elem_bytes * case.batch * case.seq * arch.d_model / shard.seq_split


def slot_activation_bytes(arch: LLMArch, shard: LLMShard,
                          case: ActivationCase) -> tuple[np.ndarray, np.ndarray]:
    """(activation_bytes, checkpoint_bytes) per slot 0..L+1; recompute keeps the embedding
    and head slots whole (Megatron recomputes transformer layers only)."""
    act = np.full(arch.n_layers + 2, block_activation_bytes(arch, shard, case))
    act[0] = embedding_activation_bytes(arch, shard, case)
    act[-1] = head_activation_bytes(arch, shard, case)
    ckpt = np.full_like(act, checkpoint_bytes_per_block(arch, shard, case))
    ckpt[0], ckpt[-1] = act[0], act[-1]
    return act, ckpt
