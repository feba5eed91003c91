"""save_user_device: a what-if device written to the user folder loads back as the same device."""

from __future__ import annotations

import tomllib

import pytest

from roofcast.hw_catalog import HardwareSpecError, get_device, load_catalog
from roofcast.hw_catalog.user_devices import save_user_device


def test_saved_device_loads_with_scaled_and_explicit_values(user_folder):
    path = save_user_device("h100-sxm", {"mem_bw_scale": 2.0, "l2_MB": 100}, "h100-wide",
                            name="H100 wide")
    assert path == user_folder / "h100-wide.toml"
    doc = tomllib.loads(path.read_text())
    assert doc["base"] == "h100-sxm"
    assert doc["mem_bw_scale"] == 2.0
    assert doc["cache"]["l2_MB"] == 100
    base = get_device("h100-sxm")
    saved = get_device("h100-wide")
    assert saved.mem_bw_Bps == pytest.approx(2 * base.mem_bw_Bps)
    assert saved.l2_bytes == 100 * 2**20
    assert saved.name == "H100 wide"
    assert saved.origin == "user"


def test_existing_id_is_refused_unless_overwriting_a_user_file(user_folder):
    with pytest.raises(HardwareSpecError, match="already exists in the catalog"):
        save_user_device("h100-sxm", {"mem_bw_scale": 2.0}, "a100-80gb-sxm")
    save_user_device("h100-sxm", {"mem_bw_scale": 2.0}, "mine")
    with pytest.raises(HardwareSpecError, match="allow overwriting"):
        save_user_device("h100-sxm", {"mem_bw_scale": 3.0}, "mine")
    save_user_device("h100-sxm", {"mem_bw_scale": 3.0}, "mine", overwrite=True)
    assert get_device("mine").mem_bw_Bps == pytest.approx(3 * get_device("h100-sxm").mem_bw_Bps)


@pytest.mark.parametrize(("changes", "dev_id", "match"), [
    ({}, "x", "at least one change"),
    ({"mem_bw_scale": 2.0}, "Bad Id", "lowercase"),
    ({"mem_bw_scale": -1.0}, "neg", "positive"),
    ({"bogus_key": 1}, "bogus", "unknown hardware key"),
    ({"mem_bw_GBps": 3e6}, "slip", "implausible"),
])
def test_bad_devices_write_nothing(user_folder, changes, dev_id, match):
    with pytest.raises(HardwareSpecError, match=match):
        save_user_device("h100-sxm", changes, dev_id)
    assert list(user_folder.iterdir()) == []
    assert dev_id not in load_catalog().devices
