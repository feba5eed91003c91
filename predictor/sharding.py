"""One sharding of decoder LLMs: the TP / SP / EP / PP rules, one divisibility check, one rank
placement, and what one device holds (serving replica ``Sharding``, training rank ``LLMShard``).

Rules (Megatron-LM, Shoeybi et al. 2019; vLLM and TensorRT-LLM split the same way):
``tp | heads``; KV heads split when ``Hkv >= tp`` (``tp | Hkv``), else replicated (``Hkv | tp``);
``etp | d_ff`` (the MLP or an expert split ``etp`` ways); ``ep | experts``; pipeline stages
take whole layers. One EP convention (Megatron-Core's MoE parallel folding): the ``ep x etp``
expert ranks are carved out of a stage's ``dp x tp`` dense ranks, ``ep * etp | dp * tp``.
Serving (one replica, ``dp = 1``) takes ``etp = tp / ep`` (TensorRT-LLM ``moe_tp``); training
takes whole experts, ``etp = 1``, when ``ep > 1`` and ``etp = tp`` at ``ep = 1``.
Placement: rank ``r = (stage * dp + replica) * tp + tensor_rank``; nodes hold
``devices_per_node`` consecutive ranks. Counts are elements; design notes in
docs/design/decoder.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.decoder import MLP, LayerKind, MoE, decoder_of
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.hw_catalog.systems import system_from_device
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.parallel.types import ParallelPlanError

#: Megatron-LM pads the vocabulary to a multiple of this times ``tp`` (training); serving
#: engines split it as it is (``ceil(V / tp)``, a padding unit of 1).
VOCAB_DIVISIBLE_BY = 128


# ----------------------------------------------------------------------------- arithmetic
@lru_cache(maxsize=1024)
def _divisors(n: int) -> tuple[int, ...]:
    primes: dict[int, int] = {}
    rest, p = n, 2
    while p * p <= rest:
        while rest % p == 0:
            primes[p] = primes.get(p, 0) + 1
            rest //= p
        p += 1 if p == 2 else 2
    if rest > 1:
        primes[rest] = primes.get(rest, 0) + 1
    out = [1]
    for prime, power in primes.items():
        out = [d * prime ** e for d in out for e in range(power + 1)]
    return tuple(sorted(out))


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n >= 1`` in increasing order, from its prime factorisation
    (trial division up to ``sqrt(n)``: ``2**31`` answers at once)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"divisors of a positive integer only, got {n!r}")
    return list(_divisors(int(n)))


def choices(values: list[int] | tuple[int, ...]) -> str:
    """``1, 2, 4 or 8``."""
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def positive_degree(name: str, value: object) -> int:
    """``value`` as an int, or ``ParallelPlanError`` when it is not a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ParallelPlanError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


# ----------------------------------------------------------------------------- the check
def kv_compatible(tp: int, kv_heads: int | None) -> bool:
    """KV heads split (``tp | Hkv``) or replicated (``Hkv | tp``)."""
    return kv_heads is None or kv_heads % tp == 0 or tp % kv_heads == 0


def check_tp(name: str, tp: int, heads: int | None, kv_heads: int | None = None,
             d_ff: int | None = None) -> None:
    """``ParallelPlanError`` unless ``tp`` divides the heads, splits or replicates the KV heads
    and divides the MLP width (``None``: unknown, not checked)."""
    if heads is not None and heads % tp:
        ok = [t for t in divisors(heads) if kv_compatible(t, kv_heads)]
        raise ParallelPlanError(f"tp={tp} does not divide the {heads} attention heads of "
                                f"{name}; use {choices(ok)}")
    if kv_heads is not None and kv_heads >= tp and kv_heads % tp:
        raise ParallelPlanError(f"tp={tp} does not divide the {kv_heads} KV heads of {name}; "
                                f"use tp in {choices(divisors(kv_heads))} or a multiple of "
                                f"{kv_heads}")
    if kv_heads is not None and kv_heads < tp and tp % kv_heads:
        raise ParallelPlanError(f"tp={tp} is not a multiple of the {kv_heads} KV heads of "
                                f"{name} (fewer KV heads than ranks are replicated, so tp must "
                                f"be a multiple of them); use a divisor or multiple of {kv_heads}")
    if d_ff is not None and d_ff % tp:
        raise ParallelPlanError(f"tp={tp} does not divide the {d_ff} MLP channels (d_ff) of "
                                f"{name}; use {choices(divisors(d_ff))}")


