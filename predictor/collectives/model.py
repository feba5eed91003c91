"""``collective_time_s``: measured curve where there is one, else the fitted step model.

``system``: a ``hw_catalog.system.SystemSpec`` (fabric kind, ``link_GBps`` per device per
direction, ``latency_us`` per hop, devices per node, nodes, NICs, optional ``measured_as``).
Ranks are packed onto nodes unless ``ranks_per_node`` says otherwise; a phase on the node's
fabric runs at the kind's bandwidth (``FABRIC_BANDWIDTH``), an inter-node phase at ``streams``
x the rank's NIC share. Time of one algorithm (s) =

    sum over phases of steps x (latency_us + step_overhead_us) x 1e-6
                       + wire_bytes / (GBps x 1e9 x efficiency(size))

and the fastest applicable algorithm wins. Kinds without curves borrow a fitted kind's
parameters (``PARAMS_FROM``). Rules and their evidence: ``docs/design/fitted.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from roofcast.hw_catalog import get_device
from roofcast.predictor.collectives.aic import AIC_SYSTEMS
from roofcast.predictor.collectives.curves import measured_time_s
from roofcast.predictor.collectives.params import FabricParams, load_params
from roofcast.predictor.collectives.steps import (
    ALGORITHMS,
    COLL,
    ENGINE_ALGORITHMS,
    INTER,
    Layout,
    Phase,
)
from roofcast.predictor.errors import PredictionError

NIC_KIND = "nic"


@cache
def host_link_GBps(device: str) -> float:
    """The catalog device's host link per direction, GB/s (``[interconnect] host_link_GBps``)."""
    spec = get_device(device)
    if not spec.host_link_Bps:
        raise PredictionError(f"device {device!r} lists no host link; NVLink pairs of it cannot "
                              "be costed beyond 2 ranks")
    return spec.host_link_Bps / 1e9


def _nvlink_pairs_GBps(system: Any, per_node: int) -> float:
    """A bridge joins two devices; a group of more crosses the device's host link (PCIe)
    between the pairs: ``min(link_GBps, host_link_GBps)``."""
    link = system.fabric.link_GBps
    return link if per_node <= 2 else min(link, host_link_GBps(system.device))


def _fully_connected_GBps(system: Any, per_node: int) -> float:
    """Infinity Fabric: ``link_GBps`` is the sum over a device's links, one to each of the
    ``devices_per_node - 1`` others, so a group of ``per_node`` ranks uses ``per_node - 1`` of them:
    ``link_GBps x (per_node - 1) / (devices_per_node - 1)`` (MI300X: 448 GB/s over 7 links, 64 to
    one peer)."""
    others = max(system.devices_per_node - 1, 1)
    return system.fabric.link_GBps * min(per_node - 1, others) / others


FABRIC_BANDWIDTH: dict[str, Callable[[Any, int], float]] = {
    "nvlink-pairs": _nvlink_pairs_GBps,
    "infinity-fabric": _fully_connected_GBps,
}
"""fabric kind -> bandwidth (GB/s per direction per rank) of a group of ``per_node`` ranks on
one node; kinds not listed run at ``fabric.link_GBps``."""

PARAMS_FROM: dict[str, str] = {
    "nvlink-domain": "nvswitch",
    "infinity-fabric": "nvswitch",
    "pcie-switch": "nvlink-pairs",
    "pcie-host": "nvlink-pairs",
}
"""Fabric kinds without measured curves of their own borrow a fitted kind's parameters:
``nvlink-domain`` (GB200 NVL72: the same NVSwitch + NVLS design one generation on) and
``infinity-fabric`` (point-to-point links, no curves: a guess) take ``nvswitch``'s; PCIe fabrics
take ``nvlink-pairs``' (its 4-rank curves are the only ones whose traffic crosses PCIe)."""


def params_key(kind: str, protocol: str) -> str:
    """``nvswitch`` for collective kernels, ``nvswitch/p2p`` for send/recv-based transfers; a
    kind listed in :data:`PARAMS_FROM` answers with the kind it borrows from."""
    kind = PARAMS_FROM.get(kind, kind)
    return kind if protocol == COLL else f"{kind}/{protocol}"


