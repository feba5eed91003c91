"""`roofcast hw list|show`: tables, formats, user errors as one line."""

from __future__ import annotations

import json
from pathlib import Path

from roofcast.app.cli import main


def test_hw_list_json_includes_user_devices(fixture_dir: Path, user_folder: Path, capsys):
    (user_folder / "fixture-gpu.toml").write_text((fixture_dir / "fixture-gpu.toml").read_text())
    assert main(["hw", "list", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["id"]: r for r in out["devices"]}
    mine = rows["fixture-gpu"]
    assert mine["source"] == "user"
    assert mine["mem_bw_GBps"] == 3350
    assert mine["matrix_bf16_TOPS"] == 989.4
    assert mine["mem_GB"] == 80
    assert rows["h100-sxm"]["source"] == "builtin"


def test_hw_list_kind_filter_csv(user_folder: Path, capsys):
    assert main(["hw", "list", "--kind", "cpu", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("id,name,kind,")
    assert all(",cpu," in line for line in lines[1:])


def test_hw_show_inline_derived(user_folder: Path, capsys):
    assert main(["hw", "show", "h100-sxm:mem_bw_GBps=6700,l2_MB=100", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    figures = {r["key"]: r["value"] for r in out["figures"]}
    assert figures["memory.bandwidth_GBps"] == "6700"
    assert figures["cache.l2_MB"] == "100"
    assert out["base"] == "h100-sxm"
    assert any("what-if" in r["source"] for r in out["sources"])


def test_hw_show_unknown_device_is_one_line_exit_2(user_folder: Path, capsys):
    assert main(["hw", "show", "h100-smx"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("roofcast hw: error: unknown device 'h100-smx'; closest ids: h100-sxm")
    assert "\n" not in err