def check_pp(name: str, pp: int, layers: int | None, *, even: bool) -> None:
    """Pipeline stages take whole layers: ``pp <= layers``; ``even`` (Megatron-LM training):
    every stage the same number, ``pp | layers``; else (serving engines) ``ceil(L / pp)``."""
    if layers is None:
        return
    if even and (pp > layers or layers % pp):
        raise ParallelPlanError(f"pp={pp} does not divide the {layers} layers of {name} (every "
                                f"pipeline stage takes the same number of layers); use "
                                f"{choices(divisors(layers))}")
    if pp > layers:
        raise ParallelPlanError(f"pp={pp} exceeds the {layers} layers of {name}: a pipeline "
                                f"stage needs at least one layer; use pp <= {layers}")


def expert_degrees(experts: int, group: int | None = None) -> list[int]:
    """The ``ep`` the EP convention allows: ``ep | experts`` and ``ep | group`` (None: any)."""
    return [e for e in divisors(experts) if group is None or group % e == 0]


def check_ep(name: str, ep: int, experts: int | None, *, group: int | None = None,
             group_text: str = "") -> None:
    """The one EP convention (module docstring): ``ep`` only for a mixture of experts,
    ``ep | experts``, and ``ep * etp | dp * tp``, which each road's ``etp`` turns into
    ``ep | group``: training ``etp = 1`` -> ``group = dp * tp``; serving ``etp = tp / ep``
    -> ``group = tp`` (None: the group is checked elsewhere; ``group_text`` names it)."""
    if ep == 1:
        return
    if experts is None or experts <= 1:
        raise ParallelPlanError(f"ep={ep} needs a mixture-of-experts model; {name} is dense "
                                "(use ep=1)")
    if experts % ep:
        raise ParallelPlanError(f"ep={ep} does not divide the {experts} experts of {name}; use "
                                f"{choices(expert_degrees(experts, group))}")
    if group is not None and group % ep:
        raise ParallelPlanError(f"ep={ep} does not divide {group_text} (expert ranks are carved "
                                f"out of a stage's data x tensor ranks); use ep in "
                                f"{choices(expert_degrees(experts, group))}")


# ----------------------------------------------------------------------------- placement
def rank_of(stage: int, replica: int, tensor_rank: int, *, tp: int, dp: int) -> int:
    """Global rank (Megatron-LM order): ``(stage * dp + replica) * tp + tensor_rank``."""
    return (stage * dp + replica) * tp + tensor_rank


@lru_cache(maxsize=4096)
def group_layout(n_ranks: int, stride: int, devices_per_node: int) -> tuple[int, int]:
    """(nodes touched, ranks per node) of the group ``0, s, 2s, ...`` (``n`` ranks, stride
    ``s``); uneven spreads take the largest divisor of ``n`` not above the fullest node's."""
    per_node: dict[int, int] = {}
    for k in range(n_ranks):
        node = (k * stride) // devices_per_node
        per_node[node] = per_node.get(node, 0) + 1
    fullest = max(per_node.values())
    rpn = max(d for d in divisors(n_ranks) if d <= fullest)
    return n_ranks // rpn, rpn


def stage_boundary_crosses(stage: int, *, tp: int, dp: int, devices_per_node: int) -> bool:
    """Whether the send from stage ``stage - 1`` to ``stage`` (their first ranks) crosses
    nodes: ``rank_of(stage) // devices_per_node`` differs from the previous stage's."""
    here = rank_of(stage, 0, 0, tp=tp, dp=dp) // devices_per_node
    return here != rank_of(stage - 1, 0, 0, tp=tp, dp=dp) // devices_per_node


