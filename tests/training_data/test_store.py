"""The SQLite measurement store: atomic validated appends, duplicates, concurrency, crashes."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.schema import COLUMN_NAMES
from roofcast.training_data.store import ENV_VAR, FILE_NAME, Store, default_path

REPO = Path(__file__).resolve().parents[2]


def rows(n: int, tag: str = "a", device: str = "t4") -> pd.DataFrame:
    """n distinct measurements (distinct run_id)."""
    return pd.DataFrame({
        "op_type": "MatMul", "family": "matmul", "device_id": device, "dtype": "fp16",
        "input_shapes": "[[64,64],[64,64]]", "latency_s": [1e-4 * (1 + i % 7) for i in range(n)],
        "run_id": [f"{tag}{i}" for i in range(n)], "source": f"test:{tag}",
    })


def integrity(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def test_append_then_reappend_counts_duplicates(tmp_path):
    s = Store(tmp_path / "m.sqlite")
    assert s.append(rows(5)).added == 5
    again = s.append(rows(5))
    assert (again.added, again.duplicates) == (0, 5)
    assert s.count() == 5
    mixed = s.append(rows(8))
    assert (mixed.added, mixed.duplicates) == (3, 5)


def test_a_bad_row_rejects_the_whole_batch(tmp_path):
    s = Store(tmp_path / "m.sqlite")
    s.append(rows(3, "x"))
    bad = rows(4, "y")
    bad.loc[2, "latency_s"] = -1.0
    with pytest.raises(MeasurementError) as e:
        s.append(bad, what="y.csv")
    msg = str(e.value)
    assert msg.startswith("y.csv: 1 bad row(s); nothing was written")
    assert "line 4: latency_s = -1 must be > 0 seconds" in msg
    assert s.count() == 3


def test_error_listing_is_capped(tmp_path):
    bad = rows(50).assign(latency_s=0.0)
    with pytest.raises(MeasurementError) as e:
        Store(tmp_path / "m.sqlite").append(bad)
    msg = str(e.value)
    assert "50 bad row(s)" in msg
    assert "\n" not in msg
    assert msg.count("line ") == 20
    assert "... and 30 more problem(s)" in msg


def test_read_filters_and_round_trip_types(tmp_path):
    s = Store(tmp_path / "m.sqlite")
    s.append(rows(3, "a", device="t4"))
    s.append(rows(2, "b", device="Tesla V100-PCIE-32GB").assign(family="conv", op_type="Conv",
                                                                threads_intra=2))
    assert len(s.read()) == 5
    assert len(s.read(device="t4")) == 3
    assert len(s.read(device="Tesla V100-PCIE-32GB")) == 2  # alias resolved
    assert len(s.read(family="conv")) == 2
    assert len(s.read(op_type=["MatMul", "Conv"])) == 5
    assert len(s.read(source="test")) == 5  # prefix before ':'
    assert len(s.read(source="test:b")) == 2
    assert len(s.read(limit=1)) == 1
    conv = s.read(family="conv")
    assert list(conv.columns) == [*COLUMN_NAMES, "row_key", "imported_at"]
    assert conv.threads_intra.tolist() == [2, 2]
    assert conv.latency_s.tolist() == pytest.approx([1e-4, 2e-4])


def test_stats_counts_rows_per_device_dataset_family(tmp_path):
    s = Store(tmp_path / "m.sqlite")
    s.append(rows(3, "a"))
    s.append(rows(2, "b", device="v100-pcie-32gb").assign(family="conv"))
    st = s.stats().set_index(["device_id", "family"])
    assert st.loc[("t4", "matmul"), "rows"] == 3
    assert st.loc[("v100-pcie-32gb", "conv"), "rows"] == 2
    assert set(st["dataset"]) == {"test"}
    assert st.loc[("t4", "matmul"), "median_latency_s"] == pytest.approx(2e-4)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_export_is_reimportable_as_duplicates(tmp_path, suffix):
    s = Store(tmp_path / "m.sqlite")
    s.append(rows(4))
    out = tmp_path / f"out{suffix}"
    assert s.export(out) == 4
    df = pd.read_csv(out, dtype=str) if suffix == ".csv" else pd.read_parquet(out)
    assert list(df.columns) == list(COLUMN_NAMES)
    again = s.append(df)
    assert (again.added, again.duplicates) == (0, 4)


def test_export_refuses_unknown_format(tmp_path):
    s = Store(tmp_path / "m.sqlite")
    with pytest.raises(MeasurementError, match=r"\.csv or \.parquet"):
        s.export(tmp_path / "x.xlsx")


def test_not_a_store_file_is_a_user_error(tmp_path):
    p = tmp_path / "junk.sqlite"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(MeasurementError, match="not a usable roofcast measurement store"):
        Store(p).append(rows(1))


def test_empty_or_missing_store_reads_empty(tmp_path):
    s = Store(tmp_path / "none.sqlite")
    assert s.count() == 0
    assert s.read().empty
    assert s.stats().empty


def test_default_path_env_and_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "d"))
    assert default_path() == tmp_path / "d" / FILE_NAME
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert default_path() == tmp_path / "x" / "roofcast" / FILE_NAME


# ------------------------------------------------------------------ concurrency and crashes
def _writer(path: str, tag: str, barrier) -> None:
    barrier.wait()
    store = Store(path)
    for chunk in range(10):  # 10 appends of 100 rows: the two writers interleave
        store.append(rows(100, f"{tag}{chunk}-"))


def test_two_processes_appending_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "m.sqlite")
    Store(path).count()
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(path, tag, barrier)) for tag in ("p", "q")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    s = Store(path)
    assert s.count() == 2000
    assert s.read().row_key.nunique() == 2000
    assert integrity(Path(path)) == "ok"


CHILD = textwrap.dedent("""
    import sqlite3, sys
    import pandas as pd
    import roofcast.training_data.store as st
    st.CACHE_KIB = 64  # a tiny page cache: the open transaction spills pages into the WAL
    real_connect = sqlite3.connect
    def connect(*a, **k):
        con = real_connect(*a, **k)
        def trace(sql):
            if sql.startswith("INSERT OR IGNORE INTO measurements"):
                con.set_trace_callback(None)
                print("inserting", flush=True)
        con.set_trace_callback(trace)
        return con
    st.sqlite3.connect = connect
    n = int(sys.argv[2])
    df = pd.DataFrame({"op_type": "Conv", "device_id": "t4", "dtype": "fp32",
                       "latency_s": 1e-3, "run_id": [f"big{i}" for i in range(n)],
                       "notes": "x" * 200})
    st.Store(sys.argv[1]).append(df)
    print("done", flush=True)
