"""Systems catalog: every shipped file validates; lookup, what-if, bad files, device refs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from roofcast.hw_catalog import get_device
from roofcast.hw_catalog.catalog import read_toml
from roofcast.hw_catalog.errors import DeviceFileWarning, HardwareSpecError
from roofcast.hw_catalog.system import FABRIC_KINDS, FabricSpec, NicSpec, SystemSpec
from roofcast.hw_catalog.systems import (
    BUILTIN_SYSTEMS_DIR,
    derive_system,
    get_system,
    load_systems,
    system_ids,
    validate_system_document,
)

SYSTEM_FILES = sorted(BUILTIN_SYSTEMS_DIR.glob("*.toml"))
GOOD = """id = "my-box"
name = "My box"
device = "h100-sxm"
devices_per_node = 4
sources = ["my datasheet"]
[fabric]
kind = "nvswitch"
link_GBps = 450
latency_us = 2
"""


@pytest.fixture(autouse=True)
def empty_user_systems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "user-systems"
    folder.mkdir()
    monkeypatch.setenv("ROOFCAST_SYSTEMS_DIR", str(folder))
    return folder


def _doc(text: str = GOOD) -> dict:
    import tomllib
    return tomllib.loads(text)


def test_required_systems_are_shipped():
    ids = set(system_ids())
    assert {"dgx-a100", "hgx-h100", "hgx-h200", "dgx-b200", "mi300x-8", "l40s-8-pcie",
            "rtx4090-2-pcie"} <= ids
    assert len(SYSTEM_FILES) == len(ids)


@pytest.mark.parametrize("path", SYSTEM_FILES, ids=lambda p: p.stem)
def test_every_file_validates_and_names_sources(path: Path):
    doc = read_toml(path)
    validate_system_document(doc, str(path))
    spec = get_system(path.stem)
    assert spec.id == path.stem
    assert spec.fabric.kind in FABRIC_KINDS
    assert spec.sources
    assert all(len(s) > 20 for s in spec.sources)
    assert get_device(spec.device).id == spec.device
    assert spec.n_devices == spec.nodes * spec.devices_per_node
    assert spec.nodes == 1 or spec.nic is not None
    assert "typical" in " ".join(spec.sources).lower()  # latencies are declared typical
    dataclasses.replace(spec)  # frozen dataclass, still constructible
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.nodes = 2  # type: ignore[misc]


def test_figures_from_datasheets():
    assert get_system("dgx-a100").fabric == FabricSpec("nvswitch", 300.0, 2.0)
    assert get_system("dgx-a100").nic == NicSpec(8, 25.0, 3.0)
    assert get_system("hgx-h100").fabric.link_GBps == 450
    assert get_system("dgx-b200").fabric.link_GBps == 900
    assert get_system("mi300x-8").fabric.link_GBps == 7 * 64
    assert get_system("rtx4090-2-pcie").fabric.kind == "pcie-host"


def test_names_and_aliases_resolve():
    assert get_system("DGX H100").id == "hgx-h100"
    assert get_system("nd-a100-v4").id == "dgx-a100"
    assert get_system(get_system("hgx-h200")).id == "hgx-h200"


def test_unknown_system_lists_close_ids():
    with pytest.raises(HardwareSpecError, match="closest ids: hgx-h100"):
        get_system("hgx-h10")


def test_whatif_adds_a_nic_to_a_box_without_one():
    two = get_system("l40s-8-pcie:nodes=2,nic_count=2,nic_GBps=50,nic_latency_us=4")
    assert (two.nodes, two.nic) == (2, NicSpec(2, 50.0, 4.0))


def test_whatif_nodes_and_bandwidth():
    four = get_system("hgx-h100:nodes=4")
    assert (four.nodes, four.n_devices, four.device) == (4, 32, "h100-sxm")
    assert "what-if" in four.sources[-1]
    fast = get_system("dgx-a100:nic_GBps=50,link_GBps=450")
    assert (fast.nic.GBps, fast.fabric.link_GBps) == (50.0, 450.0)
    assert derive_system(get_system("hgx-h100"), nodes=2).n_devices == 16
    assert get_system("hgx-h100").nodes == 1  # the base is unchanged


@pytest.mark.parametrize(("ref", "match"), [
    ("hgx-h100:count=2", "unknown system key 'count'.*allowed: nodes"),
    ("hgx-h100:nodes=0", "nodes = 0: outside"),
    ("hgx-h100:nodes=1.5", "must be an integer"),
    ("hgx-h100:link_GBps=fast", "must be a number"),
    ("hgx-h100:fabric=token-ring", "not one of nvswitch"),
    ("hgx-h100:device=nosuchgpu", "unknown device 'nosuchgpu'"),
    ("l40s-8-pcie:nodes=2", "needs a \\[nic\\] table"),
    ("l40s-8-pcie:nic_GBps=50", "has no \\[nic\\] table: give nic_count, nic_GBps and"),
    ("hgx-h100:nodes", "what-if system 'hgx-h100:nodes' must look like"),
    ("hgx-h100:nodes=2,nodes=3", "each key once"),
])
def test_bad_whatif_refused(ref: str, match: str):
    with pytest.raises(HardwareSpecError, match=match):
        get_system(ref)


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: d.pop("device"), "device: missing"),
    (lambda d: d.update(device="h999"), "unknown device 'h999'"),
    (lambda d: d.update(devices_per_node="8"), "devices_per_node: must be int"),
    (lambda d: d.update(sources=[]), "sources: empty"),
    (lambda d: d.update(nodez=2), "nodez: unknown key \\(did you mean nodes"),
    (lambda d: d.pop("fabric"), "\\[fabric\\]: missing table"),
    (lambda d: d["fabric"].update(link_GBps=-1), "fabric.link_GBps = -1: outside"),
    (lambda d: d["fabric"].pop("latency_us"), "fabric.latency_us: missing"),
    (lambda d: d.update(nic={"count_per_node": 8, "GBps": True, "latency_us": 3}),
     "nic.GBps: must be number"),
])
def test_bad_document_refused_naming_key(edit, match: str):
    doc = _doc()
    validate_system_document(doc, "my.toml")  # the good one passes
    edit(doc)
    with pytest.raises(HardwareSpecError, match=f"my.toml: .*{match}"):
        validate_system_document(doc, "my.toml")


def test_user_folder_adds_systems_and_skips_bad_files(empty_user_systems: Path):
    (empty_user_systems / "my-box.toml").write_text(GOOD)
    (empty_user_systems / "broken.toml").write_text(GOOD.replace('"h100-sxm"', '"h999"')
                                                    .replace("my-box", "broken"))
    with pytest.warns(DeviceFileWarning, match="broken.toml.*unknown device 'h999'"):
        catalog = load_systems()
    assert "my-box" in catalog.systems
    assert "broken" not in catalog.systems
    assert get_system("my-box").n_devices == 4


def test_builtin_problem_raises(tmp_path: Path):
    folder = tmp_path / "builtin"
    folder.mkdir()
    (folder / "other-name.toml").write_text(GOOD)
    with pytest.raises(HardwareSpecError, match=r"file name must be 'my-box\.toml'"):
        load_systems(folder, tmp_path / "none")


def test_n_devices_on_a_handmade_spec():
    spec = SystemSpec("x", "x", "h100-sxm", 8, 3, FabricSpec("nvswitch", 450, 2), None, ("s",),
                      "")
    assert spec.n_devices == 24
    assert spec.nic_GBps_per_node == 0.0
