"""Ad-hoc systems of n catalog devices (system_from_device) and resolve_system's one-way rule."""

from __future__ import annotations

import pytest

from roofcast.hw_catalog import get_device
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.system import FabricSpec, NicSpec
from roofcast.hw_catalog.systems import get_system, resolve_system, system_from_device


@pytest.mark.parametrize(("device", "n", "fabric"), [
    ("a100-40gb-sxm", 8, FabricSpec("nvswitch", 300.0, 2.0)),  # 600 GB/s bidirectional NVLink 3
    ("a100-40gb-sxm", 2, FabricSpec("nvswitch", 300.0, 2.0)),  # an SXM part sits on NVSwitch
    ("v100-sxm2-32gb", 4, FabricSpec("nvswitch", 150.0, 2.0)),
    ("a100-40gb-pcie", 4, FabricSpec("nvlink-pairs", 300.0, 2.0)),  # bridge pairs
    ("a30", 2, FabricSpec("nvlink-pairs", 100.0, 2.0)),
    ("mi250", 4, FabricSpec("infinity-fabric", 300.0, 2.0)),
    ("l4", 8, FabricSpec("pcie-host", 31.5, 10.0)),  # no device link: through the host
    ("rtx-4090", 4, FabricSpec("pcie-host", 31.5, 10.0)),  # more than the 2-GPU catalog box
])
def test_adhoc_fabric_follows_the_devices_interconnect(device: str, n: int, fabric: FabricSpec):
    system = system_from_device(device, n)
    assert system.fabric == fabric
    assert (system.devices_per_node, system.nodes, system.n_devices) == (n, 1, n)
    assert system.nic is None
    assert system.device == get_device(device).id
    assert system.sources
    assert "not measured" in system.notes


def test_more_than_8_devices_are_nodes_of_8_with_a_named_nic_guess():
    system = system_from_device(get_device("a100-40gb-sxm"), 32)
    assert (system.nodes, system.devices_per_node) == (4, 8)
    assert system.nic == NicSpec(8, 25.0, 3.0)  # DGX A100: 200 Gb/s HDR per GPU
    assert "NIC GUESSED" in system.notes
    assert system_from_device("v100-sxm2-32gb", 16).nic == NicSpec(8, 25.0, 3.0)
    pcie = system_from_device("l40s", 16)
    assert pcie.nic.count_per_node == 1
    assert "per node" in pcie.notes


def test_a_catalog_system_of_the_device_answers_where_the_count_fits_it():
    assert system_from_device("h100-sxm", 8) == get_system("hgx-h100")
    cluster = system_from_device("h100-sxm", 32)
    assert cluster == get_system("hgx-h100:nodes=4")
    assert cluster.nic == NicSpec(8, 50.0, 3.0)  # the datasheet's, not a guess
    half = system_from_device("h100-sxm", 4)
    assert (half.devices_per_node, half.fabric) == (4, get_system("hgx-h100").fabric)
    assert half.measured_as == get_system("hgx-h100").measured_as  # same box, fewer GPUs
    assert system_from_device("gb200", 144).fabric.kind == "nvlink-domain"
    assert system_from_device("l40s", 8) == get_system("l40s-8-pcie")


@pytest.mark.parametrize(("args", "match"), [
    (("h100-sxm", 12), "do not fill nodes of 8"),
    (("h100-sxm", 0), "whole number >= 1"),
    (("h100-sxm", 2.0), "whole number >= 1"),
    (("h100-sxm", True), "whole number >= 1"),
    (("no-such-gpu", 2), "unknown device"),
])
def test_bad_device_counts_are_refused(args, match: str):
    with pytest.raises(HardwareSpecError, match=match):
        system_from_device(*args)


def test_resolve_system_takes_exactly_one_way():
    assert resolve_system("hgx-h100:nodes=4").n_devices == 32
    assert resolve_system(hw="h100-sxm", devices=8).fabric.kind == "nvswitch"
    with pytest.raises(HardwareSpecError, match="not both"):
        resolve_system("hgx-h100", hw="h100-sxm", devices=8)
    with pytest.raises(HardwareSpecError, match="not both"):
        resolve_system("hgx-h100", devices=8)
    with pytest.raises(HardwareSpecError, match="no system given"):
        resolve_system()
    with pytest.raises(HardwareSpecError, match="devices of what"):
        resolve_system(devices=8)
    with pytest.raises(HardwareSpecError, match="device count is needed"):
        resolve_system(hw="h100-sxm")
    with pytest.raises(HardwareSpecError, match="unknown system"):
        resolve_system("hgx-h10")
