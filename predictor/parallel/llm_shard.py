"""What one rank of a Megatron-LM tensor / expert-parallel group holds of a decoder LLM.

Tensor parallelism of degree ``t`` (Shoeybi et al. 2019; Narayanan et al. 2021):

* attention: the QKV projection is column-parallel by heads — ``H / t`` query heads per rank
  (``t`` must divide ``H``); KV heads are split while ``Hkv >= t`` (``t`` must then divide
  ``Hkv``), else every rank keeps the one KV head its query heads share (``Hkv`` must divide
  ``t``; the KV projection is replicated ``t / Hkv`` times, as Megatron-LM's GQA does); the
  O projection is row-parallel;
* MLP: gate/up column-parallel, down row-parallel: ``d_ff / t`` per rank (``t`` divides
  ``d_ff``);
* vocabulary: the embedding and the LM head are vocab-parallel over the vocabulary padded to a
  multiple of ``128 t`` (Megatron-LM's ``make_vocab_size_divisible_by`` = 128):
  ``V_rank = ceil(V / (128 t)) * 128``;
* norms, router and the row-parallel biases are replicated (their gradients are all-reduced
  in the tensor group; with sequence parallelism they see ``1/t`` of the tokens).

Mixture of experts (Megatron-Core): ``ep = 1``: every rank keeps all ``E`` experts, each
tensor-split like the dense MLP (``d_ff / t``); ``ep > 1``: each rank keeps ``E / ep`` whole
experts (expert tensor parallelism 1); ``ep`` must divide ``E``, and with ``t > 1`` sequence
parallelism is required (Megatron-Core's ``ModelParallelConfig``: "When using expert
parallelism and tensor parallelism, sequence parallelism must be used").

Parameters per slot (``slot_params``): slot 0 the token embedding (+ learned positions,
replicated); slots 1..L one block each; slot L+1 the final norm and the LM head (nothing for
the head when embeddings are tied: its weight is the embedding's, counted in slot 0).
At ``t = ep = 1`` the slots sum to ``LLMArch.params`` less the vocabulary padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.predictor.parallel.types import ParallelPlanError

#: Megatron-LM pads the vocabulary to a multiple of this times the tensor-parallel degree.
VOCAB_DIVISIBLE_BY = 128


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order."""
    return [d for d in range(1, n + 1) if n % d == 0]


def _refuse(name: str, degree: int, count: int, what: str, arch: LLMArch) -> None:
    """``ParallelPlanError``: ``name=degree`` does not divide ``count`` ``what``; the message
    lists the degrees that do."""
    choices = [str(c) for c in divisors(count)]
    tail = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
    raise ParallelPlanError(f"{name}={degree} does not divide the {count} {what} of "
                            f"{arch.name}; use {tail}")


@dataclass(frozen=True)
class LLMShard:
    """Per-rank dims of one tensor / expert-parallel rank (module docstring).

    heads / kv_heads: query and KV heads a rank computes; d_ff: the dense MLP's width (and an
    expert's at ``ep = 1``) per rank; vocab: vocabulary rows per rank (padded); experts:
    experts a rank keeps; expert_d_ff: an expert's width on its rank; tp, ep,
    sequence_parallel: the degrees it was cut for.
    """

    tp: int
    ep: int
    sequence_parallel: bool
    heads: int
    kv_heads: int
    d_ff: int
    vocab: int
    experts: int
    expert_d_ff: int

    @property
    def seq_split(self) -> int:
        """How many ways the norms / residuals / boundaries split the tokens (``t`` with
        sequence parallelism, else 1)."""
        return self.tp if self.sequence_parallel else 1


