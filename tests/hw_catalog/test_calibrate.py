"""Local calibration: pure helpers, and one quick run on this machine (a smoke test)."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest

from roofcast.app.cli import main
from roofcast.hw_catalog import get_device
from roofcast.hw_catalog.calibrate import (
    _count_cpus,
    _parse_size,
    bw_saturation_threads,
    plateaus,
    thread_counts,
)
from roofcast.hw_catalog.tomlwrite import dumps
from roofcast.hw_catalog.validate import validate_document

CACHES = [  # a 2-core machine: private 32 KiB L1 and 512 KiB L2, shared 32 MiB L3
    {"level": 1, "type": "Data", "size_bytes": 32 * 1024, "shared_by": 1},
    {"level": 2, "type": "Unified", "size_bytes": 512 * 1024, "shared_by": 1},
    {"level": 3, "type": "Unified", "size_bytes": 32 * 2**20, "shared_by": 2},
]


def test_plateaus_pick_bands_by_cache_capacity():
    ws = [16, 32, 64, 256, 1024, 8192, 16384, 131072, 262144]
    bw = [100, 110, 80, 82, 60, 62, 50, 20, 22]
    levels = plateaus(ws, bw, CACHES, threads=2)
    # bands (2 threads): L1 ws <= 2 x 32 KiB / 2; L2 2 x 32 KiB < ws <= 2 x 512 KiB / 2;
    # L3 2 x 512 KiB < ws <= 32 MiB / 2; sizes between a half-full and a full level are
    # transitions and belong to no band (64 KiB, 1024 KiB here)
    assert levels["L1_GBps"] == 105  # median of 100, 110
    assert levels["L2_GBps"] == 82  # ws 256 KiB only
    assert levels["L3_GBps"] == 56  # median of 62, 50 (ws 8192, 16384 KiB)
    assert levels["DRAM_GBps"] == 21  # ws >= 4 x 32 MiB
    assert levels["DRAM_from_KiB"] == 131072
    assert "DRAM_note" not in levels


def test_plateaus_flag_a_dram_figure_from_too_small_a_working_set():
    levels = plateaus([16, 65536], [100.0, 30.0], CACHES, threads=2)
    assert levels["DRAM_GBps"] == 30
    assert "may include cache hits" in levels["DRAM_note"]


def test_bw_saturation_threads():
    # bw(t) = min(t * 10, 35) saturates at t = 3.5 on an 8-thread machine
    assert bw_saturation_threads(10.0, 35.0, 8) == 3.5
    assert bw_saturation_threads(30.0, 20.0, 2) == 1.0  # all threads slower: clamp to 1
    assert bw_saturation_threads(5.0, 100.0, 4) == 4.0  # never more than the CPUs


def test_thread_counts():
    assert thread_counts(2, quick=False) == [1, 2]
    assert thread_counts(6, quick=False) == [1, 2, 3, 4, 5, 6]
    assert thread_counts(48, quick=False) == [1, 2, 4, 8, 16, 32, 48]
    assert thread_counts(48, quick=True) == [1, 48]


def test_sysfs_parsers():
    assert _parse_size("32K") == 32 * 1024
    assert _parse_size("32768K") == 32 * 2**20
    assert _parse_size("1M") == 2**20
    assert _count_cpus("0-1") == 2
    assert _count_cpus("0,2,4-7") == 6


def test_toml_writer_round_trips():
    doc = {"id": "x", "n": 3, "f": 0.1, "s": 'a "quoted" \\ path', "lst": [1, 2.5],
           "t": {"a": 1, "sub": {"b": "c", "1": True}}, "u": {"v": {"w": [1]}}}
    assert tomllib.loads(dumps(doc)) == doc


def test_quick_calibration_writes_a_valid_local_device(user_folder: Path, capsys):
    rc = main(["hw", "calibrate", "--quick", "--format", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    path = user_folder / "local.toml"
    assert out["written"] == str(path)
    doc = tomllib.loads(path.read_text())
    validate_document(doc, str(path))
    assert not list(user_folder.glob(".local-*")), "no temp file left behind"

    local = get_device("local")
    assert local.kind == "cpu"
    assert local.origin == "local"
    for value in (local.peak("matrix", "float").flops_per_s, local.mem_bw_Bps,
                  local.launch_overhead_s, local.l2_bytes, local.clock_Hz):
        assert math.isfinite(value)
        assert value > 0
    cal = local.calibration
    assert cal["quick"] is True
    # measured time of the calibration itself (imports and process start excluded)
    assert cal["duration_s"] < 10, f"--quick took {cal['duration_s']} s"
    assert cal["gemm"]["fp32"]["threads"][0] == 1
    assert all(g > 0 for g in cal["gemm"]["fp32"]["GFLOPs"])
    bf16 = cal["gemm"]["bf16"]
    assert ("GFLOPs" in bf16) != ("not_measured" in bf16), "bf16 is measured or says why not"
    assert len(cal["bandwidth"]["working_set_KiB"]) == len(cal["bandwidth"]["GBps_1thread"])
    assert all(b > 0 for b in cal["bandwidth"]["GBps_1thread"])
    assert cal["versions"]["onnxruntime"]
    assert 1 <= cal["bw_saturation_threads"] <= cal["logical_cpus"]


def test_calibrate_output_option(tmp_path: Path, user_folder: Path, capsys,
                                 monkeypatch: pytest.MonkeyPatch):
    """--output writes elsewhere, into a folder that exists (as every --output FILE); the doc
    is validated before the atomic replace."""
    import roofcast.hw_catalog.calibrate as cal

    fake = {"id": "local"}  # what a broken measurement would produce: invalid, never written
    monkeypatch.setattr(cal, "run_calibration", lambda quick, progress: fake)
    target = tmp_path / "out" / "local.toml"
    assert main(["hw", "calibrate", "--quick", "--output", str(target)]) == 2
    assert "folder" in capsys.readouterr().err
    assert not target.parent.exists()
    target.parent.mkdir()
    rc = main(["hw", "calibrate", "--quick", "--output", str(target)])
    assert rc == 2
    assert "missing required key 'name'" in capsys.readouterr().err
    assert not target.exists()
