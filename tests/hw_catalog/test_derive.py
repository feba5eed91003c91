"""Hypothetical devices: derive(), derived files (a bad one is skipped with a warning), inline
specs; what-if values must be finite and within sane bounds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from roofcast.hw_catalog import HardwareSpecError, derive, get_device, load_catalog, parse_inline
from roofcast.hw_catalog.catalog import MAX_BASE_DEPTH
from roofcast.hw_catalog.errors import DeviceFileWarning


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


def _load_warned(builtin: Path, user: Path, match: str):
    """load_catalog, asserting one of its DeviceFileWarnings matches ``match``."""
    with pytest.warns(DeviceFileWarning) as caught:
        catalog = load_catalog(builtin, user)
    messages = [str(w.message) for w in caught]
    assert any(re.search(match, m) for m in messages), messages
    return catalog


@pytest.mark.parametrize(("files", "skipped", "match"), [
    ({"typo-base": 'base = "fixture-gpx"\nmem_bw_scale = 2\n'}, ["typo-base"],
     r"typo-base.toml: base 'fixture-gpx' is not a known device; closest ids: fixture-gpu"),
    ({"loop-a": 'base = "loop-b"\npeak_scale = 2\n', "loop-b": 'base = "loop-a"\npeak_scale = 2\n'},
     ["loop-a", "loop-b"], r"base chain loops: loop-a -> loop-b -> loop-a"),
    ({"slip": 'base = "fixture-gpu"\n[memory]\nbandwidth_GBps = 6.7e6\n'}, ["slip"],
     r"slip.toml: memory.bandwidth_GBps .* implausible"),
    ({"nobase-scale": 'base = "fixture-gpu"\nmem_bw_scael = 2\n'}, ["nobase-scale"],
     r"unknown key 'mem_bw_scael'; did you mean 'mem_bw_scale'"),
    ({"huge": 'base = "fixture-gpu"\npeak_scale = 1e300\n'}, ["huge"],
     r"huge.toml: scale 'peak_scale' = 1e\+300 is outside 0.001..1000"),
    ({"tiny": 'base = "fixture-gpu"\npeak_scale = 1e-320\n'}, ["tiny"],
     r"scale 'peak_scale' = 1e-320 is outside"),
    # bad base: the dependent is skipped too, saying why
    ({"a-bad": 'base = "fixture-gpu"\nl2_scale = 0\n', "b-child": 'base = "a-bad"\nl2_scale = 2\n'},
     ["a-bad", "b-child"], r"b-child.toml: base 'a-bad' is not a known device \(its file "),
])
def test_bad_derived_user_files_are_skipped(fixture_dir: Path, tmp_path: Path, files, skipped,
                                            match):
    folder = tmp_path / "user"
    folder.mkdir()
    for dev_id, body in files.items():
        _derived_file(folder, dev_id, body)
    _derived_file(folder, "fine", 'base = "fixture-gpu"\nmem_bw_scale = 3\n')
    catalog = _load_warned(fixture_dir, folder, match)
    assert sorted(Path(p).stem for p in catalog.skipped) == sorted(skipped)
    assert catalog.devices["fine"].mem_bw_Bps == pytest.approx(3 * 3350e9)


def test_chained_scales_must_stay_within_headroom(fixture_dir: Path, tmp_path: Path):
    folder = tmp_path / "user"
    folder.mkdir()
    prev = "fixture-gpu"
    for i in range(4):  # 1000 x 1000 x ...: each factor is allowed, the product is not
        _derived_file(folder, f"x{i}", f'base = "{prev}"\nmem_bw_scale = 1000\n')
        prev = f"x{i}"
    catalog = _load_warned(fixture_dir, folder, r"x1.toml: memory.bandwidth_GBps = .* after "
                                                r"scaling is more than 1000x outside")
    assert "x0" in catalog.devices
    assert sorted(Path(p).stem for p in catalog.skipped) == ["x1", "x2", "x3"]


def test_derivation_depth_is_capped(fixture_dir: Path, tmp_path: Path):
    folder = tmp_path / "user"
    folder.mkdir()
    prev = "fixture-gpu"
    for i in range(1, MAX_BASE_DEPTH + 3):
        _derived_file(folder, f"d{i:02d}", f'base = "{prev}"\nmem_bw_scale = 1.01\n')
        prev = f"d{i:02d}"
    catalog = _load_warned(fixture_dir, folder, rf"d{MAX_BASE_DEPTH + 1}.toml: derived from a "
                                                rf"derived device more than {MAX_BASE_DEPTH} times")
    assert f"d{MAX_BASE_DEPTH:02d}" in catalog.devices
    assert sorted(Path(p).stem for p in catalog.skipped) == [f"d{MAX_BASE_DEPTH + 1}",
                                                             f"d{MAX_BASE_DEPTH + 2}"]


@pytest.mark.parametrize(("changes", "match"), [
    ({"peak_scale": "1e-320"}, r"scale 'peak_scale' = 1e-320 is outside 0.001..1000"),
    ({"mem_bw_scale": 1e300}, r"scale 'mem_bw_scale' = 1e\+300 is outside"),
    ({"mem_bw_scale": "nan"}, r"'mem_bw_scale' must be a finite number"),
    ({"mem_bw_GBps": "inf"}, r"'mem_bw_GBps' must be a finite number"),
    ({"units": "1e400"}, r"'units' must be a finite number"),
    ({"units": 10**400}, r"'units' must be a number"),
    ({"launch_overhead_us": 1e-320}, r"launch_overhead_us = 1e-320 is implausible"),
])
def test_what_if_values_must_be_finite_and_sane(gpu, changes, match):
    with pytest.raises(HardwareSpecError, match=match):
        derive(gpu, **changes)
