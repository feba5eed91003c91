"""``roofcast data export --format parquet --partition-by device --output DIR``: a Hive-partitioned
Parquet dataset of the store that reads back to the same rows, written atomically."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from roofcast.app.cli import main
from roofcast.training_data import partitioned
from roofcast.training_data.schema import COLUMN_NAMES
from roofcast.training_data.store import Store
from tests.predictor.learned_helpers import measurement_csv_file


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("store")
    csv = measurement_csv_file(folder / "rows.csv")
    path = folder / "store.sqlite"
    assert main(["data", "import", str(csv), "--store", str(path)]) == 0
    return str(path)


def export(capsys, store, out, *extra) -> tuple[int, str, str]:
    code = main(["data", "export", "--format", "parquet", "--partition-by", "device",
                 "--output", str(out), "--store", store, *extra])
    o, e = capsys.readouterr()
    return code, o, e


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    df = df[list(COLUMN_NAMES)].copy()
    df["device_id"] = df["device_id"].astype(str)
    for c in df.columns:
        if df[c].dtype == object or str(df[c].dtype).startswith(("str", "string")):
            df[c] = df[c].astype(object).where(df[c].notna(), "").astype(str)
        elif str(df[c].dtype) == "Int64" or df[c].dtype.kind in "iu":
            df[c] = df[c].astype("float64")
    return df.sort_values(["device_id", "node"]).reset_index(drop=True)


def test_export_round_trips_every_row_one_folder_per_device(capsys, store, tmp_path):
    out = tmp_path / "ds"
    code, text, _ = export(capsys, store, out)
    assert code == 0
    assert "wrote 240 rows in 3 partitions" in text
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == ["device_id=p100-pcie-16gb", "device_id=t4", "device_id=v100-pcie-32gb"]
    manifest = json.loads((out / partitioned.MANIFEST).read_text())
    assert manifest["rows"] == 240
    assert manifest["partition_column"] == "device_id"
    back = pd.read_parquet(out)  # pyarrow reads the Hive column back from the folder names
    stored = Store(store).read()
    pd.testing.assert_frame_equal(_sorted(back), _sorted(stored), check_dtype=False)
    # the partition column is the folder, not a column inside the files
    one = pd.read_parquet(next((out / folders[0]).glob("*.parquet")))
    assert "device_id" not in one.columns
    assert len(one) == 80


def test_small_files_split_a_device_and_device_filter_applies(store, tmp_path):
    rep = partitioned.export_partitioned(Store(store), tmp_path / "ds", rows_per_file=30,
                                         device=["t4", "p100-pcie-16gb"])
    assert (rep.rows, rep.partitions, rep.files) == (160, 2, 6)  # 80 rows -> 30 + 30 + 20
    assert len(pd.read_parquet(tmp_path / "ds")) == 160


def test_refuses_a_non_empty_folder_and_leaves_it_alone(capsys, store, tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = export(capsys, store, out)
    assert code == 2
    assert "not an empty folder" in err
    assert "Traceback" not in err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export(capsys, store, empty)[0] == 0
    assert (empty / partitioned.MANIFEST).is_file()


def test_a_failed_export_leaves_nothing_behind(store, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    calls = []
    real = pq.write_table

    def failing(table, where, **kw):
        calls.append(where)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(table, where, **kw)

    monkeypatch.setattr(pq, "write_table", failing)
    with pytest.raises(OSError, match="disk full"):
        partitioned.export_partitioned(Store(store), tmp_path / "ds")
    assert len(calls) == 2
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--format", "parquet", "--partition-by", "model"], "cannot partition by 'model'"),
    (["--format", "parquet", "--partition-by", "device"], "needs --output DIR"),
    ([], "give a FILE"),
])
def test_bad_export_arguments_are_one_line_errors(capsys, store, argv, message):
    code = main(["data", "export", *argv, "--store", store] +
                (["--output", "x"] if "model" in argv else []))
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_file_and_output_together_are_refused(capsys, store, tmp_path):
    code = main(["data", "export", str(tmp_path / "a.csv"), "--output", str(tmp_path / "d"),
                 "--store", store])
    assert code == 2
    assert "not both" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_manifest_is_required_to_read_an_export(tmp_path):
    from roofcast.training_data.errors import MeasurementError

    with pytest.raises(MeasurementError, match="not a roofcast Parquet export"):
        partitioned.read_manifest(tmp_path)
    (tmp_path / partitioned.MANIFEST).write_text('{"format": "other"}')
    with pytest.raises(MeasurementError, match="manifest"):
        partitioned.read_manifest(tmp_path)


def test_filters_apply_and_a_match_of_nothing_writes_nothing(capsys, store, tmp_path):
    code, text, _ = export(capsys, store, tmp_path / "mm", "--family", "matmul")
    assert code == 0
    assert "wrote 120 rows in 3 partitions" in text
    assert set(pd.read_parquet(tmp_path / "mm")["family"]) == {"matmul"}
    code, _, err = export(capsys, store, tmp_path / "none", "--device", "t4", "--model", "nope")
    assert code == 2
    assert "no stored rows match" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mm"]  # no folder, no temporary
