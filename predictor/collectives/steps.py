"""Algorithm step models: what each collective algorithm puts on which links.

A collective of ``size_bytes`` (the per-rank buffer) over ``n`` ranks, ``r`` per node, is one or
more ``Phase`` s of ``steps`` latency hops and ``wire_bytes`` per rank; e.g. ring all-reduce
2(n-1) steps, 2(n-1)/n x size; tree 2 log2(n) steps, 2 x size; NVLS 2 steps, size; all-gather /
reduce-scatter / all-to-all n-1 steps, (n-1)/n x size; send/recv 1 step, size; across nodes
NCCL's ring at ``streams = r`` NIC shares. Each algorithm is a registered function returning its
phases or ``None`` where it does not apply; the fastest applicable one wins, as NCCL's tuner
picks. Engine all-reduce kernels (``ENGINE_ALGORITHMS``: one-shot, two-shot) run on a full
NVLink mesh of one node (protocol ``custom``), their efficiency evaluated at each step's bytes.
Every algorithm's byte counts and the evidence: ``docs/design/fitted.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

INTRA = "intra"
INTER = "inter"
COLL = "coll"
P2P = "p2p"  # point-to-point transfers reach a larger fraction of the link than reductions
NVLS = "nvls"  # in-switch reduction: its own achievable fraction of the link
CUSTOM = "custom"  # the engines' own all-reduce kernels: their own overhead and fraction
NVLS_MIN_LINK_GBPS = 450.0  # NVLink4 (H100) and later: NVSwitch gen3 reduces in the switch
NVLS_KINDS = frozenset({"nvswitch", "nvlink-domain"})


@dataclass(frozen=True)
class Phase:
    """One phase: ``steps`` latency hops and ``wire_bytes`` sent per rank over ``level`` links."""

    steps: float
    wire_bytes: float
    level: str  # INTRA (the node's fabric) or INTER (the NICs)
    protocol: str = COLL  # COLL (NCCL kernels), P2P (send/recv, all-to-all), NVLS or CUSTOM
    streams: int = 1  # INTER: NIC shares of one node carrying the phase in parallel (ring: r)
    #: bytes the efficiency is evaluated at (None: the collective's size, as the fit does).
    #: An engine kernel's step is one bulk transfer -- its n-1 peer reads are issued together --
    #: so it pays the efficiency ramp once per step, at the step's bytes.
    eff_bytes: float | None = None


@dataclass(frozen=True)
class Layout:
    """Ranks of one collective: ``n`` in all, ``per_node`` on each node, on fabric ``kind``."""

    n: int
    per_node: int
    kind: str
    link_GBps: float  # noqa: N815 (unit suffix)

    @property
    def nodes(self) -> int:
        return self.n // self.per_node


Algorithm = Callable[[float, Layout], "tuple[Phase, ...] | None"]
ALGORITHMS: dict[str, dict[str, Algorithm]] = {}


def register(collective: str, name: str) -> Callable[[Algorithm], Algorithm]:
    def deco(fn: Algorithm) -> Algorithm:
        ALGORITHMS.setdefault(collective, {})[name] = fn
        return fn
    return deco


def ring_all_reduce_phase(size: float, n: int, level: str) -> Phase:
    return Phase(2 * (n - 1), 2 * (n - 1) / n * size, level)


def ring_gather_phase(size: float, n: int, level: str) -> Phase:
    return Phase(n - 1, (n - 1) / n * size, level)


def _single_node(lay: Layout) -> bool:
    return lay.nodes == 1


@register("all_reduce", "ring")
def _ar_ring(size: float, lay: Layout) -> tuple[Phase, ...]:
    if _single_node(lay):
        return (ring_all_reduce_phase(size, lay.n, INTRA),)
    return (Phase(2 * (lay.n - 1), 2 * (lay.n - 1) / lay.n * size, INTER, streams=lay.per_node),)


@register("all_reduce", "tree")
def _ar_tree(size: float, lay: Layout) -> tuple[Phase, ...] | None:
    return (Phase(2 * math.ceil(math.log2(lay.n)), 2 * size, INTRA),) if _single_node(lay) else None


@register("all_reduce", "nvls")
def _ar_nvls(size: float, lay: Layout) -> tuple[Phase, ...] | None:
    ok = _single_node(lay) and lay.kind in NVLS_KINDS and lay.link_GBps >= NVLS_MIN_LINK_GBPS
    return (Phase(2, size, INTRA, NVLS),) if ok else None


def _gather_like(size: float, lay: Layout) -> tuple[Phase, ...]:
    if _single_node(lay):
        return (ring_gather_phase(size, lay.n, INTRA),)
    return (Phase(lay.n - 1, (lay.n - 1) / lay.n * size, INTER, streams=lay.per_node),)


register("all_gather", "ring")(_gather_like)
register("reduce_scatter", "ring")(_gather_like)


@register("all_to_all", "pairwise")
def _a2a(size: float, lay: Layout) -> tuple[Phase, ...]:
    n, r = lay.n, lay.per_node
    phases = [Phase(r - 1, (r - 1) / n * size, INTRA, P2P)] if r > 1 else []
    if n > r:
        phases.append(Phase(n - r, (n - r) / n * size, INTER, P2P))
    return tuple(phases)


@register("send_recv", "direct")
def _send_recv(size: float, lay: Layout) -> tuple[Phase, ...]:
    return (Phase(1, size, INTRA if lay.per_node >= 2 else INTER, P2P),)


COLLECTIVES = tuple(ALGORITHMS)

# --------------------------------------------------------------------- engine all-reduce kernels
FULL_MESH_MAX_RANKS: dict[str, int | None] = {
    "nvswitch": None, "nvlink-domain": None, "nvlink-pairs": 2,
}
"""Fabric kind -> the largest group on one node whose ranks all reach each other over a direct
NVLink peer path (None: any group of the node); kinds not listed have none (PCIe): vLLM's
``full_nvlink`` / TensorRT-LLM's NVLink check."""

ENGINE_ALGORITHMS: dict[str, dict[str, Algorithm]] = {}


def register_engine(collective: str, name: str) -> Callable[[Algorithm], Algorithm]:
    def deco(fn: Algorithm) -> Algorithm:
        ENGINE_ALGORITHMS.setdefault(collective, {})[name] = fn
        return fn
    return deco


def full_mesh(lay: Layout) -> bool:
    """One node, and every pair of its ranks joined by NVLink (:data:`FULL_MESH_MAX_RANKS`)."""
    if not _single_node(lay) or lay.kind not in FULL_MESH_MAX_RANKS:
        return False
    limit = FULL_MESH_MAX_RANKS[lay.kind]
    return limit is None or lay.n <= limit


@register_engine("all_reduce", "one_shot")
def _ar_one_shot(size: float, lay: Layout) -> tuple[Phase, ...] | None:
    if not full_mesh(lay):
        return None
    wire = (lay.n - 1) * size
    return (Phase(1, wire, INTRA, CUSTOM, eff_bytes=wire),)


@register_engine("all_reduce", "two_shot")
def _ar_two_shot(size: float, lay: Layout) -> tuple[Phase, ...] | None:
    if not full_mesh(lay):
        return None
    step = (lay.n - 1) / lay.n * size
    return (Phase(2, 2 * step, INTRA, CUSTOM, eff_bytes=step),)
