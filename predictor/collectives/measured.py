"""The catalog systems behind the measured curves, laid out as each curve was measured.

Every ``system`` name in ``curves.csv`` is listed in exactly one catalog system's
``measured_as`` (``hw_catalog/systems/*.toml``); that system describes the hardware. Curves of
one catalog system form one hardware group (Vidur's DGX A100 and Azure's ND A100 v4 are both
``dgx-a100``), left out together by the benchmark.

Cross-node curves need the measured nodes' network. Vidur (microsoft/vidur
``data/profiling/network``) does not publish it (:data:`NETWORK_UNPUBLISHED`): such curves are
laid out on the catalog system's NICs where it has some (DGX/HGX: one InfiniBand NIC per GPU),
else on :data:`GUESSED_NIC`, and the benchmark reports them apart from the rest.
"""

from __future__ import annotations

import dataclasses
from functools import cache

from roofcast.hw_catalog.system import NicSpec, SystemSpec
from roofcast.hw_catalog.systems import list_systems
from roofcast.predictor.errors import PredictionError

NETWORK_UNPUBLISHED = frozenset({"a100_dgx", "h100_dgx", "a100_pairwise_nvlink",
                                 "h100_pairwise_nvlink", "a40_pairwise_nvlink"})
"""Curve systems whose nodes' network the source does not publish (all of Vidur's)."""

GUESSED_NIC = NicSpec(count_per_node=1, GBps=3.125, latency_us=10.0)
"""A guess for the NVLink-pair nodes' network (1 x 25 GbE per node): their 2-node send/recv
curves reach 2-3 GB/s. Used only to lay out those curves; no catalog system carries it."""


@cache
def catalog_system(curve_system: str) -> SystemSpec:
    """The catalog system whose ``measured_as`` names ``curve_system``."""
    hits = [s for s in list_systems() if curve_system in s.measured_as]
    if len(hits) != 1:
        found = ", ".join(s.id for s in hits) or "none"
        raise PredictionError(f"measured curves {curve_system!r} must be named in the measured_as "
                              f"of exactly one catalog system; found {found}")
    return hits[0]


def measured_layout(curve_system: str, n_ranks: int, per_node: int) -> SystemSpec:
    """The catalog system of ``curve_system`` with the nodes the measurement used
    (``n_ranks / per_node``) and, across nodes, a NIC (its own, else :data:`GUESSED_NIC`)."""
    base = catalog_system(curve_system)
    nodes = max(base.nodes, n_ranks // per_node)
    nic = base.nic or (GUESSED_NIC if nodes > 1 else None)
    return dataclasses.replace(base, nodes=nodes, nic=nic)


def group(curve_system: str) -> str:
    """The hardware group of a curve system: its catalog system's id."""
    return catalog_system(curve_system).id


def network_published(curve_system: str) -> bool:
    """False where the measured nodes' network is not published (their cross-node curves are
    laid out on catalog or guessed NICs)."""
    return curve_system not in NETWORK_UNPUBLISHED
