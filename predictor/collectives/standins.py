"""Stand-in descriptions of the systems behind the measured curves.

TO BE REPLACED by the systems catalog (``roofcast.hw_catalog.system``, issue 16): these carry
only what the step model reads (the contract's ``FabricSpec`` / ``NicSpec`` attributes) so the fit
and the leave-one-system-out benchmark can run before the catalog lands. Figures (per device,
per direction, decimal GB/s):

* A100 SXM, NVLink3 through NVSwitch gen2: 12 links x 25 GB/s = 300 GB/s (NVIDIA A100 datasheet:
  600 GB/s bidirectional). H100 / H200 SXM, NVLink4 through NVSwitch gen3: 18 x 25 = 450 GB/s
  (H100 datasheet: 900 GB/s bidirectional).
* A100 PCIe / H100 NVL with NVLink bridge pairs: 600 GB/s bidirectional -> 300 per direction
  (A100 PCIe datasheet; H100 NVL datasheet lists 600 GB/s); A40 NVLink bridge: 112.5 GB/s
  bidirectional -> 56.25 per direction (A40 datasheet).
* NICs: DGX A100 / ND A100 v4: 8 x HDR InfiniBand 200 Gb/s = 25 GB/s each; DGX H100 / ND H100 v5 /
  ND H200 v5: 8 x NDR 400 Gb/s = 50 GB/s each. The Vidur NVLink-pair nodes' network is not
  published; 1 x 25 GbE (3.125 GB/s) is a guess, marked as such.
* Vidur's DGX nodes' network is not published either: their cross-node curves (ranks per node
  below the rank count) are reported apart from the rest in the benchmark.
* Latencies are nominal hop figures (NVLink/NVSwitch 2 us, InfiniBand 5 us, Ethernet 10 us); the
  fit's ``step_overhead_us`` absorbs what NCCL adds per step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StandInFabric:
    kind: str
    link_GBps: float  # noqa: N815 (unit suffix)
    latency_us: float
    pcie_GBps: float | None = None  # noqa: N815 (unit suffix); host link per device (PCIe 4.0 x16 = 32, 5.0 x16 = 64)


@dataclass(frozen=True)
class StandInNic:
    count_per_node: int
    GBps: float
    latency_us: float


@dataclass(frozen=True)
class StandInSystem:
    id: str
    devices_per_node: int
    nodes: int
    fabric: StandInFabric
    nic: StandInNic | None
    group: str  # systems of the same hardware share a group (left out together)
    nic_published: bool  # False: the measured nodes' network is not published (NIC is a guess)
    measured_as: tuple[str, ...] = ()


_NVS_A100 = StandInFabric("nvswitch", 300.0, 2.0)
_NVS_H100 = StandInFabric("nvswitch", 450.0, 2.0)
_NVL_H100 = StandInFabric("nvlink-pairs", 300.0, 2.0, pcie_GBps=64.0)  # H100 NVL: PCIe 5.0 x16
_HDR = StandInNic(8, 25.0, 5.0)
_NDR = StandInNic(8, 50.0, 5.0)
_ETH_GUESS = StandInNic(1, 3.125, 10.0)

MEASURED_SYSTEMS: dict[str, StandInSystem] = {s.id: s for s in (
    StandInSystem("a100_dgx", 8, 2, _NVS_A100, _HDR, "a100-nvswitch", False),
    StandInSystem("azure_nd_a100_v4", 8, 1, _NVS_A100, _HDR, "a100-nvswitch", True),
    StandInSystem("h100_dgx", 8, 2, _NVS_H100, _NDR, "h100-nvswitch", False),
    StandInSystem("azure_nd_h100_v5", 8, 1, _NVS_H100, _NDR, "h100-nvswitch", True),
    StandInSystem("azure_nd_h200_v5", 8, 1, _NVS_H100, _NDR, "h200-nvswitch", True),
    StandInSystem("a100_pairwise_nvlink", 4, 2, StandInFabric("nvlink-pairs", 300.0, 2.0), _ETH_GUESS,
                  "a100-nvlink-pairs", False),
    StandInSystem("h100_pairwise_nvlink", 4, 2, _NVL_H100, _ETH_GUESS, "h100-nvlink-pairs", False),
    StandInSystem("a40_pairwise_nvlink", 2, 2, StandInFabric("nvlink-pairs", 56.25, 2.0), _ETH_GUESS,
                  "a40-nvlink-pairs", False),
)}
