"""``collective_time_s``: measured curve where there is one, else the fitted step model.

``system`` is duck-typed (``hw_catalog.system.SystemSpec`` or a stand-in): ``fabric.kind``,
``fabric.link_GBps`` (per-device, per-direction, GB/s), ``fabric.latency_us`` (per hop),
``devices_per_node``, ``nodes``, ``nic`` (``GBps`` per NIC per direction, ``count_per_node``,
``latency_us``; may be ``None`` on one node), optionally ``id`` and ``measured_as`` (names of
measured curves in ``curves.csv`` that describe this very system).

Ranks are packed onto nodes: ``per_node = min(n_ranks, devices_per_node)``. A phase on the node's
fabric runs at ``fabric_GBps`` (``FABRIC_BANDWIDTH``: NVLink pairs carry only 2 ranks; wider
groups cross PCIe), an inter-node phase at the rank's NIC share
``nic.GBps x nic.count_per_node / per_node``. Time of one algorithm =
sum over phases of ``steps x (latency_us + step_overhead_us) x 1e-6
+ wire_bytes / (GBps x 1e9 x efficiency(size))``; the fastest applicable algorithm wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from roofcast.predictor.collectives.curves import measured_time_s
from roofcast.predictor.collectives.params import FabricParams, load_params
from roofcast.predictor.collectives.steps import ALGORITHMS, COLL, INTER, Layout, Phase
from roofcast.predictor.errors import PredictionError

PCIE4_X16_GBPS = 32.0  # PCIe 4.0 x16 per direction (16 GT/s x 16 lanes, 128b/130b)
NIC_KIND = "nic"


def _nvlink_pairs_GBps(fabric: Any, per_node: int) -> float:
    """A bridge joins two devices; a group of more crosses PCIe between the pairs
    (optional ``fabric.pcie_GBps``, else PCIe 4.0 x16)."""
    pcie = getattr(fabric, "pcie_GBps", None) or PCIE4_X16_GBPS
    return fabric.link_GBps if per_node <= 2 else min(fabric.link_GBps, pcie)


FABRIC_BANDWIDTH: dict[str, Callable[[Any, int], float]] = {
    "nvlink-pairs": _nvlink_pairs_GBps,
}


def params_key(kind: str, protocol: str) -> str:
    """``nvswitch`` for collective kernels, ``nvswitch/p2p`` for send/recv-based transfers."""
    return kind if protocol == COLL else f"{kind}/{protocol}"


def _check(collective: str, size_bytes: float, n_ranks: int, system: Any) -> int:
    if collective not in ALGORITHMS:
        raise PredictionError(f"unknown collective {collective!r}; use one of {', '.join(ALGORITHMS)}")
    if size_bytes < 0:
        raise PredictionError(f"collective size must be >= 0 bytes, got {size_bytes}")
    devices = system.devices_per_node * system.nodes
    if not 2 <= n_ranks <= devices:
        raise PredictionError(f"{collective} needs 2..{devices} ranks on this system "
                              f"({system.nodes} node(s) x {system.devices_per_node}), got {n_ranks}")
    per_node = min(n_ranks, system.devices_per_node)
    if n_ranks % per_node:
        raise PredictionError(f"{n_ranks} ranks do not fill whole nodes of {per_node} devices; "
                              "use a multiple of the devices per node")
    if n_ranks > per_node and system.nic is None:
        raise PredictionError(f"{n_ranks} ranks span nodes but the system has no NIC described")
    return per_node


def _phase_s(phase: Phase, size_bytes: float, system: Any, per_node: int,
             params: Mapping[str, FabricParams]) -> float:
    if phase.level == INTER:
        kind, lat_us = NIC_KIND, system.nic.latency_us
        GBps = system.nic.GBps * system.nic.count_per_node / max(per_node, system.nic.count_per_node)
    else:
        kind, lat_us = system.fabric.kind, system.fabric.latency_us
        rule = FABRIC_BANDWIDTH.get(kind)
        GBps = rule(system.fabric, per_node) if rule else system.fabric.link_GBps
    kind = params_key(kind, phase.protocol)
    if kind not in params:
        raise PredictionError(f"no fitted collective parameters for fabric kind {kind!r}; "
                              f"fitted kinds: {', '.join(sorted(params))}")
    p = params[kind]
    bw = GBps * 1e9 * p.efficiency(max(size_bytes, 1.0))
    return phase.steps * (lat_us + p.step_overhead_us) * 1e-6 + phase.wire_bytes / bw


def model_time_s(collective: str, size_bytes: float, n_ranks: int, system: Any,
                 params: Mapping[str, FabricParams] | None = None) -> float:
    """The step model's time (s): fastest applicable algorithm, no measured curve consulted."""
    per_node = _check(collective, size_bytes, n_ranks, system)
    params = load_params() if params is None else params
    lay = Layout(n_ranks, per_node, system.fabric.kind, system.fabric.link_GBps)
    times = []
    for algo in ALGORITHMS[collective].values():
        phases = algo(float(size_bytes), lay)
        if phases is not None:
            times.append(sum(_phase_s(ph, size_bytes, system, per_node, params) for ph in phases))
    return min(times)


def measured_names(system: Any) -> tuple[str, ...]:
    ids = (getattr(system, "id", None),)
    return tuple(n for n in ids + tuple(getattr(system, "measured_as", ()) or ()) if n)


def collective_time_s(collective: str, size_bytes: float, n_ranks: int, system: Any) -> float:
    """Time (s) of one ``collective`` of ``size_bytes`` per rank over ``n_ranks`` of ``system``.

    A measured curve for exactly this system (``id`` / ``measured_as``), collective, rank count
    and ranks per node is interpolated log-log; otherwise the fitted step model answers.
    """
    per_node = _check(collective, size_bytes, n_ranks, system)
    measured = measured_time_s(measured_names(system), collective, size_bytes, n_ranks, per_node)
    return measured if measured is not None else model_time_s(collective, size_bytes, n_ranks, system)
