"""The ``runtime`` column of a measurement row: validated names, old rows read as the device
kind's default runtime, row keys that did not move, stores made before the column, exports."""

from __future__ import annotations

import hashlib
import sqlite3

import pandas as pd
import pytest

from roofcast.training_data.schema import (
    BY_NAME,
    DEFAULT_RUNTIMES,
    KEY_COLUMNS,
    _key_part,
    normalize,
)
from roofcast.training_data.store import Store


def rows(**cols) -> pd.DataFrame:
    base = {"op_type": ["MatMul"], "device_id": ["t4"], "dtype": ["fp16"], "latency_s": [1e-3]}
    base.update(cols)
    n = max(len(v) for v in base.values())
    return pd.DataFrame({k: v * n if len(v) == 1 else v for k, v in base.items()})


def test_default_runtimes_are_the_predictors():
    """Kept as data on the data side (which never imports the predictor); equal by this test."""
    from roofcast.predictor.runtimes.catalog import DEFAULTS

    assert DEFAULT_RUNTIMES == DEFAULTS


def test_a_row_without_a_runtime_is_read_as_its_device_kinds_default():
    c = normalize(rows(device_id=["t4", "local", "xeon-8480plus", "Tesla T4"],
                       run_id=["a", "b", "c", "d"]))
    assert c.problems == []
    assert list(c.frame["runtime"]) == [DEFAULT_RUNTIMES["gpu"], DEFAULT_RUNTIMES["cpu"],
                                        DEFAULT_RUNTIMES["cpu"], DEFAULT_RUNTIMES["gpu"]]


def test_a_well_formed_runtime_name_is_kept_even_when_no_profile_has_it():
    c = normalize(rows(runtime=["torch-compile", "tensorrt", "onnxruntime-cuda", "vllm_0.6"],
                       run_id=["a", "b", "c", "d"]))
    assert c.problems == []
    assert list(c.frame["runtime"]) == ["torch-compile", "tensorrt", "onnxruntime-cuda",
                                        "vllm_0.6"]


@pytest.mark.parametrize("bad", ["=cmd|' /C calc'!A0", "pytorch eager", "x" * 65, "-leading",
                                 "rt;drop table", "name\nnext"])
def test_a_malformed_runtime_is_a_problem_on_its_line(bad):
    problems = normalize(rows(runtime=["pytorch-eager", bad], run_id=["a", "b"])).problems
    assert [line for line, _ in problems] == [3]
    assert "is not a runtime name" in problems[0][1]


def old_key(frame: pd.DataFrame) -> str:
    """The row key as computed before the runtime column existed."""
    parts = [_key_part(frame[c]) for c in KEY_COLUMNS]
    return hashlib.sha256("\x1f".join(next(zip(*parts, strict=True))).encode()).hexdigest()


def test_row_keys_move_only_for_a_runtime_other_than_the_default():
    none = normalize(rows()).frame
    explicit = normalize(rows(runtime=[DEFAULT_RUNTIMES["gpu"]])).frame
    other = normalize(rows(runtime=["torch-compile"])).frame
    assert "runtime" not in KEY_COLUMNS
    assert none["row_key"].iloc[0] == old_key(none) == explicit["row_key"].iloc[0]
    assert other["row_key"].iloc[0] != none["row_key"].iloc[0]
    same_op_two_runtimes = normalize(rows(runtime=["pytorch-eager", "torch-compile"]))
    assert same_op_two_runtimes.problems == []  # not duplicates of each other


