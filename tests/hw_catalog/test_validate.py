"""Bad device files: each is rejected with a message naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofcast.hw_catalog import HardwareSpecError, load_catalog

GOOD = (Path(__file__).parent / "data" / "fixture-gpu.toml").read_text()


def _load_one(tmp_path: Path, text: str, name: str = "fixture-gpu.toml"):
    folder = tmp_path / "devices"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return load_catalog(folder, tmp_path / "no-user-folder")


def _mutate(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


BAD_FILES = [
    # (test id, mutated text, expected message fragment)
    ("toml-syntax", _mutate("bandwidth_GBps = 3350", "bandwidth_GBps = = 3350"),
     "TOML syntax error"),
    ("missing-bandwidth", _mutate("bandwidth_GBps = 3350\n", ""),
     "missing required key 'memory.bandwidth_GBps' (in GB/s)"),
    ("typo-key", _mutate("bandwidth_GBps = 3350", "bandwith_GBps = 3350"),
     "unknown key 'memory.bandwith_GBps'; did you mean 'memory.bandwidth_GBps'?"),
    ("key-in-wrong-table", _mutate('vendor = "TestVendor"', 'vendor = "TestVendor"\nl2_MB = 3'),
     "unknown key 'l2_MB'; did you mean 'cache.l2_MB'?"),
    ("wrong-type", _mutate("units = 132", 'units = "132"'),
     "key 'compute.units' must be an integer, got str '132'"),
    ("float-units", _mutate("units = 132", "units = 132.5"),
     "key 'compute.units' must be an integer, got float 132.5"),
    ("negative-tdp", _mutate("tdp_W = 700", "tdp_W = -700"),
     "key 'power.tdp_W' must be positive, got -700"),
    ("bandwidth-1000x", _mutate("bandwidth_GBps = 3350", "bandwidth_GBps = 3350000"),
     "memory.bandwidth_GBps = 3350000 is implausible for a gpu (expected 50..20000 GB/s); "
     "check the unit: the key is in GB/s"),
    ("peak-in-gflops", _mutate("fp16 = 989.4", "fp16 = 989400"),
     "peak_TOPS.matrix.fp16 = 989400 is implausible for a gpu (expected 0.1..20000"),
    ("clock-in-ghz", _mutate("boost_clock_MHz = 1980", "boost_clock_MHz = 1.98"),
     "compute.boost_clock_MHz = 1.98 is implausible for a gpu (expected 100..6000 MHz)"),
    ("overhead-in-seconds", _mutate("launch_overhead_us = 4.0", "launch_overhead_us = 4e-6"),
     "overhead.launch_overhead_us = 4e-06 is implausible for a gpu (expected 0.1..1000 us)"),
    ("unknown-dtype", _mutate("fp8 = 1978.9", "fp9 = 1978.9"),
     "unknown key 'peak_TOPS.matrix.fp9'; did you mean 'peak_TOPS.matrix.fp8'?"),
    ("bad-kind", _mutate('kind = "gpu"', 'kind = "GPU"'),
     "key 'kind' must be one of gpu, cpu, accelerator, got 'GPU'"),
    ("no-sources", _mutate('sources = ["NVIDIA H100 Tensor Core GPU datasheet (2023)"]',
                           "sources = []"),
     "key 'sources' must name at least one source"),
    ("price-without-date", _mutate('price_date = "2024-06"\n', ""),
     "key 'price.price_date' is required when price.list_price_USD is given"),
    ("bad-price-date", _mutate('price_date = "2024-06"', 'price_date = "June 2024"'),
     "key 'price.price_date' must look like 'YYYY-MM', got 'June 2024'"),
    ("link-without-bandwidth", _mutate("device_link_GBps = 900\n", ""),
     "keys 'interconnect.device_link' and 'interconnect.device_link_GBps' go together"),
    ("scale-without-base", _mutate('vendor = "TestVendor"',
                                   'vendor = "TestVendor"\nmem_bw_scale = 2.0'),
     "scale factors (e.g. mem_bw_scale) are only allowed with 'base'"),
]


@pytest.mark.parametrize(("text", "message"), [b[1:] for b in BAD_FILES],
                         ids=[b[0] for b in BAD_FILES])
def test_bad_file_is_rejected_with_message(tmp_path: Path, text: str, message: str):
    with pytest.raises(HardwareSpecError) as err:
        _load_one(tmp_path, text)
    assert message in str(err.value)
    assert "fixture-gpu.toml" in str(err.value), "the message names the file"


def test_no_peaks_at_all(tmp_path: Path):
    start, end = GOOD.index("[peak_TOPS.matrix]"), GOOD.index("[memory]")
    with pytest.raises(HardwareSpecError, match=r"no peak at all: give at least one of"):
        _load_one(tmp_path, GOOD[:start] + GOOD[end:])


def test_bad_id_format(tmp_path: Path):
    text = _mutate('id = "fixture-gpu"', 'id = "Fixture_GPU"')
    with pytest.raises(HardwareSpecError, match=r"id 'Fixture_GPU' must be lowercase letters"):
        _load_one(tmp_path, text, "Fixture_GPU.toml")


def test_file_name_must_match_id(tmp_path: Path):
    with pytest.raises(HardwareSpecError) as err:
        _load_one(tmp_path, GOOD, "other-name.toml")
    assert "other-name.toml: file name must be 'fixture-gpu.toml'" in str(err.value)


def test_all_problems_of_a_file_are_reported_together(tmp_path: Path):
    text = _mutate("tdp_W = 700", "tdp_W = -700").replace("units = 132", 'units = "x"')
    with pytest.raises(HardwareSpecError) as err:
        _load_one(tmp_path, text)
    assert "power.tdp_W" in str(err.value)
    assert "compute.units" in str(err.value)


def test_cpu_ranges_differ_from_gpu(tmp_path: Path):
    text = _mutate('kind = "gpu"', 'kind = "cpu"').replace(
        "bandwidth_GBps = 3350", "bandwidth_GBps = 3000")
    with pytest.raises(HardwareSpecError, match=r"implausible for a cpu \(expected 1..2000 GB/s"):
        _load_one(tmp_path, text)


def test_cpu_needs_no_interconnect_or_tdp(tmp_path: Path):
    start, end = GOOD.index("[interconnect]"), GOOD.index("[price]")
    text = _mutate('kind = "gpu"', 'kind = "cpu"').replace(
        "bandwidth_GBps = 3350", "bandwidth_GBps = 300")
    text = text[:text.index("[interconnect]")] + text[text.index("[price]"):]
    assert start < end
    spec = _load_one(tmp_path, text).devices["fixture-gpu"]
    assert spec.tdp_W is None
    assert spec.host_link_Bps is None
    assert spec.mem_bw_Bps == 300e9
