"""Collectives of a training plan's groups, timed as ``sharding.rank_of`` places the ranks.

Group (ranks, stride): ``tp`` (tp, 1), ``dp`` (dp, tp), ``ep`` (ep, 1), ``pp`` one send/recv
pair of adjacent stages (2, tp dp). ``sharding.group_layout`` gives the ranks per node; a
plan's groups of one kind run at once, so every device of a node shares its NICs
(``concurrent_per_node = devices_per_node``). Times (s) from
``collectives.collective_time_s``; a group of one rank costs 0.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from roofcast.predictor.collectives import collective_time_s
from roofcast.predictor.parallel.types import GROUPS, ParallelPlan, ParallelPlanError
from roofcast.predictor.sharding import group_layout


def group_stride(group: str, plan: ParallelPlan) -> tuple[int, int]:
    """(ranks, stride between consecutive ranks) of one ``group`` of ``plan``; ``pp`` is one
    send/recv pair of adjacent stages."""
    if group not in GROUPS:
        raise ParallelPlanError(f"unknown communication group {group!r}; use {', '.join(GROUPS)}")
    return {
        "tp": (plan.tp, 1),
        "dp": (plan.dp, plan.tp),
        "pp": (min(plan.pp, 2), plan.tp * plan.dp),
        "ep": (plan.ep, 1),
    }[group]


@lru_cache(maxsize=65536)
def _timed(collective: str, size_bytes: float, n_ranks: int, rpn: int, system: Any) -> float:
    return collective_time_s(collective, size_bytes, n_ranks, system, ranks_per_node=rpn,
                             concurrent_per_node=system.devices_per_node)


def group_time_s(collective: str, size_bytes: float, group: str, plan: ParallelPlan,
                 system: Any) -> float:
    """Time (s) of one ``collective`` of ``size_bytes`` per rank over ``plan``'s ``group``
    (``tp``, ``dp``, ``pp`` — a send/recv between adjacent stages —, ``ep``) on ``system``,
    ranks placed as the module docstring says; 0 for a group of one rank or 0 bytes."""
    n, stride = group_stride(group, plan)
    if n <= 1 or size_bytes <= 0:
        return 0.0
    _, rpn = group_layout(n, stride, system.devices_per_node)
    return _timed(collective, float(size_bytes), n, rpn, system)


def crosses_nodes(group: str, plan: ParallelPlan, system: Any) -> bool:
    """Whether one ``group`` of ``plan`` spans more than one node."""
    n, stride = group_stride(group, plan)
    return n > 1 and group_layout(n, stride, system.devices_per_node)[0] > 1

