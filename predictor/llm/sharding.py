"""Tensor / pipeline / expert parallel serving: the checks and one device's share of a model.

``Sharding(tp, pp, ep)`` is the layout of one model replica over ``tp x pp`` devices, as
TensorRT-LLM builds it (``tp_size``, ``pp_size``, ``moe_ep_size`` with ``moe_tp_size x
moe_ep_size = tp_size``; vLLM's TP is the same Megatron split, Shoeybi et al. 2019):

* **tensor parallel** (``tp``): the attention heads are split, ``H / tp`` query heads per device;
  the KV heads are split while ``Hkv >= tp`` (``Hkv / tp`` each), else each device keeps one KV
  head, the ``tp / Hkv`` devices of a query-head group replicating it (TensorRT-LLM and vLLM do
  this: ``tp`` must then be a multiple of ``Hkv``); QKV is column-parallel, O row-parallel; the
  MLP's up/gate column-parallel (``d_ff / tp``), down row-parallel; the LM head vocab-parallel
  (``ceil(vocab / tp)`` logits per device, gathered). Each layer ends its attention and its MLP
  with an all-reduce of the ``[T, d]`` activations (one when attention and MLP run in parallel,
  ``parallel_block``); the logits are all-gathered once per step.
* **expert parallel** (``ep``, MoE only): the ``tp`` devices form ``ep`` groups of
  ``moe_tp = tp / ep``; each group holds ``E / ep`` experts, each expert split ``d_ff / moe_tp``.
  The tokens are replicated over the tensor group (attention is tensor-parallel), every group
  runs the token-expert pairs routed to its experts and the MLP's all-reduce sums the partial
  outputs (TensorRT-LLM's MoE plugin; no all-to-all). The step waits for the busiest group:
  ``kernels.busiest_share``.
* **pipeline parallel** (``pp``): contiguous stages of ``ceil(L / pp)`` layers; the embedding on
  the first stage, the final norm and LM head on the last; ``pp - 1`` sends of the ``[T, d]``
  activations per step.

``check_sharding`` refuses a layout the model cannot take (``ParallelPlanError`` naming the
degree and the degrees that would work); ``local_arch`` is the shape one device runs (heads,
KV heads, ``d_ff`` and vocabulary divided; all ``L`` layers, since a step passes every stage);
``replica_system`` the system a replica runs on; ``pipeline_round_factor`` the cost of uneven
stages when micro-batches fill the pipeline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.hw_catalog.systems import system_from_device
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.parallel.types import ParallelPlanError


@dataclass(frozen=True)
class Sharding:
    """``tp`` tensor-parallel x ``pp`` pipeline devices of one replica; ``ep`` expert-parallel
    groups inside the tensor group (module docstring)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1

    @classmethod
    def of(cls, cfg: object) -> Sharding:
        """The sharding a ``ServingConfig`` asks for (``tp``/``pp``/``ep``, default 1)."""
        degrees = {k: getattr(cfg, k, 1) for k in ("tp", "pp", "ep")}
        for name, value in degrees.items():
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ParallelPlanError(f"{name} must be a positive integer, got {value!r}")
        return cls(**{k: int(v) for k, v in degrees.items()})

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
        """Devices that split each expert: ``tp / ep``."""
        return self.tp // self.ep

    def label(self) -> str:
        """``tp2 pp2`` (``ep`` shown when > 1)."""
        return " ".join(f"{k}{v}" for k, v in (("tp", self.tp), ("pp", self.pp), ("ep", self.ep))
                        if k != "ep" or v > 1)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _options(values: list[int]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def check_sharding(arch: LLMArch, sh: Sharding) -> None:
    """``ParallelPlanError`` when ``arch`` cannot be split as ``sh`` says (module docstring):
    ``tp`` must divide the heads, and divide or be a multiple of the KV heads; ``pp`` at most
    the layers; ``ep`` only for MoE, dividing the experts and ``tp``."""
    h, hkv = arch.n_heads, arch.n_kv_heads
    if h % sh.tp:
        ok = [t for t in _divisors(h) if hkv % t == 0 or t % hkv == 0]
        raise ParallelPlanError(f"tp={sh.tp} does not divide the {h} attention heads of "
                                f"{arch.name}; use {_options(ok)}")
    if hkv % sh.tp and sh.tp % hkv:
        ok = [t for t in _divisors(h) if hkv % t == 0 or t % hkv == 0]
        raise ParallelPlanError(f"tp={sh.tp} neither divides nor is a multiple of the {hkv} KV "
                                f"heads of {arch.name} (each device holds whole KV heads); "
                                f"use {_options(ok)}")
    if sh.pp > arch.n_layers:
        raise ParallelPlanError(f"pp={sh.pp} exceeds the {arch.n_layers} layers of {arch.name}: "
                                f"a pipeline stage needs at least one layer; use pp <= "
                                f"{arch.n_layers}")
    if sh.ep > 1:
        e = arch.n_experts
        if e <= 1:
            raise ParallelPlanError(f"ep={sh.ep}: {arch.name} has no experts (not a mixture of "
                                    "experts); use ep=1")
        if e % sh.ep or sh.tp % sh.ep:
            ok = [x for x in _divisors(e) if sh.tp % x == 0]
            raise ParallelPlanError(
                f"ep={sh.ep} must divide the {e} experts of {arch.name} and tp={sh.tp} (the "
                f"expert groups are carved out of the tensor-parallel devices, moe_tp x ep = "
                f"tp); use {_options(ok)}")


def kv_heads_per_device(arch: LLMArch, tp: int) -> int:
    """KV heads one device holds: ``Hkv / tp``, or 1 (replicated) when ``tp > Hkv``."""
    return max(1, arch.n_kv_heads // tp)


def local_arch(arch: LLMArch, sh: Sharding) -> LLMArch:
    """The shapes one device of ``sh`` runs (module docstring): ``H / tp`` heads,
    ``kv_heads_per_device`` KV heads, ``d_ff / tp`` (MoE: ``d_ff / moe_tp``), ``ceil(vocab /
    tp)``; all layers and all experts (the expert share is ``kernels``' ``ep``). The identity
    for one device."""
    if sh.trivial:
        return arch
    check_sharding(arch, sh)
    split_ff = sh.moe_tp if arch.n_experts > 1 else sh.tp
    return replace(arch, name=f"{arch.name} [{sh.label()}]", n_heads=arch.n_heads // sh.tp,
                   n_kv_heads=kv_heads_per_device(arch, sh.tp),
                   d_ff=math.ceil(arch.d_ff / split_ff), vocab=math.ceil(arch.vocab / sh.tp))


def stage_layers(arch: LLMArch, pp: int) -> int:
    """Layers of the largest pipeline stage: ``ceil(L / pp)``."""
    return math.ceil(arch.n_layers / pp)


def pipeline_round_factor(arch: LLMArch, sh: Sharding, groups: float) -> float:
    """A steady-state round of ``groups`` micro-batches over ``pp`` stages over one pass
    through all stages: each stage works ``groups`` times per round on its ``ceil(L / pp)``
    layers, and a round is no shorter than one pass: ``max(1, groups x ceil(L / pp) / L)``
    (1 for even stages with at most ``pp`` micro-batches; uneven stages wait for the
    fullest)."""
    return max(1.0, groups * stage_layers(arch, sh.pp) / arch.n_layers)


def replica_system(hw: HardwareSpec, sh: Sharding, system: Any = None) -> Any:
    """The system one replica of ``sh`` runs on: ``system`` (its device must be ``hw`` and it
    must have the ``tp x pp`` devices), else ``tp x pp`` devices of ``hw`` in one node
    (``hw_catalog.systems.system_from_device``, nodes of 8 beyond that); None on one device
    without a system."""
    if system is None:
        if sh.trivial:
            return None
        return system_from_device(hw, sh.devices)
    if system.device != hw.id:
        raise PredictionError(f"system {system.id!r} is made of {system.device}, not {hw.id}; "
                              f"predict on {system.device} or choose a system of {hw.id}")
    if sh.devices > system.n_devices:
        raise ParallelPlanError(f"tp={sh.tp} x pp={sh.pp} = {sh.devices} devices exceed the "
                                f"{system.n_devices} of system {system.id!r}; lower tp or pp, "
                                "or choose a larger system")
    return system
