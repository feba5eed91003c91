"""``LLMParallelSource``: a decoder LLM's training (or forward) work on one device under a
Megatron-LM tensor / sequence / expert-parallel split, from its ``LLMArch``.

Per rank: the kernels of ``llm_block`` (one costed block per layer kind of ``decoder_of``,
its rows repeated for the kind's slots: slot 0 embedding, 1..L layers, L+1 head), the tensor /
expert group's collectives per micro-batch (``comm_ops``: 2 all-reduces per block and phase,
or with sequence parallelism all-gather + reduce-scatter pairs; MoE with ``ep > 1`` 2
all-to-alls of ``2 P d`` bytes per phase; the embedding's and the vocab-parallel
cross-entropy's), parameters per slot (``sharding.slot_params``), activation memory
(``memory.decoder_activations``) and the pipeline boundary ``2 T d / t_s`` bytes. Cached per
(tp, ep, micro_batch, sequence_parallel, mode). Design notes: docs/design/decoder.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property

import numpy as np
import pandas as pd

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.decoder import decoder_of
from roofcast.graph_import.llm.load import load_llm
from roofcast.predictor.config import RunConfig
from roofcast.predictor.memory.decoder_activations import (
    ActivationCase,
    forward_slot_bytes,
    slot_activation_bytes,
)
from roofcast.predictor.parallel.llm_block import (
    WEIGHT,
    Micro,
    block_nodes,
    embedding_nodes,
    head_nodes,
    moe_pairs,
    part_rows,
)
from roofcast.predictor.parallel.types import (
    PARALLEL_MODES,
    CommOp,
    ModelFacts,
    ParallelPlanError,
    ShardedWorkload,
)
from roofcast.predictor.precision import storage_bytes
from roofcast.predictor.runtimes import get_runtime
from roofcast.predictor.sharding import LLMShard, llm_shard, slot_params
from roofcast.predictor.workload import check_precision
from roofcast.predictor.workload_rows import COLUMNS, frame

#: bytes of an fp32 element (the cross-entropy's all-reduced statistics).
_FP32 = 4.0
#: the cross-entropy's all-reduces per micro-batch (Megatron's vocab_parallel_cross_entropy:
#: logits max, predicted logit, sum of exponentials).
CROSS_ENTROPY_ALL_REDUCES = 3
#: Megatron-LM accumulates and all-reduces bf16 gradients in fp32 (``arguments.py`` turns
#: ``accumulate_allreduce_grads_in_fp32`` on for ``--bf16``): bytes per reduced element.
MEGATRON_BF16_GRAD_BYTES = 4.0
#: the runtime LLM training plans model when none is named: Megatron-LM with Transformer
#: Engine (flash attention), the framework the plans' placement and schedule follow.
TRAINING_RUNTIME = "megatron-lm"


class LLMParallelSource:
    """``ParallelSource`` of a decoder LLM's training (module docstring).

    arch: the model (an ``LLMArch``, or a name / config path / ONNX decoder for
    ``graph_import.llm.load.load_llm``); seq_tokens: tokens per sample; precision: the run's
    compute and activation precision (``bf16`` mixed precision by default); runtime: the execution
    profile's name (None: ``megatron-lm``, ``TRAINING_RUNTIME``: the framework such plans
    run on, with flash attention) — its ``attention`` (``fused`` / ``eager``)
    decides the attention kernels and what they keep; optimizer: ``adam`` or
    ``sgd_momentum``; dropout: Megatron GPT-style dropout (masks kept, ``Mul`` kernels);
    modern LLMs pre-train without it.
    """

    def __init__(self, arch: LLMArch | str, *, seq_tokens: int, precision: str = "bf16",
                 runtime: str | None = None, optimizer: str = "adam",
                 dropout: bool = False) -> None:
        if not isinstance(arch, LLMArch):
            arch = load_llm(arch)
        if isinstance(seq_tokens, bool) or not isinstance(seq_tokens, int | np.integer) \
                or seq_tokens < 1:
            raise ParallelPlanError(f"seq_tokens must be a positive integer, got {seq_tokens!r}")
        if seq_tokens > arch.max_context:
            raise ParallelPlanError(f"seq_tokens={seq_tokens} exceeds the {arch.max_context}-token "
                                    f"context of {arch.name}")
        self.arch = arch
        self.seq_tokens = int(seq_tokens)
        self.profile = get_runtime(runtime or TRAINING_RUNTIME)
        check_precision(self.profile, precision)
        self.config = RunConfig(precision=precision, mode="train", optimizer=optimizer,
                                runtime=self.profile.name)
        if not isinstance(dropout, bool):
            raise ParallelPlanError(f"dropout must be true or false, got {dropout!r}")
        self.dropout = dropout
        self._cache: dict[tuple, ShardedWorkload] = {}

    @cached_property
    def facts(self) -> ModelFacts:
        a = self.arch
        return ModelFacts(name=a.name, layers=a.n_layers, heads=a.n_heads,
                          kv_heads=a.n_kv_heads,
                          experts=a.n_experts if a.n_experts > 1 else None, hidden=a.d_model,
                          seq_tokens=self.seq_tokens)

    def micro(self, micro_batch: int) -> Micro:
        """The micro-batch of ``micro_batch`` sequences as this source's runtime runs it."""
        if isinstance(micro_batch, bool) or not isinstance(micro_batch, int | np.integer) \
                or micro_batch < 1:
            raise ParallelPlanError(f"micro_batch must be a positive integer, got {micro_batch!r}")
        return Micro(int(micro_batch), self.seq_tokens, self.profile.attention,
                     self.profile.attention_score_passes, self.dropout)

    def build(self, *, tp: int, ep: int, micro_batch: int, sequence_parallel: bool,
              mode: str) -> ShardedWorkload:
        """One device's work for one micro-batch (module docstring); cached."""
        if mode not in PARALLEL_MODES:
            raise ParallelPlanError(f"mode must be one of {', '.join(PARALLEL_MODES)}, got "
                                    f"{mode!r}")
        key = (tp, ep, micro_batch, bool(sequence_parallel), mode)
        if key not in self._cache:
            self._cache[key] = self._build(*key)
        return self._cache[key]

    def _build(self, tp: int, ep: int, micro_batch: int, sp: bool, mode: str
               ) -> ShardedWorkload:
        arch = self.arch
        shard = llm_shard(arch, tp=tp, ep=ep, sequence_parallel=sp)
        micro = self.micro(micro_batch)
        config = replace(self.config, mode=mode,
                         dims={"batch": micro.batch, "seq": micro.seq})
        tied = frozenset({f"{WEIGHT}embed"}) if arch.tied_embeddings else frozenset()
        dec = decoder_of(arch)
        blocks = {kind: part_rows(block_nodes(kind, arch, shard, micro), config)
                  for kind, _ in dec.groups()}
        rows = slot_rows(part_rows(embedding_nodes(arch, shard, micro), config),
                         [blocks[kind] for kind in dec.layers],
                         part_rows(head_nodes(arch, shard, micro), config, skip_params=tied))
        e = float(storage_bytes(self.config.precision))
        case = ActivationCase(micro.batch, micro.seq, e, micro.attention, micro.dropout,
                              moe_pairs(arch, shard, micro) if arch.n_experts > 1 else 0.0)
        act, ckpt = slot_activation_bytes(arch, shard, case)
        if mode != "train":  # a forward only: its working set, nothing kept for a backward
            act, ckpt = forward_slot_bytes(arch, shard, case), np.zeros_like(ckpt)
        tokens = float(micro.tokens)
        return ShardedWorkload(
            rows=rows, comms=tuple(comm_ops(arch, shard, tokens, e, mode, micro)),
            param_elems=slot_params(arch, shard), activation_bytes=act,
            checkpoint_bytes=ckpt, boundary_bytes=e * tokens * arch.d_model / shard.seq_split,
            config=config, runtime=self.profile.name, notes=self._notes(shard, mode),
            grad_reduce_bytes=self._grad_reduce_bytes())

    def _grad_reduce_bytes(self) -> float | None:
        """fp32 gradient reduction of bf16 runs on Megatron-LM, else None (storage width)."""
        megatron = self.profile.name == TRAINING_RUNTIME and self.config.precision == "bf16"
        return MEGATRON_BF16_GRAD_BYTES if megatron else None

    def _notes(self, shard: LLMShard, mode: str) -> tuple[str, ...]:
        notes = [*self.arch.notes, f"Megatron-LM split of {self.arch.name}: {shard.heads} query / "
                 f"{shard.kv_heads} KV heads, MLP width {shard.d_ff}, vocabulary "
                 f"{shard.vocab} per rank (padded to a multiple of 128 x tp); one block costed "
                 f"and repeated for its {self.arch.n_layers} slots",
                 f"attention {self.profile.attention} ({self.profile.name}); activation memory "
                 "from Korthikanti et al. 2022's count, term by term for this architecture"]
        if shard.tp > self.arch.n_kv_heads:
            notes.append(f"{self.arch.n_kv_heads} KV heads < tp={shard.tp}: KV projections "
                         "replicated")
        if self.arch.n_experts > 1:
            notes.append("MoE: balanced routing assumed (no load imbalance, no token dropping)"
                         + ("; experts whole on their expert-parallel rank" if shard.ep > 1
                            else "; every rank holds all experts, tensor-split"))
        if mode != "train":
            notes.append("infer: no activations kept for a backward")
        return tuple(notes)