# ----------------------------------------------------------------------------- widths
def kv_heads_per_device(arch: LLMArch, tp: int) -> int:
    """KV heads one device holds: ``Hkv / tp``, or 1 (replicated) when ``tp > Hkv``."""
    return max(1, arch.n_kv_heads // tp)


def split_length(length: int, tp: int, pad: int = 1) -> int:
    """What one of ``tp`` ranks holds of an axis of ``length``, padded to a multiple of
    ``pad * tp``: ``ceil(n / (pad tp)) * pad`` (uneven splits padded; the vocabulary: serving
    ``pad = 1``, Megatron-LM ``VOCAB_DIVISIBLE_BY``)."""
    return math.ceil(length / (pad * tp)) * pad


def stage_layers(arch: LLMArch, pp: int) -> int:
    """Layers of the largest pipeline stage: ``ceil(L / pp)``."""
    return math.ceil(arch.n_layers / pp)


# ----------------------------------------------------------------------------- serving
@dataclass(frozen=True)
class Sharding:
    """One serving replica: ``tp`` tensor x ``pp`` pipeline devices, ``ep`` expert groups of
    ``moe_tp = tp / ep`` devices inside the tensor group (TensorRT-LLM ``moe_tp x ep = tp``)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1

    @classmethod
    def of(cls, cfg: object) -> Sharding:
        """The sharding a ``ServingConfig`` asks for (``tp``/``pp``/``ep``, default 1)."""
        return cls(**{k: positive_degree(k, getattr(cfg, k, 1)) for k in ("tp", "pp", "ep")})

    @property
    def devices(self) -> int:
        """Devices of one replica: ``tp x pp``."""
        return self.tp * self.pp

    @property
    def trivial(self) -> bool:
        """One device: nothing is split."""
        return self.devices == 1

    @property
    def moe_tp(self) -> int:
        """Devices that split each expert (the expert tensor parallelism): ``tp / ep``."""
        return max(self.tp // self.ep, 1)

    def label(self) -> str:
        """``tp2 pp2`` (``ep`` shown when > 1)."""
        return " ".join(f"{k}{v}" for k, v in (("tp", self.tp), ("pp", self.pp), ("ep", self.ep))
                        if k != "ep" or v > 1)


def check_sharding(arch: LLMArch, sh: Sharding) -> None:
    """``ParallelPlanError`` when ``arch`` cannot be split as ``sh`` says (the module's rules;
    uneven pipeline stages allowed)."""
    moe = arch.n_experts > 1
    check_tp(arch.name, sh.tp, arch.n_heads, arch.n_kv_heads, None if moe else arch.d_ff)
    check_pp(arch.name, sh.pp, arch.n_layers, even=False)
    check_ep(arch.name, sh.ep, arch.n_experts, group=sh.tp, group_text=f"tp = {sh.tp}")
    if moe and arch.d_ff % sh.moe_tp:
        ok = [e for e in expert_degrees(arch.n_experts, sh.tp) if arch.d_ff % (sh.tp // e) == 0]
        raise ParallelPlanError(f"tp / ep = {sh.moe_tp} devices per expert do not divide the "
                                f"{arch.d_ff} channels of an expert of {arch.name}; use ep in "
                                f"{choices(ok)}")


def local_arch(arch: LLMArch, sh: Sharding) -> LLMArch:
    """The shapes one device of ``sh`` runs: ``H / tp`` heads, ``kv_heads_per_device``,
    ``d_ff / tp`` (MoE: ``d_ff / moe_tp``), ``ceil(vocab / tp)``; all layers and experts (the
    expert share is the kernels' ``ep``; each of ``layers`` by ``local_kind``). The identity
    for one device."""
    if sh.trivial:
        return arch
    check_sharding(arch, sh)
    split_ff = sh.moe_tp if arch.n_experts > 1 else sh.tp
    kinds = tuple(local_kind(k, tp=sh.tp, etp=sh.moe_tp) for k in arch.layers)
    return replace(arch, name=f"{arch.name} [{sh.label()}]", n_heads=arch.n_heads // sh.tp,
                   n_kv_heads=kv_heads_per_device(arch, sh.tp),
                   d_ff=math.ceil(arch.d_ff / split_ff), vocab=split_length(arch.vocab, sh.tp),
                   layers=kinds)


def pipeline_round_factor(arch: LLMArch, sh: Sharding, groups: float) -> float:
    """A round of ``groups`` micro-batches over one pass through all stages:
    ``max(1, groups x ceil(L / pp) / L)`` (uneven stages wait for the fullest)."""
    return max(1.0, groups * stage_layers(arch, sh.pp) / arch.n_layers)


def replica_system(hw: HardwareSpec, sh: Sharding, system: Any = None) -> Any:
    """The system one replica runs on: ``system`` (made of ``hw``, with ``tp x pp`` devices),
    else ``tp x pp`` devices of ``hw`` (nodes of 8 beyond one); None on one device."""
    if system is None:
        return None if sh.trivial else system_from_device(hw, sh.devices)
    if system.device != hw.id:
        raise PredictionError(f"system {system.id!r} is made of {system.device}, not {hw.id}; "
                              f"predict on {system.device} or choose a system of {hw.id}")
    if sh.devices > system.n_devices:
        raise ParallelPlanError(f"tp={sh.tp} x pp={sh.pp} = {sh.devices} devices exceed the "
                                f"{system.n_devices} of system {system.id!r}; lower tp or pp, "
                                "or choose a larger system")
    return system


# ----------------------------------------------------------------------------- training
@dataclass(frozen=True)
class LLMShard:
    """Per-rank dims of one Megatron-LM tensor / expert-parallel training rank: query and KV
    ``heads``, the dense MLP width ``d_ff``, padded ``vocab`` rows, ``experts`` kept whole or
    split, an expert's width ``expert_d_ff``; the degrees it was cut for."""

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
        """Ways the norms / residuals / boundaries split the tokens (``tp`` with SP, else 1)."""
        return self.tp if self.sequence_parallel else 1

    @property
    def etp(self) -> int:
        """Expert tensor parallelism: 1 (whole experts) when ``ep > 1``, else ``tp``."""
        return 1 if self.ep > 1 else self.tp


def llm_shard(arch: LLMArch, *, tp: int, ep: int, sequence_parallel: bool) -> LLMShard:
    """A training rank's dims, or ``ParallelPlanError`` naming the degree that cannot split
    ``arch`` (ep groups of whole experts: ``ep | dp * tp`` is the plan's check)."""
    tp, ep = positive_degree("tp", tp), positive_degree("ep", ep)
    check_tp(arch.name, tp, arch.n_heads, arch.n_kv_heads, arch.d_ff)
    moe = arch.n_experts > 1
    check_ep(arch.name, ep, arch.n_experts)
    if ep > 1 and tp > 1 and not sequence_parallel:
        raise ParallelPlanError(f"ep={ep} with tp={tp} needs sequence parallelism (Megatron-Core "
                                "requires it when expert and tensor parallelism combine); turn "
                                "sequence_parallel on or use tp=1")
    etp = 1 if ep > 1 else tp
    return LLMShard(
        tp=tp, ep=ep, sequence_parallel=bool(sequence_parallel and tp > 1),
        heads=arch.n_heads // tp, kv_heads=kv_heads_per_device(arch, tp), d_ff=arch.d_ff // tp,
        vocab=split_length(arch.vocab, tp, VOCAB_DIVISIBLE_BY),
        experts=arch.n_experts // ep if moe else 1, expert_d_ff=arch.d_ff // etp)


@lru_cache(maxsize=4096)
def local_kind(kind: LayerKind, *, tp: int, etp: int) -> LayerKind:
    """The widths one rank runs of a layer kind: ``H / tp`` query heads, ``max(1, Hkv / tp)``
    KV heads, ``d_ff / tp`` (an expert's: ``d_ff / etp``); router and experts' count whole."""
    a = kind.attention
    attn = replace(a, n_heads=a.n_heads // tp, n_kv_heads=max(1, a.n_kv_heads // tp))
    ffn: MLP | MoE
    if isinstance(kind.ffn, MoE):
        ffn = replace(kind.ffn, expert=replace(kind.ffn.expert,
                                               d_ff=math.ceil(kind.ffn.expert.d_ff / etp)))
    else:
        ffn = replace(kind.ffn, d_ff=math.ceil(kind.ffn.d_ff / tp))
    return replace(kind, attention=attn, ffn=ffn)


def block_params(kind: LayerKind, shard: LLMShard) -> float:
    """Parameter elements of one layer of ``kind`` on one rank: norms (replicated), attention
    (``d (H_r + 2 Hkv_r) hd`` QKV + its bias, ``H_r hd d`` O; ``Attention.params``), MLP or
    experts (+ shared experts, + router)."""
    local = local_kind(kind, tp=shard.tp, etp=shard.etp)
    attn = local.attention.params(kind.d_model)  # MLA: the replicated latent matrices whole
    return float(kind.norm_params + attn + mlp_params(local, shard.ep))


def mlp_params(local: LayerKind, ep: int) -> float:
    """The MLP's (dense) or the experts' + router's (MoE) parameter elements of a rank's
    ``local`` layer: ``mats d f_r`` (+ column biases ``(mats - 1) f_r`` and the replicated row
    bias ``d``); ``E / ep`` experts."""
    d, m = local.d_model, local.mlp
    mats = 3 if m.gated else 2
    one = mats * d * m.d_ff + (((mats - 1) * m.d_ff + d) if m.bias else 0)
    moe = local.moe
    if moe is None:
        return float(one)
    return float((moe.n_experts // ep + moe.n_shared) * one + d * moe.n_experts)


def slot_params(arch: LLMArch, shard: LLMShard) -> np.ndarray:
    """Parameter elements per slot on one rank: 0 the embedding (+ learned positions), 1..L
    the layers, L+1 the final norm and the LM head (none when tied: slot 0 holds it)."""
    d = arch.d_model
    per_kind = {k: block_params(k, shard) for k, _ in decoder_of(arch).groups()}
    out = np.array([0.0, *(per_kind[k] for k in decoder_of(arch).layers), 0.0])
    pos = arch.max_context * d if arch.positions == "learned" else 0
    out[0] = shard.vocab * d + pos
    final_norm = d * (2 if arch.norm == "layernorm" else 1)
    out[-1] = final_norm + (0 if arch.tied_embeddings else shard.vocab * d)
    return out