def llm_shard(arch: LLMArch, *, tp: int, ep: int, sequence_parallel: bool) -> LLMShard:
    """The rank's dims, or ``ParallelPlanError`` naming the degree that cannot split ``arch``."""
    for name, v in (("tp", tp), ("ep", ep)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ParallelPlanError(f"{name} must be a positive integer, got {v!r}")
    if arch.n_heads % tp:
        _refuse("tp", tp, arch.n_heads, "attention heads", arch)
    if arch.n_kv_heads >= tp and arch.n_kv_heads % tp:
        _refuse("tp", tp, arch.n_kv_heads, "KV heads", arch)
    if arch.n_kv_heads < tp and tp % arch.n_kv_heads:
        raise ParallelPlanError(f"tp={tp} is not a multiple of the {arch.n_kv_heads} KV heads of "
                                f"{arch.name} (fewer KV heads than ranks are replicated, so tp "
                                "must be a multiple of them)")
    if arch.d_ff % tp:
        _refuse("tp", tp, arch.d_ff, "MLP channels (d_ff)", arch)
    moe = arch.n_experts > 1
    if ep > 1 and not moe:
        raise ParallelPlanError(f"ep={ep} needs a mixture-of-experts model; {arch.name} is dense "
                                "(use ep=1)")
    if moe and arch.n_experts % ep:
        _refuse("ep", ep, arch.n_experts, "experts", arch)
    if ep > 1 and tp > 1 and not sequence_parallel:
        raise ParallelPlanError(f"ep={ep} with tp={tp} needs sequence parallelism (Megatron-Core "
                                "requires it when expert and tensor parallelism combine); turn "
                                "sequence_parallel on or use tp=1")
    unit = VOCAB_DIVISIBLE_BY * tp
    vocab = math.ceil(arch.vocab / unit) * VOCAB_DIVISIBLE_BY
    return LLMShard(
        tp=int(tp), ep=int(ep), sequence_parallel=bool(sequence_parallel and tp > 1),
        heads=arch.n_heads // tp, kv_heads=max(arch.n_kv_heads // tp, 1),
        d_ff=arch.d_ff // tp, vocab=vocab,
        experts=arch.n_experts // ep if moe else 1,
        expert_d_ff=arch.d_ff if ep > 1 else arch.d_ff // tp,
    )


def block_params(arch: LLMArch, shard: LLMShard) -> float:
    """Parameter elements of one block on one rank: norms (replicated), attention
    (``d (H_r + 2 Hkv_r) hd`` QKV + its bias, ``H_r hd d`` O), MLP or experts (+ router)."""
    hd, d = arch.head_dim, arch.d_model
    norms = (1 if arch.parallel_block else 2) * d * (2 if arch.norm == "layernorm" else 1)
    qkv_n = (shard.heads + 2 * shard.kv_heads) * hd
    attn = d * qkv_n + shard.heads * hd * d + (qkv_n if arch.qkv_bias else 0)
    return float(norms + attn + mlp_params(arch, shard))


def mlp_params(arch: LLMArch, shard: LLMShard) -> float:
    """The MLP's (dense) or the experts' + router's (MoE) parameter elements on one rank:
    ``mats d f_r`` (+ column biases ``(mats - 1) f_r`` and the replicated row bias ``d``)."""
    d = arch.d_model
    mats = 3 if arch.gated_mlp else 2
    moe = arch.n_experts > 1
    f = shard.expert_d_ff if moe else shard.d_ff
    one = mats * d * f + (((mats - 1) * f + d) if arch.mlp_bias else 0)
    if not moe:
        return float(one)
    return float(shard.experts * one + d * arch.n_experts)


def slot_params(arch: LLMArch, shard: LLMShard) -> np.ndarray:
    """Parameter elements per slot 0..L+1 on one rank (module docstring)."""
    d = arch.d_model
    out = np.full(arch.n_layers + 2, block_params(arch, shard))
    pos = arch.max_context * d if arch.positions == "learned" else 0
    out[0] = shard.vocab * d + pos
    final_norm = d * (2 if arch.norm == "layernorm" else 1)
    out[-1] = final_norm + (0 if arch.tied_embeddings else shard.vocab * d)
    return out
