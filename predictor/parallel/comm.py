"""Collectives of a plan's groups, timed as the plan places its ranks on the system.

**Placement** (Megatron-LM's rank order, Narayanan et al. 2021 §3.3): global rank
``r = (stage * dp + replica) * tp + tensor_rank`` — tensor ranks adjacent (inside a node while
``tp <= devices_per_node``), data-parallel replicas next (stride ``tp``), pipeline stages
outermost (stride ``tp * dp``). Expert ranks are ``ep`` adjacent ranks of a stage's
``dp x tp`` block (stride 1, like the tensor group). Nodes hold ``devices_per_node``
consecutive ranks.

A group of ``n`` ranks with stride ``s`` then has ``ranks_per_node`` members on each node it
touches (``group_layout``); a pipeline send/recv pairs two adjacent stages (stride ``tp * dp``).
A plan's groups of one kind partition all devices and run their collective at the same time
(all ``tp`` data-parallel groups reduce together; every device of a stage sends to the next), so
every device of a node uses the node's NICs at once: ``concurrent_per_node =
devices_per_node``, and a strided group's ranks get ``NIC total / devices_per_node`` each.

Times come from ``predictor.collectives.collective_time_s(..., ranks_per_node=,
concurrent_per_node=)`` (a measured curve for that placement when the NICs are not shared, else
the fitted step model). A group of one rank costs 0.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from roofcast.predictor.collectives import collective_time_s
from roofcast.predictor.parallel.types import GROUPS, ParallelPlan, ParallelPlanError


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


@lru_cache(maxsize=4096)
def group_layout(n_ranks: int, stride: int, devices_per_node: int) -> tuple[int, int]:
    """(nodes touched, ranks per node) of the group ``0, s, 2s, ...`` (n ranks, stride s) on
    nodes of ``devices_per_node`` consecutive ranks. Uneven spreads (a stride that does not
    tile the nodes) take the largest divisor of ``n`` not above the fullest node's count."""
    per_node: dict[int, int] = {}
    for k in range(n_ranks):
        node = (k * stride) // devices_per_node
        per_node[node] = per_node.get(node, 0) + 1
    fullest = max(per_node.values())
    rpn = max(d for d in range(1, fullest + 1) if n_ranks % d == 0)
    return n_ranks // rpn, rpn


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

