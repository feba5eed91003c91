"""Catalog loading: user folder, name resolution, duplicates (a bad user file is skipped with a
warning, a bad built-in file raises), misses, 'local'."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roofcast.hw_catalog import (
    HardwareSpecError,
    get_device,
    list_devices,
    load_catalog,
    resolve_name,
    user_dir,
)
from roofcast.hw_catalog.catalog import name_tokens, normalize_name
from roofcast.hw_catalog.errors import DeviceFileWarning


def _copy(src: Path, folder: Path, dev_id: str | None = None, **replace: str) -> Path:
    text = src.read_text()
    for old, new in replace.items():
        text = text.replace(old, new)
    out = folder / f"{dev_id or src.stem}.toml"
    out.write_text(text)
    return out


@pytest.mark.parametrize(("name", "dev_id"), [
    ("Tesla V100-PCIE-32GB", "v100-pcie-32gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("h100-sxm", "h100-sxm"),
    ("H100_SXM", "h100-sxm"),
    ("  nvidia h100 80gb hbm3 ", "h100-sxm"),
])
def test_builtin_alias_resolution(name: str, dev_id: str, user_folder: Path):
    assert resolve_name(name) == dev_id
    assert get_device(name).id == dev_id


def test_normalisation():
    assert normalize_name("Tesla V100-PCIE-32GB") == "teslav100pcie32gb"
    assert name_tokens("NVIDIA A100-PCIE-40GB") == frozenset({"a100", "pcie", "40gb"})


def test_token_set_fallback_resolves_reordered_names(fixture_dir: Path, tmp_path: Path):
    catalog = load_catalog(fixture_dir, tmp_path / "none")
    # no alias says "80GB Fixture GPU", but its tokens equal those of the name
    assert catalog.resolve("80GB fixture gpu") == "fixture-gpu"
    assert catalog.resolve("GPU FIXTURE") == "fixture-gpu"


def test_miss_suggests_closest_ids(user_folder: Path):
    with pytest.raises(HardwareSpecError) as err:
        get_device("h100-smx")
    msg = str(err.value)
    assert msg.startswith("unknown device 'h100-smx'; closest ids: h100-sxm")
    assert "roofcast hw list" in msg


@pytest.mark.parametrize(("name", "family_ids"), [
    ("h100", ["h100-pcie", "h100-sxm"]),
    ("NVIDIA H100", ["h100-pcie", "h100-sxm"]),
    ("a100", ["a100-40gb-pcie", "a100-40gb-sxm", "a100-80gb-pcie", "a100-80gb-sxm"]),
    ("rtx", ["rtx-2080-ti", "rtx-3090", "rtx-4090", "rtx-5090", "rtx-6000-ada",
             "rtx-a6000", "rtx-pro-6000-blackwell", "rtx-pro-6000-blackwell-server"]),
])
def test_miss_suggests_the_whole_family_first(user_folder: Path, name: str,
                                              family_ids: list[str]):
    with pytest.raises(HardwareSpecError) as err:
        get_device(name)
    suggested = str(err.value).split("closest ids: ")[1].split(". ")[0].split(", ")
    assert sorted(suggested[:len(family_ids)]) == family_ids
    assert len(suggested) >= 4 or len(suggested) == len(family_ids)


def test_local_not_calibrated_message(user_folder: Path):
    with pytest.raises(HardwareSpecError) as err:
        get_device("local")
    assert "not calibrated yet: run `roofcast hw calibrate`" in str(err.value)
    assert str(user_folder / "local.toml") in str(err.value)


def test_user_folder_devices_are_listed_with_builtins(fixture_dir: Path, user_folder: Path):
    n_builtin = len(list_devices())
    _copy(fixture_dir / "fixture-gpu.toml", user_folder)
    _copy(fixture_dir / "fixture-gpu-2xbw.toml", user_folder)
    specs = list_devices()
    assert len(specs) == n_builtin + 2
    mine = get_device("fixture-gpu")
    assert mine.origin == "user"
    assert mine.path == str(user_folder / "fixture-gpu.toml")
    assert get_device("fixture-gpu-2xbw").mem_bw_Bps == pytest.approx(6700e9)
    assert [s.id for s in list_devices("gpu") if s.origin == "user"] == [
        "fixture-gpu-2xbw", "fixture-gpu"]
    with pytest.raises(HardwareSpecError, match="unknown device kind 'tpu'"):
        list_devices("tpu")


def test_catalog_reloads_when_a_user_file_changes(fixture_dir: Path, user_folder: Path):
    path = _copy(fixture_dir / "fixture-gpu.toml", user_folder)
    assert get_device("fixture-gpu").mem_bw_Bps == 3350e9
    path.write_text(path.read_text().replace("bandwidth_GBps = 3350", "bandwidth_GBps = 3351"))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert get_device("fixture-gpu").mem_bw_Bps == 3351e9


def _skipped(builtin: Path, user: Path) -> tuple[object, str]:
    """Load with a user folder holding one bad file: (catalog, the one warning's text)."""
    with pytest.warns(DeviceFileWarning) as caught:
        catalog = load_catalog(builtin, user)
    assert len(caught) == 1
    return catalog, str(caught[0].message)


def test_duplicate_id_in_user_folder_is_skipped_naming_both_files(fixture_dir: Path,
                                                                   tmp_path: Path):
    user = tmp_path / "user"
    user.mkdir()
    _copy(fixture_dir / "fixture-gpu.toml", user)
    catalog, msg = _skipped(fixture_dir, user)
    assert "device id 'fixture-gpu' is defined twice" in msg
    assert str(fixture_dir / "fixture-gpu.toml") in msg
    assert str(user / "fixture-gpu.toml") in msg
    assert catalog.files["fixture-gpu"] == str(fixture_dir / "fixture-gpu.toml")
    assert list(catalog.skipped) == [str(user / "fixture-gpu.toml")]


def test_duplicate_alias_in_user_folder_is_skipped_naming_both_files(fixture_dir: Path,
                                                                      tmp_path: Path):
    user = tmp_path / "user"
    user.mkdir()
    _copy(fixture_dir / "fixture-gpu.toml", user, "my-gpu",
          **{'id = "fixture-gpu"': 'id = "my-gpu"', 'name = "Fixture GPU 80GB"': 'name = "Mine"',
             '"FIXTURE-GPU-SXM"': '"other"'})
    catalog, msg = _skipped(fixture_dir, user)
    assert "name 'Fixture GPU 80GB HBM3' of device" in msg
    assert "collides with" in msg
    assert "fixture-gpu.toml" in msg
    assert "my-gpu.toml" in msg
    assert "my-gpu" not in catalog.devices
    assert "mine" not in catalog.names  # none of the skipped device's names resolve
    assert catalog.resolve("Fixture GPU 80GB HBM3") == "fixture-gpu"


def test_duplicate_in_builtin_folder_still_raises(fixture_dir: Path, tmp_path: Path):
    builtin = tmp_path / "builtin"
    builtin.mkdir()
    _copy(fixture_dir / "fixture-gpu.toml", builtin)
    _copy(fixture_dir / "fixture-gpu.toml", builtin, "fixture-gpu-b",
          **{'id = "fixture-gpu"': 'id = "fixture-gpu-b"'})
    with pytest.raises(
        HardwareSpecError, match=r"fixture-gpu.toml: name .* collides with .*fixture-gpu-b.toml"
    ):
        load_catalog(builtin, tmp_path / "no-user-folder")


def test_broken_user_file_is_reported_and_skipped(user_folder: Path):
    (user_folder / "broken.toml").write_text("id = 'broken'\nname = \n")
    with pytest.warns(DeviceFileWarning, match=r"broken.toml: TOML syntax error"):
        devices = list_devices()
    assert "h100-sxm" in {d.id for d in devices}
    with pytest.raises(HardwareSpecError, match=r"device 'broken' was not loaded: .*broken.toml: "
                                                r"TOML syntax error"):
        get_device("broken")


def test_user_dir_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("ROOFCAST_HW_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert user_dir() == tmp_path / "xdg" / "roofcast" / "devices"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_dir() == tmp_path / "home" / ".config" / "roofcast" / "devices"
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(tmp_path / "mine"))
    assert user_dir() == tmp_path / "mine"
