"""Communication of one tensor / pipeline parallel serving step (seconds, through
``predictor.collectives.collective_time_s``).

Placement (Megatron's and TensorRT-LLM's rank order): the ``tp`` ranks of a stage are adjacent
devices, the ``pp`` stages follow one another, so stage ``s`` holds devices ``s x tp .. (s + 1)
x tp - 1`` and a stage boundary crosses nodes when ``s x tp`` is a multiple of the system's
devices per node. Per engine step of ``T`` tokens, ``emit`` of them sampled:

* **tensor parallel**: ``a x L`` all-reduces of ``T x d x act bytes`` over the ``tp`` ranks
  (``a`` = 2: after attention's O projection and after the MLP's down projection; 1 for a
  ``parallel_block`` model), plus one all-gather of the ``emit x vocab`` fp32 logits
  (vocab-parallel LM head); ``tp > devices_per_node`` crosses the NICs;
* **pipeline parallel**: ``pp - 1`` sends of ``T x d x act bytes`` from one stage to the next
  (the ``tp`` ranks of a stage send their copies in parallel, one pair timed), a boundary inside
  a node over its fabric, one between nodes over the NICs (``ranks_per_node = 1``).

The sum is added to the step's (calibrated) kernel time; nothing overlaps it (TensorRT-LLM runs
the all-reduce between the GEMMs it joins).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.predictor.collectives import collective_time_s
from roofcast.predictor.llm.sharding import Sharding

#: bytes per logit gathered from the vocab-parallel LM head (fp32 logits).
LOGIT_BYTES = 4.0


@dataclass(frozen=True)
class StepComm:
    """Seconds of one step's tensor-parallel (``tp_s``) and pipeline (``pp_s``) traffic."""

    tp_s: float = 0.0
    pp_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.tp_s + self.pp_s


def step_comm(arch: LLMArch, sh: Sharding, system: Any, *, tokens: float, emit: float,
              act_bytes: float) -> StepComm:
    """The communication of one step of ``tokens`` tokens (``emit`` sampled) of ``arch`` split
    as ``sh`` on ``system`` (module docstring); nothing on one device."""
    if sh.trivial:
        return StepComm()
    hidden = tokens * arch.d_model * act_bytes
    tp_s = 0.0
    if sh.tp > 1:
        per_layer = 1 if arch.parallel_block else 2
        tp_s = arch.n_layers * per_layer * collective_time_s("all_reduce", hidden, sh.tp, system)
        if emit > 0:
            tp_s += collective_time_s("all_gather", emit * arch.vocab * LOGIT_BYTES, sh.tp,
                                      system)
    pp_s = 0.0
    dpn = system.devices_per_node
    for stage in range(1, sh.pp):
        crosses = (stage * sh.tp) % dpn == 0 and system.nodes > 1
        pp_s += collective_time_s("send_recv", hidden, 2, system,
                                  ranks_per_node=1 if crosses else None)
    return StepComm(tp_s, pp_s)
