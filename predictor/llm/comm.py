"""Communication of one tensor / pipeline parallel serving step (seconds, through
``predictor.collectives``), ranks placed by ``sharding.rank_of`` (one replica: ``dp = 1``).

Per step of ``T`` tokens, ``emit`` sampled: ``a x L`` all-reduces of ``T x d x act bytes``
over the ``tp`` ranks (``a`` = 2, 1 for a ``parallel_block`` model; the engine's own
one-/two-shot kernel where its profile's ``[serving.custom_allreduce]`` picks one, else NCCL),
one all-gather of the ``emit x vocab`` fp32 logits; ``pp - 1`` sends of ``T x d x act bytes``
between stages (one pair timed; over the NICs when the boundary crosses nodes,
``sharding.stage_boundary_crosses``). Nothing overlaps the kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.predictor.collectives import collective_time_s, engine_time_s
from roofcast.predictor.runtimes.profile import CustomAllReduce
from roofcast.predictor.sharding import Sharding, stage_boundary_crosses

#: bytes per logit gathered from the vocab-parallel LM head (fp32 logits).
LOGIT_BYTES = 4.0


@dataclass(frozen=True)
class StepComm:
    """Seconds of one step's tensor-parallel (``tp_s``) and pipeline (``pp_s``) traffic, and
    the kernel its all-reduces ran (``tp_algorithm``: ``nccl``, ``one_shot``, ...; "" none)."""

    tp_s: float = 0.0
    pp_s: float = 0.0
    tp_algorithm: str = ""

    @property
    def total_s(self) -> float:
        return self.tp_s + self.pp_s


def all_reduce_s(size_bytes: float, n_ranks: int, system: Any,
                 custom: CustomAllReduce | None = None) -> tuple[float, str]:
    """(seconds, algorithm) of one all-reduce: the engine kernel ``custom`` picks where it runs
    on this layout (one node, direct NVLink peers), else NCCL (``"nccl"``)."""
    algo = custom.algorithm(size_bytes, n_ranks, system.fabric.kind) if custom else None
    if algo is not None:
        t = engine_time_s("all_reduce", algo, size_bytes, n_ranks, system)
        if t is not None:
            return t, algo
    return collective_time_s("all_reduce", size_bytes, n_ranks, system), "nccl"


def step_comm(arch: LLMArch, sh: Sharding, system: Any, *, tokens: float, emit: float,
              act_bytes: float, custom: CustomAllReduce | None = None) -> StepComm:
    """The communication of one step of ``tokens`` tokens (``emit`` sampled) of ``arch`` split
    as ``sh`` on ``system`` (module docstring; ``custom``: the engine's own all-reduce
    kernels); nothing on one device."""
    if sh.trivial:
        return StepComm()
    hidden = tokens * arch.d_model * act_bytes
    tp_s, algo = 0.0, ""
    if sh.tp > 1:
        per_layer = 1 if arch.parallel_block else 2
        one, algo = all_reduce_s(hidden, sh.tp, system, custom)
        tp_s = arch.n_layers * per_layer * one
        if emit > 0:
            tp_s += collective_time_s("all_gather", emit * arch.vocab * LOGIT_BYTES, sh.tp,
                                      system)
    pp_s = 0.0
    for stage in range(1, sh.pp):
        crosses = stage_boundary_crosses(stage, tp=sh.tp, dp=1,
                                         devices_per_node=system.devices_per_node)
        pp_s += collective_time_s("send_recv", hidden, 2, system,
                                  ranks_per_node=1 if crosses else None)
    return StepComm(tp_s, pp_s, algo)
