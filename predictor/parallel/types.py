"""The contract of multi-device prediction: plan, model facts, sharded workload, prediction.

A **plan** places ``dp x tp x pp`` devices (Megatron-LM's order, Shoeybi et al. 2019; Narayanan
et al. 2021): tensor-parallel ranks are adjacent (inside a node while ``tp <= devices_per_node``),
data-parallel ranks next, pipeline stages outermost. ``ep`` expert-parallel ranks are carved
out of the ``dp x tp`` ranks of a stage (each holds ``experts / ep`` experts of every MoE layer).

A **source** (``ParallelSource``) turns a single-device model into the work of *one device*
for one micro-batch: its kernels after tensor / expert sharding (``ShardedWorkload.rows``, one
row per kernel), the collectives its layers call inside the tensor / expert group (``comms``)
and the per-layer sizes the engine needs for memory, data-parallel gradient traffic and
pipeline sends. The **engine** times a plan on a system from those: stages, the 1F1B schedule,
collectives through ``predictor.collectives``, per-device memory.

Units: seconds (``_s``), bytes (``_bytes``), elements (``_elems``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.memory.types import DeviceMemory

#: communication groups of a plan (``CommOp.group``).
GROUPS: tuple[str, ...] = ("tp", "dp", "pp", "ep")
#: what a parallel run does: ``train`` (forward + backward + optimizer) or ``infer`` (forward).
PARALLEL_MODES: tuple[str, ...] = ("train", "infer")


class ParallelPlanError(PredictionError):
    """A plan cannot run as asked: a degree that does not divide the heads, layers, experts,
    batch or devices, or a plan that does not fit; the message names the degree and the fix."""


@dataclass(frozen=True)
class ParallelPlan:
    """How ``n_devices = dp * tp * pp`` devices share one model.

    dp: data-parallel replicas (each takes ``global_batch / dp`` samples per step).
    tp: tensor-parallel ranks (Megatron column/row-parallel GEMMs, heads split).
    pp: pipeline stages (contiguous layers; 1F1B schedule).
    ep: expert-parallel ranks for MoE layers (divides ``dp * tp``; 1: experts replicated or
        tensor-split as the dense layers are).
    micro_batches: micro-batches per replica per step (gradient accumulation; the pipeline's
        ``m``); the micro-batch size is ``global_batch / (dp * micro_batches)``.
    zero: ZeRO stage (Rajbhandari et al. 2020) over the data-parallel group: 0 none,
        1 optimizer states sharded, 2 + gradients, 3 + parameters.
    sequence_parallel: Korthikanti et al. 2022: norms/dropout split over the sequence inside
        the tensor group; each all-reduce becomes a reduce-scatter + an all-gather.
    recompute: full activation recomputation (keep each layer's input only; the backward
        reruns the layer's forward).
    tp_comm_overlap: Megatron-Core / Transformer Engine's ``tp_comm_overlap`` (userbuffers):
        the tensor group's all-gathers / reduce-scatters run in ``tp`` chunks overlapped with
        the neighbouring GEMMs. It needs ``sequence_parallel`` and ``tp > 1`` (as Megatron-Core
        asserts) and does nothing otherwise; on by default (NeMo's LLM recipes turn it on).
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    micro_batches: int = 1
    zero: int = 0
    sequence_parallel: bool = False
    recompute: bool = False
    tp_comm_overlap: bool = True

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "ep", "micro_batches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ParallelPlanError(f"{name} must be a positive integer, got {value!r}")
        if self.zero not in (0, 1, 2, 3) or isinstance(self.zero, bool):
            raise ParallelPlanError(f"zero must be 0, 1, 2 or 3 (ZeRO stage), got {self.zero!r}")
        for name in ("sequence_parallel", "recompute", "tp_comm_overlap"):
            if not isinstance(getattr(self, name), bool):
                raise ParallelPlanError(f"{name} must be true or false, "
                                        f"got {getattr(self, name)!r}")

    @property
    def overlaps_tp_comm(self) -> bool:
        """Whether ``tp_comm_overlap`` applies: on, with sequence parallelism and ``tp > 1``."""
        return self.tp_comm_overlap and self.sequence_parallel and self.tp > 1

    @property
    def n_devices(self) -> int:
        """Devices the plan uses: ``dp * tp * pp``."""
        return self.dp * self.tp * self.pp

    def label(self) -> str:
        """Short form for tables, e.g. ``dp4 tp8 pp2 m16 z1``."""
        parts = [f"dp{self.dp}", f"tp{self.tp}", f"pp{self.pp}"]
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        parts.append(f"m{self.micro_batches}")
        if self.zero:
            parts.append(f"z{self.zero}")
        if self.sequence_parallel:
            parts.append("sp")
        if self.recompute:
            parts.append("rc")
        if self.sequence_parallel and self.tp > 1 and not self.tp_comm_overlap:
            parts.append("no-tp-overlap")
        return " ".join(parts)


@dataclass(frozen=True)
class ModelFacts:
    """What parallel degrees must divide, as the source knows it (None: unknown; the
    corresponding check is skipped and a note says so).

    layers: repeated blocks (pipeline stages take whole blocks); heads / kv_heads: attention
        heads (tensor ranks split query heads; KV heads are split or, fewer than ``tp``,
        replicated); experts: MoE experts per layer (None: dense); hidden: model width.
    seq_tokens: tokens per sample (None: not a sequence model) — for tokens/s.
    """

    name: str
    layers: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    experts: int | None = None
    hidden: int | None = None
    seq_tokens: int | None = None


@dataclass(frozen=True)
class CommOp:
    """A collective a source's kernels call inside the tensor or expert group.

    collective: ``predictor.collectives.COLLECTIVES`` name; size_bytes: the per-rank buffer as
    NCCL counts it (all-reduce: the tensor; all-gather: the gathered output; reduce-scatter:
    the input; all-to-all: what one rank sends in total); group: ``tp`` or ``ep``;
    phase: ``forward`` / ``backward``; layer: the layer slot (as ``ShardedWorkload.rows``);
    count: how many times per micro-batch (e.g. 2 per transformer block in the forward).
    """

    collective: str
    size_bytes: float
    group: str
    phase: str
    layer: int
    count: float = 1.0


@dataclass(frozen=True)
class ShardedWorkload:
    """One device's work for one micro-batch under a ``tp`` / ``ep`` / sequence-parallel choice.

    rows: kernel rows as ``predictor.workload.workload_table`` makes them (``phase`` =
        forward / backward / update), plus ``count`` (float: the row runs that many times,
        e.g. a representative layer's kernels with count = layers in its slot) and ``layer``
        (int slot: 0 = before the first block — embeddings —, 1..L = block i-1, L+1 = after
        the last block — final norm, head, loss). Update rows carry the slot of their
        parameters.
    comms: the tensor / expert group's collectives (data-parallel and pipeline traffic is the
        engine's: it derives them from ``param_elems`` and ``boundary_bytes``).
    param_elems: float array over slots 0..L+1: trainable parameter elements one device holds
        after tensor / expert sharding.
    activation_bytes: per slot, the activations one micro-batch keeps for the backward on one
        device (after tensor / sequence sharding).
    checkpoint_bytes: per slot, what full recomputation keeps instead (the block's input).
    boundary_bytes: the activation one micro-batch sends from one block to the next (a
        pipeline stage boundary), per device.
    config / runtime: the ``RunConfig`` the rows were built under (precision, optimizer,
        overlap, dims at the micro-batch) and the execution profile's name — ``evaluate``
        takes them.
    notes: what the source approximated (e.g. "tensor sharding inferred from ...").
    grad_reduce_bytes: bytes per gradient element the data-parallel reduction moves (None: the
        gradient's storage width, ``memory.state.bytes_per_param``).
    """

    rows: pd.DataFrame
    comms: tuple[CommOp, ...]
    param_elems: np.ndarray
    activation_bytes: np.ndarray
    checkpoint_bytes: np.ndarray
    boundary_bytes: float
    config: Any
    runtime: str
    notes: tuple[str, ...] = ()
    grad_reduce_bytes: float | None = None

    @property
    def layers(self) -> int:
        """Blocks L (slots 1..L)."""
        return len(self.param_elems) - 2


class ParallelSource(Protocol):
    """A model that can be sharded: ``facts`` for the checks, ``build`` for one device's work.

    ``build`` is called once per distinct (tp, ep, micro_batch, sequence_parallel, mode) —
    the plan search reuses it across dp / pp / micro-batch counts — so it may be cached.
    It raises ``ParallelPlanError`` when the degrees cannot split this model.
    """

    @property
    def facts(self) -> ModelFacts: ...

    def build(self, *, tp: int, ep: int, micro_batch: int, sequence_parallel: bool,
              mode: str) -> ShardedWorkload: ...


@dataclass(frozen=True)
class ParallelPrediction:
    """One step of a plan on a system.

    step_s: the whole step (train: forward + backward of every micro-batch through the
    pipeline + exposed gradient sync + optimizer; infer: the batch's forward through the
    pipeline). Its parts (they sum to step_s): compute_s (the slowest stage's kernels over all
    micro-batches), exposed_comm_s (tensor/expert collectives on the critical path + pipeline
    sends + gradient sync not hidden behind the backward), bubble_s (pipeline fill/drain idle
    time of the slowest stage), optimizer_s (update rows + ZeRO's parameter all-gather when
    exposed). comm_s_by_group: each group's total collective time before overlap.
    stage_s: per stage, the forward + backward time of one micro-batch.
    samples_per_s = global_batch / step_s; tokens_per_s = samples_per_s * seq_tokens (None:
    not a sequence model). lower_s / upper_s: the interval of step_s from the estimator's
    per-kernel intervals (communication at its point estimate).
    """

    model: str
    system: str
    device: str
    plan: ParallelPlan
    mode: str
    global_batch: int
    micro_batch: int
    step_s: float
    compute_s: float
    exposed_comm_s: float
    bubble_s: float
    optimizer_s: float
    comm_s_by_group: Mapping[str, float]
    stage_s: tuple[float, ...]
    memory: DeviceMemory
    samples_per_s: float
    tokens_per_s: float | None
    lower_s: float
    upper_s: float
    estimator: str
    runtime: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def as_dict(self) -> dict[str, Any]:
        """Flat JSON-ready dict: plan fields, times (s), memory (bytes), fits, notes."""
        plan = {k: getattr(self.plan, k) for k in ("dp", "tp", "pp", "ep", "micro_batches",
                                                    "zero", "sequence_parallel", "recompute",
                                                    "tp_comm_overlap")}
        mem = self.memory
        return {
            "model": self.model, "system": self.system, "device": self.device, **plan,
            "plan": self.plan.label(), "mode": self.mode, "global_batch": self.global_batch,
            "micro_batch": self.micro_batch, "step_s": self.step_s, "lower_s": self.lower_s,
            "upper_s": self.upper_s, "compute_s": self.compute_s,
            "exposed_comm_s": self.exposed_comm_s, "bubble_s": self.bubble_s,
            "optimizer_s": self.optimizer_s,
            **{f"comm_{g}_s": float(self.comm_s_by_group.get(g, 0.0)) for g in GROUPS},
            "samples_per_s": self.samples_per_s, "tokens_per_s": self.tokens_per_s,
            "weights_bytes": mem.weights_bytes, "gradients_bytes": mem.gradients_bytes,
            "optimizer_bytes": mem.optimizer_bytes, "activations_bytes": mem.activations_bytes,
            "other_bytes": mem.other_bytes, "memory_bytes": mem.total_bytes,
            "capacity_bytes": mem.capacity_bytes, "fits": mem.fits, "over_bytes": mem.over_bytes,
            "estimator": self.estimator, "runtime": self.runtime, "notes": list(self.notes),
        }