""")


def test_killed_import_leaves_the_store_as_it_was(tmp_path):
    path = tmp_path / "m.sqlite"
    s = Store(path)
    s.append(rows(10))
    wal = Path(str(path) + "-wal")
    wal_before = wal.stat().st_size if wal.exists() else 0
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), "60000"],
                             stdout=subprocess.PIPE, text=True, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert child.stdout.readline().strip() == "inserting"
        deadline = time.monotonic() + 20
        while (not wal.exists() or wal.stat().st_size <= wal_before + 2 * 2**20) \
                and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.02)
        assert child.poll() is None, "the import finished before it could be killed"
        grown = wal.stat().st_size - wal_before
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    assert grown > 2 * 2**20  # uncommitted pages were on disk when it died
    assert integrity(path) == "ok"
    assert Store(path).count() == 10
    assert Store(path).append(rows(3, "after")).added == 3


def test_insert_batches_is_one_transaction_rolled_back_when_the_source_fails(tmp_path):
    from roofcast.training_data.schema import normalize

    store = Store(tmp_path / "s.sqlite")
    store.append(rows(2, "old"))

    def batches():
        yield normalize(rows(3, "x")).frame
        yield normalize(rows(3, "y")).frame
        raise MeasurementError("bad row further on")

    with pytest.raises(MeasurementError, match="further on"):
        store.insert_batches(batches())
    assert store.count() == 2
    assert store.insert_batches(iter(())).added == 0
    result = store.insert_batches(normalize(rows(3, t)).frame for t in ("x", "y", "old"))
    assert (result.added, result.duplicates) == (7, 2)  # 2 of rows(3, "old") are stored