def old_store(path) -> None:
    """A store as roofcast wrote it before the runtime column: same table less that column,
    holding one row of ``rows()`` on a GPU."""
    frame = normalize(rows()).frame
    cols = [c for c in BY_NAME.values() if c.name != "runtime"]
    types = {"str": "TEXT", "json": "TEXT", "int": "INTEGER", "float": "REAL"}
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("CREATE TABLE measurements (id INTEGER PRIMARY KEY, "
                + ", ".join(f'"{c.name}" {types[c.kind]}' for c in cols)
                + ", row_key TEXT NOT NULL UNIQUE, imported_at TEXT NOT NULL)")
    names = [c.name for c in cols]
    values = [None if pd.isna(v) else (int(v) if isinstance(v, int) else v)
              for v in frame.iloc[0][names]]
    con.execute(f"INSERT INTO measurements ({', '.join(repr(n) for n in names)}, row_key, "
                f"imported_at) VALUES ({', '.join('?' * (len(names) + 2))})",
                [*values, frame["row_key"].iloc[0], "2026-01-01T00:00:00Z"])
    con.commit()
    con.close()


def test_a_store_made_before_the_column_gains_it_and_reads_old_rows_as_the_default(tmp_path):
    path = tmp_path / "old.sqlite"
    old_store(path)
    store = Store(path)
    got = store.read()
    assert list(got["runtime"]) == [DEFAULT_RUNTIMES["gpu"]]
    again = store.append(rows(runtime=[DEFAULT_RUNTIMES["gpu"]]))
    assert (again.added, again.duplicates) == (0, 1)  # the same measurement as the old row
    other = store.append(rows(runtime=["torch-compile"]))
    assert (other.added, other.duplicates) == (1, 0)
    assert list(store.read()["runtime"]) == [DEFAULT_RUNTIMES["gpu"], "torch-compile"]


def test_export_carries_the_runtime_and_imports_back(tmp_path):
    store = Store(tmp_path / "a.sqlite")
    store.append(rows(runtime=["torch-compile", ""], run_id=["a", "b"]))
    out = tmp_path / "rows.csv"
    assert store.export(out) == 2
    exported = pd.read_csv(out, keep_default_na=False)
    assert list(exported["runtime"]) == ["torch-compile", DEFAULT_RUNTIMES["gpu"]]
    back = Store(tmp_path / "b.sqlite")
    back.append(exported)
    pd.testing.assert_series_equal(back.read()["row_key"], store.read()["row_key"])


def test_the_ort_collector_records_the_runtime_it_measured():
    from roofcast.training_data.collectors.ort_cpu import MeasureConfig, measure_model
    from tests.training_data.collect_helpers import conv_matmul_model

    m = measure_model(conv_matmul_model(), {"batch": 1}, MeasureConfig(repeats=1, warmup=0))
    assert len(m.rows) > 0
    assert set(m.rows["runtime"]) == {"onnxruntime-cpu"}


def test_roofcast_measure_records_the_runtime_in_the_store_and_the_file(tmp_path, capsys):
    import json

    from roofcast.app.cli import main
    from tests.training_data.collect_helpers import conv_matmul_model

    model = tmp_path / "tiny.onnx"
    model.write_bytes(conv_matmul_model().SerializeToString())
    common = [str(model), "--batch", "1", "--repeats", "1", "--warmup", "0", "--format", "json"]
    assert main(["measure", *common, "--output", str(tmp_path / "rows.csv")]) == 0
    assert json.loads(capsys.readouterr().out)["runtime"] == "onnxruntime-cpu"
    saved = pd.read_csv(tmp_path / "rows.csv", keep_default_na=False)
    assert set(saved["runtime"]) == {"onnxruntime-cpu"}
    assert main(["measure", *common, "--store", str(tmp_path / "m.sqlite")]) == 0
    assert set(Store(tmp_path / "m.sqlite").read()["runtime"]) == {"onnxruntime-cpu"}


def test_stats_count_rows_per_runtime(tmp_path):
    path = tmp_path / "old.sqlite"
    old_store(path)  # one t4 row without a runtime: pytorch-eager
    store = Store(path)
    store.append(rows(runtime=["torch-compile", "torch-compile"], run_id=["a", "b"]))
    st = store.stats().set_index(["device_id", "runtime"])
    assert st.loc[("t4", DEFAULT_RUNTIMES["gpu"]), "rows"] == 1
    assert st.loc[("t4", "torch-compile"), "rows"] == 2
