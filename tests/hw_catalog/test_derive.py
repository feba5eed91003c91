"""Hypothetical devices: derive(), derived files, inline specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofcast.hw_catalog import HardwareSpecError, derive, get_device, load_catalog, parse_inline


@pytest.fixture
def catalog(fixture_dir: Path, tmp_path: Path):
    return load_catalog(fixture_dir, tmp_path / "none")


@pytest.fixture
def gpu(catalog):
    return catalog.devices["fixture-gpu"]


def test_derive_overrides_in_toml_units(gpu):
    d = derive(gpu, mem_bw_GBps=6700, l2_MB=100)
    assert d.mem_bw_Bps == 6700e9
    assert d.l2_bytes == 100 * 2**20
    assert d.peak_flops == gpu.peak_flops
    assert d.base == "fixture-gpu"
    assert d.origin == "derived"
    assert d.id == "fixture-gpu:mem_bw_GBps=6700,l2_MB=100"
    assert "derived from 'fixture-gpu'" in d.notes
    assert "mem_bw_GBps=6700" in d.notes
    assert any("what-if" in s for s in d.sources)
    assert d.aliases == (), "a derived device does not inherit the base's aliases"


def test_derive_scales(gpu):
    d = derive(gpu, id="what-if", mem_bw_scale=2.0, matrix_peak_scale=0.5, units_scale=1.5,
               launch_overhead_scale=0.5, l2_scale=4)
    assert d.id == "what-if"
    assert d.mem_bw_Bps == pytest.approx(2 * 3350e9)
    assert d.peak_flops[("matrix", "bf16")] == pytest.approx(0.5 * 989.4e12)
    assert d.peak_flops[("vector", "fp32")] == pytest.approx(66.9e12), "vector untouched"
    assert d.units == 198  # round(132 * 1.5)
    assert d.launch_overhead_s == pytest.approx(2e-6)
    assert d.l2_bytes == 200 * 2**20


def test_peak_scale_multiplies_every_peak(gpu):
    d = derive(gpu, peak_scale=2, vector_peak_scale=1.5)
    assert d.peak_flops[("matrix", "fp16")] == pytest.approx(2 * 989.4e12)
    assert d.peak_flops[("vector", "fp32")] == pytest.approx(3 * 66.9e12)


def test_overrides_then_scales(gpu):
    d = derive(gpu, mem_bw_GBps=1000, mem_bw_scale=3)
    assert d.mem_bw_Bps == pytest.approx(3000e9)


def test_scaled_beyond_todays_range_is_allowed_but_typed_unit_slip_is_not(gpu):
    assert derive(gpu, mem_bw_scale=10).mem_bw_Bps == pytest.approx(33500e9)
    with pytest.raises(HardwareSpecError, match=r"memory.bandwidth_GBps = 6700000.*implausible"):
        derive(gpu, mem_bw_GBps=6_700_000)


def test_derive_errors(gpu):
    with pytest.raises(HardwareSpecError, match=r"unknown hardware key 'mem_bw_GBs' for a "
                                                r"derived device; did you mean 'mem_bw_GBps'"):
        derive(gpu, mem_bw_GBs=10)
    with pytest.raises(HardwareSpecError, match="must be positive"):
        derive(gpu, mem_bw_scale=-1)
    with pytest.raises(HardwareSpecError, match="must be an integer"):
        derive(gpu, units=10.5)
    with pytest.raises(HardwareSpecError, match="at least one override"):
        derive(gpu)


def test_parse_inline():
    assert parse_inline("h100-sxm:mem_bw_GBps=6700,l2_MB=100") == (
        "h100-sxm", {"mem_bw_GBps": "6700", "l2_MB": "100"})
    assert parse_inline(" a100 : peak_scale = 2 , ") == ("a100", {"peak_scale": "2"})
    for bad, msg in [("h100-sxm", "must look like 'BASE:key=value"),
                     ("h100-sxm:", "has no key=value changes"),
                     ("h100-sxm:mem_bw_GBps", "is not key=value"),
                     ("h100-sxm:l2_MB=1,l2_MB=2", "given twice"),
                     (":l2_MB=1", "must look like")]:
        with pytest.raises(HardwareSpecError, match=msg):
            parse_inline(bad)


def test_derived_file_in_catalog(catalog):
    d = catalog.devices["fixture-gpu-2xbw"]
    assert d.base == "fixture-gpu"
    assert d.mem_bw_Bps == pytest.approx(2 * 3350e9)
    assert d.l2_bytes == 100 * 2**20
    assert d.name == "Fixture GPU with 2x bandwidth"
    assert "mem_bw_scale=2" in d.notes


def test_get_device_accepts_inline_specs(fixture_dir, user_folder: Path):
    # built-in catalog + a user file as base: inline specs work on any catalog device
    (user_folder / "fixture-gpu.toml").write_text((fixture_dir / "fixture-gpu.toml").read_text())
    d = get_device("FIXTURE-GPU-SXM:mem_bw_GBps=6700,matrix_bf16_TOPS=2000")
    assert d.mem_bw_Bps == 6700e9
    assert d.peak("matrix", "bf16").flops_per_s == 2000e12
    assert d.base == "fixture-gpu"
    with pytest.raises(HardwareSpecError, match="unknown hardware key 'bandwidth'"):
        get_device("fixture-gpu:bandwidth=3")


def _derived_file(folder: Path, dev_id: str, body: str) -> None:
    (folder / f"{dev_id}.toml").write_text(f'id = "{dev_id}"\n{body}')


def test_derived_file_errors(fixture_dir: Path, tmp_path: Path):
    folder = tmp_path / "user"
    folder.mkdir()
    _derived_file(folder, "typo-base", 'base = "fixture-gpx"\nmem_bw_scale = 2\n')
    with pytest.raises(HardwareSpecError, match=r"typo-base.toml: base 'fixture-gpx' is not a "
                                                r"known device; closest ids: fixture-gpu"):
        load_catalog(fixture_dir, folder)
    (folder / "typo-base.toml").unlink()
    _derived_file(folder, "loop-a", 'base = "loop-b"\npeak_scale = 2\n')
    _derived_file(folder, "loop-b", 'base = "loop-a"\npeak_scale = 2\n')
    with pytest.raises(HardwareSpecError, match=r"base chain loops: loop-a -> loop-b -> loop-a"):
        load_catalog(fixture_dir, folder)
    for p in folder.glob("loop-*"):
        p.unlink()
    _derived_file(folder, "slip", 'base = "fixture-gpu"\n[memory]\nbandwidth_GBps = 6.7e6\n')
    with pytest.raises(HardwareSpecError, match=r"slip.toml: memory.bandwidth_GBps .* implausible"):
        load_catalog(fixture_dir, folder)
    (folder / "slip.toml").unlink()
    _derived_file(folder, "nobase-scale", 'base = "fixture-gpu"\nmem_bw_scael = 2\n')
    with pytest.raises(HardwareSpecError, match=r"unknown key 'mem_bw_scael'; did you mean "
                                                r"'mem_bw_scale'"):
        load_catalog(fixture_dir, folder)