def slot_rows(embed: dict[str, list], blocks: Sequence[dict[str, list]],
              head: dict[str, list]) -> pd.DataFrame:
    """Rows of every slot: the embedding's at slot 0, layer ``i``'s block at ``i`` (one
    costed block per layer kind, repeated), the head's at L+1 (``count`` 1; ``key`` prefixed
    by the slot so it stays unique)."""
    runs: list[tuple[dict[str, list], int]] = [(embed, 1)]
    for block in blocks:  # consecutive layers of one kind tile one block
        if len(runs) > 1 and runs[-1][0] is block:
            runs[-1] = (block, runs[-1][1] + 1)
        else:
            runs.append((block, 1))
    runs.append((head, 1))
    slots = np.repeat(np.arange(len(blocks) + 2),
                      [len(p["key"]) for p, n in runs for _ in range(n)])
    cols = {c: np.concatenate([np.tile(np.asarray(p[c], object), n) for p, n in runs])
            for c in COLUMNS}
    prefix = np.array([f"s{i}:" for i in range(len(blocks) + 2)], dtype=object)
    cols["key"] = prefix[slots] + cols["key"]
    return frame(cols).assign(count=1.0, layer=slots)


def comm_ops(arch: LLMArch, shard: LLMShard, tokens: float, elem_bytes: float, mode: str,
             micro: Micro) -> list[CommOp]:
    """The tensor / expert group's collectives per micro-batch (module docstring)."""
    phases = ("forward", "backward") if mode == "train" else ("forward",)
    act = elem_bytes * tokens * arch.d_model
    L = arch.n_layers
    ops: list[CommOp] = []
    ep_block = arch.n_experts > 1 and shard.ep > 1
    if shard.tp > 1:
        sp = shard.sequence_parallel
        pairs = 1 if ep_block else 2  # (gather, reduce) pairs per block and phase
        for slot in range(1, L + 1):
            for ph in phases:
                if sp:
                    ops += [CommOp("all_gather", act, "tp", ph, slot, pairs),
                            CommOp("reduce_scatter", act, "tp", ph, slot, pairs)]
                else:
                    ops.append(CommOp("all_reduce", act, "tp", ph, slot, pairs))
        ops.append(CommOp("reduce_scatter" if sp else "all_reduce", act, "tp", "forward", 0))
        ops.append(CommOp("all_reduce", _FP32 * tokens, "tp", "forward", L + 1,
                          CROSS_ENTROPY_ALL_REDUCES))
        if sp:
            ops.append(CommOp("all_gather", act, "tp", "forward", L + 1))
        if mode == "train":
            ops.append(CommOp("reduce_scatter" if sp else "all_reduce", act, "tp", "backward",
                              L + 1))
            if sp:
                ops.append(CommOp("all_gather", act, "tp", "backward", 0))
    if ep_block:
        size = elem_bytes * moe_pairs(arch, shard, micro) * arch.d_model
        ops += [CommOp("all_to_all", size, "ep", ph, slot, 2)
                for slot in range(1, L + 1) for ph in phases]
    return ops