def _check_whole(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PredictionError(f"{name} must be a whole number >= 1, got {value!r}")


def _check(collective: str, size_bytes: float, n_ranks: int, system: Any,
           ranks_per_node: int | None = None) -> int:
    """Validate a request; return the ranks per node (``ranks_per_node``, else packed:
    ``min(n_ranks, devices_per_node)``)."""
    if collective not in ALGORITHMS:
        raise PredictionError(f"unknown collective {collective!r}; use one of "
                              f"{', '.join(ALGORITHMS)}")
    if size_bytes < 0:
        raise PredictionError(f"collective size must be >= 0 bytes, got {size_bytes}")
    devices = system.devices_per_node * system.nodes
    if not 2 <= n_ranks <= devices:
        raise PredictionError(f"{collective} needs 2..{devices} ranks on this system "
                              f"({system.nodes} node(s) x {system.devices_per_node}), "
                              f"got {n_ranks}")
    if ranks_per_node is None:
        per_node = min(n_ranks, system.devices_per_node)
    else:
        _check_whole("ranks_per_node", ranks_per_node)
        per_node = ranks_per_node
        if per_node > min(n_ranks, system.devices_per_node):
            raise PredictionError(
                f"ranks_per_node={per_node} is more than the group's {n_ranks} ranks or the "
                f"node's {system.devices_per_node} devices")
    if n_ranks % per_node:
        raise PredictionError(f"{n_ranks} ranks do not fill whole nodes of {per_node} ranks; "
                              "use a multiple of the ranks per node")
    if n_ranks // per_node > system.nodes:
        raise PredictionError(f"{n_ranks} ranks at {per_node} per node need {n_ranks // per_node} "
                              f"nodes; the system has {system.nodes}")
    if n_ranks > per_node and system.nic is None:
        raise PredictionError(f"{n_ranks} ranks span nodes but the system has no NIC described")
    return per_node


def nic_GBps_per_rank(system: Any, sharers: int) -> float:
    """A rank's share of its node's NICs when ``sharers`` devices of the node send at once:
    ``nic.GBps x nic.count_per_node / max(sharers, nic.count_per_node)`` (a rank uses at most
    one NIC's bandwidth; ranks beyond the NIC count share)."""
    nic = system.nic
    return nic.GBps * nic.count_per_node / max(sharers, nic.count_per_node)


def _phase_s(phase: Phase, size_bytes: float, system: Any, per_node: int, sharers: int,
             params: Mapping[str, FabricParams]) -> float:
    if phase.level == INTER:
        kind, lat_us = NIC_KIND, system.nic.latency_us
        GBps = nic_GBps_per_rank(system, sharers) * phase.streams
    else:
        kind, lat_us = system.fabric.kind, system.fabric.latency_us
        rule = FABRIC_BANDWIDTH.get(kind)
        GBps = rule(system, per_node) if rule else system.fabric.link_GBps
    key = params_key(kind, phase.protocol)
    if key not in params:
        raise PredictionError(f"no fitted collective parameters for fabric kind {kind!r}; "
                              f"fitted kinds: {', '.join(sorted(params))}")
    p = params[key]
    at = size_bytes if phase.eff_bytes is None else phase.eff_bytes
    bw = GBps * 1e9 * p.efficiency(max(at, 1.0))
    return phase.steps * (lat_us + p.step_overhead_us) * 1e-6 + phase.wire_bytes / bw


def _sharers(system: Any, per_node: int, concurrent_per_node: int | None) -> int:
    if concurrent_per_node is None:
        return per_node
    _check_whole("concurrent_per_node", concurrent_per_node)
    if not per_node <= concurrent_per_node <= system.devices_per_node:
        raise PredictionError(
            f"concurrent_per_node={concurrent_per_node} must lie between the group's {per_node} "
            f"ranks per node and the node's {system.devices_per_node} devices")
    return concurrent_per_node


def model_time_s(collective: str, size_bytes: float, n_ranks: int, system: Any,
                 params: Mapping[str, FabricParams] | None = None, *,
                 ranks_per_node: int | None = None,
                 concurrent_per_node: int | None = None) -> float:
    """The step model's time (s): fastest applicable algorithm, no measured curve consulted
    (arguments as :func:`collective_time_s`; ``params`` default: the fitted file)."""
    per_node = _check(collective, size_bytes, n_ranks, system, ranks_per_node)
    sharers = _sharers(system, per_node, concurrent_per_node)
    params = load_params() if params is None else params
    lay = Layout(n_ranks, per_node, system.fabric.kind, system.fabric.link_GBps)
    times = []
    for algo in ALGORITHMS[collective].values():
        phases = algo(float(size_bytes), lay)
        if phases is not None:
            times.append(sum(_phase_s(ph, size_bytes, system, per_node, sharers, params)
                             for ph in phases))
    return min(times)


def engine_time_s(collective: str, algorithm: str, size_bytes: float, n_ranks: int, system: Any,
                  params: Mapping[str, FabricParams] | None = None) -> float | None:
    """Time (s) of an engine's own ``algorithm`` kernel for ``collective`` (``steps``
    :data:`ENGINE_ALGORITHMS`: one-shot / two-shot all-reduce) over ``n_ranks`` packed ranks,
    timed by the step model with the fabric's fitted parameters; None where it does not run on
    this layout (more than one node, or ranks without direct NVLink peers). No measured curve:
    the curves are NCCL's."""
    algos = ENGINE_ALGORITHMS.get(collective, {})
    if algorithm not in algos:
        known = ", ".join(f"{c}/{a}" for c, d in ENGINE_ALGORITHMS.items() for a in d)
        raise PredictionError(f"no engine algorithm {collective}/{algorithm}; known: {known}")
    per_node = _check(collective, size_bytes, n_ranks, system)
    lay = Layout(n_ranks, per_node, system.fabric.kind, system.fabric.link_GBps)
    phases = algos[algorithm](float(size_bytes), lay)
    if phases is None:
        return None
    params = load_params() if params is None else params
    return sum(_phase_s(ph, size_bytes, system, per_node, per_node, params) for ph in phases)


def custom_all_reduce_s(size_bytes: float, n_ranks: int, system: Any,
                        params: Mapping[str, FabricParams] | None = None) -> float | None:
    """The fastest of the engines' all-reduce kernels (``engine_time_s`` over
    ``ENGINE_ALGORITHMS["all_reduce"]``); None where none runs on this layout."""
    times = [engine_time_s("all_reduce", a, size_bytes, n_ranks, system, params)
             for a in ENGINE_ALGORITHMS["all_reduce"]]
    times = [t for t in times if t is not None]
    return min(times) if times else None


def measured_names(system: Any) -> tuple[str, ...]:
    """Curve systems that measured ``system``: its id, its ``measured_as``, then the
    aiconfigurator tables laid out on it (``aic.AIC_SYSTEMS``)."""
    sid = getattr(system, "id", None)
    aic = tuple(name for name, on in AIC_SYSTEMS.values() if on == sid)
    return tuple(n for n in (sid, *(getattr(system, "measured_as", ()) or ()), *aic) if n)


def collective_time_s(collective: str, size_bytes: float, n_ranks: int, system: Any,
                      ranks_per_node: int | None = None, *,
                      concurrent_per_node: int | None = None) -> float:
    """Time (s) of one ``collective`` of ``size_bytes`` per rank over ``n_ranks`` of ``system``.

    size_bytes: the full buffer of one rank, as nccl-tests counts it: the all-reduce buffer;
        the all-gather *output* (n x the per-rank shard); the reduce-scatter *input* (n x the
        output shard); the all-to-all send buffer (all n chunks); the send/recv message.

    ranks_per_node: how the group is placed, e.g. 1 for a data-parallel group strided over
        nodes (4 ranks, one per node); None packs the ranks (``min(n_ranks, devices_per_node)``).
    concurrent_per_node: devices of one node sending over its NICs at the same time, this
        group's ranks included (None: this group's ranks per node). Pass
        ``system.devices_per_node`` when every device of the node runs the same collective in
        its own group at once (the DP groups of a TP x DP plan): each rank then gets
        ``nic total / devices_per_node`` (:func:`nic_GBps_per_rank`).

    A measured curve for exactly this system (``measured_names``), collective, rank count
    and ranks per node is interpolated log-log (not when other devices share the NICs: the
    curves were measured alone); otherwise the fitted step model answers.
    """
    per_node = _check(collective, size_bytes, n_ranks, system, ranks_per_node)
    sharers = _sharers(system, per_node, concurrent_per_node)
    shared_nic = n_ranks > per_node and sharers > per_node
    measured = None if shared_nic else measured_time_s(
        measured_names(system), collective, size_bytes, n_ranks, per_node)
    if measured is not None:
        return measured
    return model_time_s(collective, size_bytes, n_ranks, system, ranks_per_node=per_node,
                        concurrent_per_node=sharers)
