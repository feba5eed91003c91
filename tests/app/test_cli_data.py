"""``roofcast data list|stats|export|import`` end to end on a temporary store."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from roofcast.app.cli import main

CSV = ("op_type,device_id,dtype,latency_ms,family,run_id\n"
       "MatMul,t4,fp16,0.5,matmul,a\n"
       "Conv,Tesla V100-PCIE-32GB,fp32,1.5,conv,a\n"
       "Relu,t4,fp32,0.01,elementwise,a\n")


@pytest.fixture
def files(tmp_path):
    csv = tmp_path / "mine.csv"
    csv.write_text(CSV)
    return csv, tmp_path / "store.sqlite"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_list_stats_export(files, capsys, tmp_path):
    csv, store = files
    code, out, _ = run(
        capsys, "data", "import", str(csv), "--store", str(store), "--format", "json"
    )
    assert code == 0
    doc = json.loads(out)
    assert (doc["rows_read"], doc["added"], doc["duplicates"]) == (3, 3, 0)
    assert {r["device_id"]: r["rows"] for r in doc["rows_per_device"]} == {"t4": 2,
                                                                          "v100-pcie-32gb": 1}
    code, out, _ = run(capsys, "data", "import", str(csv), "--store", str(store))
    assert code == 0
    assert "added: 0" in out
    assert "duplicates: 3" in out

    code, out, _ = run(capsys, "data", "list", "--store", str(store), "--device", "t4",
                       "--format", "csv")
    listed = pd.read_csv(__import__("io").StringIO(out))
    assert sorted(listed.op_type) == ["MatMul", "Relu"]
    code, out, _ = run(capsys, "data", "list", "--store", str(store), "--family", "conv")
    assert "Conv" in out
    assert "MatMul" not in out
    assert "shown: 1" in out
    code, out, _ = run(capsys, "data", "list", "--store", str(store), "--limit", "2",
                       "--format", "json")
    assert len(json.loads(out)["measurements"]) == 2

    code, out, _ = run(capsys, "data", "stats", "--store", str(store), "--format", "json")
    stats = {(r["device_id"], r["family"]): r["rows"] for r in json.loads(out)["stats"]}
    assert stats == {("t4", "matmul"): 1, ("t4", "elementwise"): 1, ("v100-pcie-32gb", "conv"): 1}

    out_file = tmp_path / "out.parquet"
    code, out, _ = run(capsys, "data", "export", str(out_file), "--store", str(store),
                       "--device", "t4")
    assert code == 0
    assert out.strip() == f"wrote 2 rows to {out_file}"
    assert len(pd.read_parquet(out_file)) == 2


def test_bad_file_is_one_user_error_and_nothing_is_written(files, capsys, tmp_path):
    _, store = files
    bad = tmp_path / "bad.csv"
    bad.write_text("op_type,device_id,dtype,latency_s\nMatMul,t4,fp16,5000\nMatMul,t44,fp16,0.1\n")
    code, out, err = run(capsys, "data", "import", str(bad), "--store", str(store))
    assert code == 2
    assert err.startswith("roofcast data: error: bad.csv: 2 bad row(s); nothing was written")
    assert "line 2: latency_s = 5000 s is over 1 hour: wrong units?" in err
    assert "line 3: unknown device 't44'" in err
    assert "Traceback" not in err
    code, out, _ = run(capsys, "data", "stats", "--store", str(store), "--format", "json")
    assert json.loads(out)["rows"] == 0


def test_import_needs_a_file_or_public(capsys):
    with pytest.raises(SystemExit):
        main(["data", "import"])
    with pytest.raises(SystemExit):
        main(["data", "import", "--public", "nope"])


def test_public_import_with_missing_folder_is_a_user_error(files, capsys, tmp_path):
    _, store = files
    code, _, err = run(capsys, "data", "import", "--public", "deepbench", "--data-dir",
                       str(tmp_path / "nowhere"), "--store", str(store))
    assert code == 2
    assert "ROOFCAST_SHARED_DATA" in err


def test_export_to_unknown_format(files, capsys, tmp_path):
    csv, store = files
    run(capsys, "data", "import", str(csv), "--store", str(store))
    code, _, err = run(capsys, "data", "export", str(tmp_path / "x.json"), "--store", str(store))
    assert code == 2
    assert ".csv or .parquet" in err
