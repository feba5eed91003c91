"""The catalog systems behind the measured curves, laid out as each curve was measured.

Every ``system`` name in ``curves.csv`` is listed in exactly one catalog system's
``measured_as`` (``hw_catalog/systems/*.toml``); that system describes the hardware. Curves of
one catalog system form one hardware group (Vidur's DGX A100 and Azure's ND A100 v4 are both
``dgx-a100``), left out together by the benchmark.

Cross-node curves need the measured nodes' network. Vidur (microsoft/vidur
``data/profiling/network``) does not publish it (:data:`NETWORK_UNPUBLISHED`): such curves are
laid out on the catalog system's NICs where it has some (DGX/HGX: one InfiniBand NIC per GPU),
else on :data:`GUESSED_NIC`, and the benchmark reports them apart from the rest. Or (the
benchmark's second figure) the network is *probed*: the NIC bandwidth is the one that
reproduces the system's own 2-node send/recv curve at its largest size (:func:`probed_nic`);
the other cross-node curves are then predicted and the probe curve is not scored.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pandas as pd

from roofcast.hw_catalog.system import NicSpec, SystemSpec
from roofcast.hw_catalog.systems import get_system, list_systems
from roofcast.predictor.collectives.aic import AIC_SYSTEMS
from roofcast.predictor.collectives.params import FabricParams
from roofcast.predictor.errors import PredictionError

NETWORK_UNPUBLISHED = frozenset({"a100_dgx", "h100_dgx", "a100_pairwise_nvlink",
                                 "h100_pairwise_nvlink", "a40_pairwise_nvlink"})
"""Curve systems whose nodes' network the source does not publish (all of Vidur's)."""

GUESSED_NIC = NicSpec(count_per_node=1, GBps=3.125, latency_us=10.0)
"""A guess for the NVLink-pair nodes' network (1 x 25 GbE per node): their 2-node send/recv
curves reach 2-3 GB/s. Used only to lay out those curves; no catalog system carries it."""


@cache
def catalog_system(curve_system: str) -> SystemSpec:
    """The catalog system whose ``measured_as`` names ``curve_system`` (aiconfigurator's curves:
    the system ``aic.AIC_SYSTEMS`` names)."""
    aic = dict(AIC_SYSTEMS.values())
    if curve_system in aic:
        return get_system(aic[curve_system])
    hits = [s for s in list_systems() if curve_system in s.measured_as]
    if len(hits) != 1:
        found = ", ".join(s.id for s in hits) or "none"
        raise PredictionError(f"measured curves {curve_system!r} must be named in the measured_as "
                              f"of exactly one catalog system; found {found}")
    return hits[0]


def measured_layout(curve_system: str, n_ranks: int, per_node: int,
                    nic: NicSpec | None = None) -> SystemSpec:
    """The catalog system of ``curve_system`` with the nodes the measurement used
    (``n_ranks / per_node``) and, across nodes, a NIC (``nic``, else its own, else
    :data:`GUESSED_NIC`)."""
    base = catalog_system(curve_system)
    nodes = max(base.nodes, n_ranks // per_node)
    nic = nic or base.nic or (GUESSED_NIC if nodes > 1 else None)
    return dataclasses.replace(base, nodes=nodes, nic=nic)


def group(curve_system: str) -> str:
    """The hardware group of a curve system: its catalog system's id."""
    return catalog_system(curve_system).id


def network_published(curve_system: str) -> bool:
    """False where the measured nodes' network is not published (their cross-node curves are
    laid out on catalog or guessed NICs)."""
    return curve_system not in NETWORK_UNPUBLISHED


# ---------------------------------------------------------------------------- network probes
PROBE_CURVE = ("send_recv", 2, 1)
"""(collective, n_ranks, ranks_per_node) of the curve that isolates a network: a transfer
between one rank on each of two nodes."""


def probe_points(curves: pd.DataFrame, max_bytes: float) -> dict[str, tuple[float, float]]:
    """For each curve system whose network is not published: (size_bytes, time_s) of its
    :data:`PROBE_CURVE` at the largest measured size up to ``max_bytes``."""
    collective, n, per_node = PROBE_CURVE
    rows = curves[(curves.collective == collective) & (curves.n_ranks == n)
                  & (curves.ranks_per_node == per_node) & (curves.size_bytes <= max_bytes)
                  & ~curves.system.map(network_published)]
    largest = rows.sort_values("size_bytes").groupby("system").last()
    return {s: (float(r.size_bytes), float(r.time_s)) for s, r in largest.iterrows()}


def probed_nic(curve_system: str, probe: tuple[float, float], p2p: FabricParams) -> NicSpec:
    """The NIC that makes the step model's 2-node send/recv reproduce ``probe`` (size, time):
    ``GBps = size / ((time - (latency + step_overhead) x 1e-6) x efficiency(size)) / 1e9`` with
    the ``nic/p2p`` parameters ``p2p``; count and latency of the catalog NIC (else the guess)."""
    base = catalog_system(curve_system).nic or GUESSED_NIC
    size, time_s = probe
    wire_s = time_s - (base.latency_us + p2p.step_overhead_us) * 1e-6
    if wire_s <= 0:
        raise PredictionError(f"{curve_system}: its 2-node send/recv of {size:.0f} B takes "
                              f"{time_s:.3g} s, less than the model's latency; cannot probe")
    return dataclasses.replace(base, GBps=size / (wire_s * p2p.efficiency(size)) / 1e9)
