"""Multi-device systems: n devices of one catalog id, their fabric, NICs and nodes.

A system is data (``hw_catalog/systems/*.toml``, loaded by :mod:`roofcast.hw_catalog.systems`).
Bandwidths are decimal GB/s (1e9 bytes/s) **per direction**; latencies are microseconds per hop
as a collective library (NCCL/RCCL) sees it — typical documented values, not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

FABRIC_KINDS: tuple[str, ...] = (
    "nvswitch", "nvlink-pairs", "pcie-switch", "pcie-host", "infinity-fabric", "nvlink-domain",
)
"""Intra-node fabrics: ``nvswitch`` (every GPU at full link speed to every other through
NVSwitch chips), ``nvlink-pairs`` (NVLink bridges between pairs; other pairs over PCIe),
``pcie-switch`` (peer-to-peer through a PCIe switch), ``pcie-host`` (through the host root
complex / host memory, no peer-to-peer), ``infinity-fabric`` (AMD, fully connected
point-to-point links), ``nvlink-domain`` (one NVLink domain spanning several trays/nodes)."""


@dataclass(frozen=True)
class FabricSpec:
    """The intra-node fabric.

    kind: one of :data:`FABRIC_KINDS`.
    link_GBps: per-device unidirectional bandwidth into the fabric, GB/s (decimal); for a
        fully connected point-to-point fabric the sum over the device's links.
    latency_us: per-hop latency, microseconds (typical, not measured).
    """

    kind: str
    link_GBps: float  # noqa: N815 (unit suffix)
    latency_us: float


@dataclass(frozen=True)
class NicSpec:
    """Scale-out network interfaces of one node.

    count_per_node: NICs per node.
    GBps: bandwidth per NIC per direction, GB/s (decimal; 400 Gb/s = 50 GB/s).
    latency_us: per-hop latency across the network, microseconds (typical, not measured).
    """

    count_per_node: int
    GBps: float
    latency_us: float


@dataclass(frozen=True)
class SystemSpec:
    """``nodes`` x ``devices_per_node`` devices of catalog device ``device``.

    fabric: the intra-node fabric; nic: the scale-out NICs (None: a single box without a
    documented scale-out network; then ``nodes`` is 1). ``aliases`` and ``measured_as`` (names
    of the measured collective curves in ``shared/data/collectives`` this system stands for)
    are catalog extras beyond the contract fields.
    """

    id: str
    name: str
    device: str
    devices_per_node: int
    nodes: int
    fabric: FabricSpec
    nic: NicSpec | None
    sources: tuple[str, ...]
    notes: str
    aliases: tuple[str, ...] = ()
    measured_as: tuple[str, ...] = ()

    @property
    def n_devices(self) -> int:
        """Devices in the whole system: ``nodes * devices_per_node``."""
        return self.nodes * self.devices_per_node

    @property
    def nic_GBps_per_node(self) -> float:
        """Scale-out bandwidth of one node per direction, GB/s (0 without NICs)."""
        return self.nic.count_per_node * self.nic.GBps if self.nic else 0.0
