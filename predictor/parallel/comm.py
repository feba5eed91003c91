"""Collectives of a plan's groups, timed as the plan places its ranks on the system.

**Placement** (Megatron-LM's rank order, Narayanan et al. 2021 §3.3): global rank
``r = (stage * dp + replica) * tp + tensor_rank`` — tensor ranks adjacent (inside a node while
``tp <= devices_per_node``), data-parallel replicas next (stride ``tp``), pipeline stages
outermost (stride ``tp * dp``). Expert ranks are ``ep`` adjacent ranks of a stage's
``dp x tp`` block (stride 1, like the tensor group). Nodes hold ``devices_per_node``
consecutive ranks.

A group of ``n`` ranks with stride ``s`` then has ``ranks_per_node`` members on each node it
touches (``group_layout``); a pipeline send/recv pairs two adjacent stages (stride ``tp * dp``).
Every group of a kind runs its collective at the same time as the others (all ``tp`` data
groups reduce together), so a strided group shares the node's NICs with the
``devices_per_node / ranks_per_node`` other groups on that node: its ranks get the node's NIC
bandwidth / ``devices_per_node`` each — what ``collective_time_s`` gives a packed group, where
every rank of a full node uses its own share.

Times come from ``predictor.collectives.collective_time_s`` (measured curve, else the fitted step
model). When it takes ``ranks_per_node=`` the strided layout is passed as such; otherwise the
strided group is timed on an equivalent system of ``ranks_per_node`` devices per node whose
NIC bandwidth per device is the real node's per-device share (same fabric, same latencies).
A group of one rank costs 0.
"""

from __future__ import annotations

import dataclasses
import inspect
from functools import lru_cache
from typing import Any

from roofcast.predictor.collectives import collective_time_s
from roofcast.predictor.parallel.types import GROUPS, ParallelPlan, ParallelPlanError

_TAKES_RANKS_PER_NODE = "ranks_per_node" in inspect.signature(collective_time_s).parameters


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


def _strided_system(system: Any, rpn: int) -> Any:
    """The system as a strided group sees it: nodes of ``rpn`` of its ranks, each rank with the
    real node's per-device NIC share (see module docstring)."""
    nic = system.nic
    if nic is not None:
        per_device = nic.GBps * nic.count_per_node / system.devices_per_node
        nic = dataclasses.replace(nic, count_per_node=1, GBps=per_device * rpn)
    return dataclasses.replace(system, devices_per_node=rpn, nodes=system.n_devices // rpn,
                               nic=nic)


@lru_cache(maxsize=65536)
def _timed(collective: str, size_bytes: float, n_ranks: int, rpn: int, system: Any) -> float:
    packed = min(n_ranks, system.devices_per_node)
    if rpn == packed:
        return collective_time_s(collective, size_bytes, n_ranks, system)
    if _TAKES_RANKS_PER_NODE:
        return collective_time_s(collective, size_bytes, n_ranks, system, ranks_per_node=rpn)
    return collective_time_s(collective, size_bytes, n_ranks, _strided_system(system, rpn))


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

