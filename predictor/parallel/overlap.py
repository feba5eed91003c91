"""Exposed tensor-parallel communication of one micro-batch, per layer slot (seconds).

Megatron-Core hides the tensor group's collectives behind GEMMs in two ways. Always
(``LinearWithGradAccumulationAndAsyncCommunication``): in the backward, the all-reduce
(reduce-scatter with sequence parallelism) of a column-parallel layer's input gradient runs
beside the weight-gradient GEMMs. With ``ParallelPlan.overlaps_tp_comm`` (Transformer
Engine userbuffers): every all-gather / reduce-scatter of both phases is split into ``n = tp``
chunks, each overlapped with the GEMM chunk next to it. Per slot and phase, ``C`` the
overlappable collective time, ``G`` the GEMM time that hides it (weight-gradient GEMMs; with
``tp_comm_overlap`` every GEMM of the phase), ``R`` the rest of the group's collectives:

    exposed = R + max(0, C - G) + min(C, G) / n

(a two-stream pipeline of ``n`` equal chunks ends ``min(C, G) / n`` after the longer stream;
one async collective: ``n = inf``). Expert all-to-alls and other groups stay exposed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from roofcast.predictor.parallel.types import CommOp, ParallelPlan

#: the GEMM rows that can hide communication, per ``TimedWorkload.slot_s`` key.
HIDING_KEYS: tuple[str, ...] = ("gemm:forward", "gemm:backward", "wgrad:backward")


def hiding_masks(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Row masks of ``HIDING_KEYS``: the GEMMs (``matmul`` family) of each phase and the
    backward's weight-gradient GEMMs (kernel ``grad_weight*``)."""
    gemm = rows["family"].astype(str).to_numpy() == "matmul"
    phase = rows["phase"].astype(str).to_numpy()
    wgrad = rows["kernel"].astype(str).str.startswith("grad_weight").to_numpy()
    return {"gemm:forward": gemm & (phase == "forward"),
            "gemm:backward": gemm & (phase == "backward"),
            "wgrad:backward": gemm & wgrad & (phase == "backward")}


def overlappable(op: CommOp, plan: ParallelPlan) -> bool:
    """Whether ``op`` can hide behind GEMMs under ``plan`` (module docstring)."""
    if op.group != "tp":
        return False
    if plan.overlaps_tp_comm:
        return op.collective in ("all_gather", "reduce_scatter")
    return op.phase == "backward" and op.collective in ("all_reduce", "reduce_scatter")


def hiding_key(phase: str, plan: ParallelPlan) -> str | None:
    """The ``HIDING_KEYS`` entry whose GEMMs hide ``phase``'s collectives (None: nothing)."""
    if plan.overlaps_tp_comm:
        return f"gemm:{phase}"
    return "wgrad:backward" if phase == "backward" else None


def chunks(plan: ParallelPlan) -> float:
    """Pieces an overlapped collective is split into: ``tp`` with userbuffers, else one
    asynchronous collective (``inf``: no pipeline fill)."""
    return float(plan.tp) if plan.overlaps_tp_comm else math.inf


def exposed_s(total: np.ndarray, hideable: np.ndarray, gemm: np.ndarray, n: float
              ) -> np.ndarray:
    """Per slot: ``R + max(0, C - G) + min(C, G) / n`` with ``R = total - C`` (docstring)."""
    fill = np.minimum(hideable, gemm) / n
    return total - hideable + np.maximum(0.0, hideable - gemm) + fill
