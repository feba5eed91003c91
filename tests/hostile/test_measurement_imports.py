"""Hostile measurement files through ``roofcast data import`` (issue 17): each case is a small
file generated here; the CLI must answer one error (exit 2, no traceback) within 2 GiB of address
space and a time limit, and write nothing. Plus spreadsheet-formula guards on every CSV roofcast
writes."""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import subprocess
import sys
import textwrap
import time
import zlib

import pandas as pd
import pytest

from roofcast.app.output import Table, emit
from roofcast.training_data.importers import import_file
from roofcast.training_data.store import Store

LIMIT_AS = 2 * 2**30
TIMEOUT_S = 60
HEADER = "op_type,device_id,dtype,latency_s,run_id"
RUNNER = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    from roofcast.app.cli import main
    code = main(sys.argv[1:])
    # the child's own peak: VmHWM is per address space (reset by exec), while ru_maxrss keeps
    # the forking parent's peak (pytest's, large late in a full run) across exec on Linux
    try:
        peak = next(int(x.split()[1]) for x in open("/proc/self/status")
                    if x.startswith("VmHWM:"))
    except (OSError, StopIteration):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"PEAK_KIB {{peak}}", file=sys.stderr)
    sys.exit(code)
""").format(limit=LIMIT_AS)


def cli(tmp_path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """(exit code, stderr without the peak line, peak RSS KiB) of ``roofcast ARGS`` run in a
    subprocess under RLIMIT_AS = 2 GiB."""
    full_env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    proc = subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env=full_env, cwd=tmp_path)
    lines = proc.stderr.splitlines()
    peak = next((int(x.split()[1]) for x in lines if x.startswith("PEAK_KIB")), -1)
    err = "\n".join(x for x in lines if not x.startswith("PEAK_KIB"))
    return proc.returncode, err, peak


def refused(tmp_path, path, pattern: str, env: dict[str, str] | None = None) -> int:
    """Import ``path`` via the CLI; assert a clean refusal matching ``pattern`` and an untouched
    store; return the peak RSS (KiB)."""
    store = tmp_path / "store.sqlite"
    code, err, peak = cli(tmp_path, "data", "import", str(path), "--store", str(store), env=env)
    assert "Traceback" not in err, err
    assert code == 2, err
    assert err.startswith("roofcast data: error:"), err
    assert err.count("roofcast data: error:") == 1, err
    assert re.search(pattern, err), err
    assert not store.exists() or Store(store).count() == 0
    return peak


def wide_rows(start: int, n: int, width: int = 100_000) -> str:
    """Valid, distinct rows with a ``width``-character notes cell (compresses ~1000:1)."""
    pad = "x" * width
    return "".join(f"MatMul,t4,fp16,0.001,r{i},{pad}\n" for i in range(start, start + n))


# --------------------------------------------------------------------------- size bombs
def gzip_rows(n: int, width: int = 100_000) -> bytes:
    """One gzip member: the header and ``n`` distinct wide rows, compressed as they are made."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip container
    parts = [z.compress((HEADER + ",notes\n").encode())]
    for i in range(n):
        parts.append(z.compress(wide_rows(i, 1, width).encode()))
    return b"".join([*parts, z.flush()])


def test_gzip_bomb_of_distinct_rows_is_refused_at_the_decompressed_byte_limit(tmp_path):
    # 2 GiB of decompressed CSV in ~3 MB: 1400 distinct 100 kB rows (140 MB), then one member of
    # 100 rows repeated; the byte limit (128 MiB) is reached inside the first member
    member = gzip.compress(wide_rows(10_000, 100).encode(), compresslevel=9)
    path = tmp_path / "bomb.csv.gz"
    path.write_bytes(gzip_rows(1400) + member * 190)
    assert path.stat().st_size < 4 * 2**20
    peak = refused(tmp_path, path, r"over the limit of 134217728 bytes \(decompressed\).*"
                                   r"ROOFCAST_MAX_IMPORT_BYTES")
    assert 0 < peak < 1024 * 1024  # KiB: well under 1 GiB


def test_gzip_bomb_of_repeated_rows_stops_at_the_first_duplicates(tmp_path):
    head = gzip.compress((HEADER + ",notes\n" + wide_rows(0, 100)).encode(), compresslevel=9)
    member = gzip.compress(wide_rows(0, 100).encode(), compresslevel=9)
    path = tmp_path / "repeats.csv.gz"
    path.write_bytes(head + member * 200)
    refused(tmp_path, path, r"(?s)line 102: duplicate of line 2 .*stopped reading at line \d+")


def test_gzip_of_newlines_is_refused_at_the_blank_line_limit(tmp_path):
    """1 GiB of blank lines in 1 MB: each is skipped, but one loop step each would run for
    minutes under the byte limit alone; the blank-line limit stops it at once."""
    head = gzip.compress((HEADER + "\n" + "MatMul,t4,fp16,0.001,r0\n").encode())
    blanks = gzip.compress(b"\n" * 2**20, compresslevel=9)  # one member, repeated: 1 GiB
    path = tmp_path / "newlines.csv.gz"
    path.write_bytes(head + blanks * 1024)
    start = time.perf_counter()
    refused(tmp_path, path, r"more than 100000 blank lines")
    assert time.perf_counter() - start < 20


def test_too_many_columns_are_refused_before_the_rows(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text(HEADER + "".join(f",c{i}" for i in range(10_000)) + "\n"
                    + "MatMul,t4,fp16,0.001,r0" + ",x" * 10_000 + "\n")
    refused(tmp_path, path, r"10005 columns; a measurement file has at most 256")


def test_byte_limit_is_a_documented_setting(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text(HEADER + ",notes\n" + wide_rows(0, 30))
    refused(tmp_path, path, r"over the limit of 1000000 bytes",
            {"ROOFCAST_MAX_IMPORT_BYTES": "1e6"})


def test_row_limit_is_checked_while_reading(tmp_path):
    path = tmp_path / "many.csv"
    path.write_text(HEADER + "\n" + "".join(f"MatMul,t4,fp16,0.001,r{i}\n" for i in range(5000)))
    refused(tmp_path, path, r"over the limit of 1000 rows per import.*ROOFCAST_MAX_IMPORT_ROWS=N",
            {"ROOFCAST_MAX_IMPORT_ROWS": "1000"})


def test_a_bad_limit_setting_is_a_clean_error(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text(HEADER + "\nMatMul,t4,fp16,0.001,r1\n")
    refused(tmp_path, path, r"ROOFCAST_MAX_IMPORT_ROWS='lots' is not a positive whole number",
            {"ROOFCAST_MAX_IMPORT_ROWS": "lots"})


def test_bad_rows_stop_the_read_before_a_bomb_that_follows(tmp_path):
    bad = "".join(f"MatMul,t4,fp16,-1,r{i}\n" for i in range(30))
    head = gzip.compress((HEADER + ",notes\n").encode() + bad.replace("\n", ",\n").encode())
    member = gzip.compress(wide_rows(100, 100).encode(), compresslevel=9)
    path = tmp_path / "bad_then_bomb.csv.gz"
    path.write_bytes(head + member * 200)
    refused(tmp_path, path, r"latency_s = -1 must be > 0")


def test_a_line_without_end_is_refused_at_the_line_limit(tmp_path):
    path = tmp_path / "oneline.csv.gz"
    path.write_bytes(gzip.compress((HEADER + "\n" + "MatMul," * 2_000_000).encode()))
    refused(tmp_path, path, r"line 2 is longer than 1048576 bytes")


def test_binary_file_named_csv(tmp_path):
    path = tmp_path / "zeros.csv"
    path.write_bytes(b"\x00" * 100_000)
    refused(tmp_path, path, r"binary file")


def test_a_bad_last_row_rejects_the_whole_file(tmp_path):
    body = "".join(f"MatMul,t4,fp16,0.001,r{i}\n" for i in range(25_000))
    path = tmp_path / "last_bad.csv"
    path.write_text(HEADER + "\n" + body + "MatMul,t4,fp16,abc,rX\n")
    refused(tmp_path, path, r"line 25002: latency_s: 'abc' is not a number")


def test_a_duplicate_across_chunks_is_found(tmp_path):
    body = "".join(f"MatMul,t4,fp16,0.001,r{i}\n" for i in range(25_000))
    path = tmp_path / "dup.csv"
    path.write_text(HEADER + "\n" + body + "MatMul,t4,fp16,0.002,r3\n")
    refused(tmp_path, path, r"line 25002: duplicate of line 5")


# --------------------------------------------------------------------------- cell values
CELLS = {
    "batch=1e19": ("batch", "1e19", r"batch: '1e19' is out of range"),
    "batch=-5": ("batch", "-5", r"batch = -5 must be >= 1"),
    "flops=1e308": ("flops", "1e308", r"flops = 1e\+308 is over 1e\+21"),
    "flops=inf": ("flops", "inf", r"flops is infinite"),
    "bytes_read=-1": ("bytes_read", "-1", r"bytes_read = -1 must be >= 0"),
    "negative dim": ("input_shapes", '"[[-1,64]]"', r"input_shapes: shape out of range"),
    "dim 1e30 as int": ("input_shapes", f'"[[{10**30},64]]"', r"input_shapes: shape out of range"),
    "dim 1e30 as float": ("input_shapes", '"[[1e30,64]]"', r"input_shapes: each shape must be"),
    "2^60 elements": ("output_shapes", f'"[[{2**30},{2**30}]]"', r"output_shapes: shape out of"),
    "latency=nan": ("latency_ms", "nan", r"latency_s is empty or NaN"),
    "latency=inf": ("latency_ms", "inf", r"latency_s is infinite"),
    "latency=1e300": ("latency_us", "1e300", r"is over 1 hour"),
    "threads=2.5": ("threads_intra", "2.5", r"threads_intra: '2.5' is not a whole number"),
    "unknown device": ("device_id", "quantum-9000", r"line 2: .*quantum-9000"),
}


@pytest.mark.parametrize("case", list(CELLS))
def test_out_of_range_cells_are_reported_by_line(tmp_path, case):
    col, value, pattern = CELLS[case]
    base = {"op_type": "MatMul", "device_id": "t4", "dtype": "fp16", "latency_s": "0.001"}
    if col.startswith("latency_"):
        del base["latency_s"]
    base[col] = value
    path = tmp_path / "cell.csv"
    path.write_text(",".join(base) + "\n" + ",".join(base.values()) + "\n")
    refused(tmp_path, path, pattern)


def test_formula_op_type_is_not_an_op_name(tmp_path):
    path = tmp_path / "formula.csv"
    path.write_text(HEADER + "\n\"=cmd|' /C calc'!A0\",t4,fp16,0.001,r1\n")
    refused(tmp_path, path, r"line 2: op_type \"=cmd.*is not an op name")


@pytest.mark.parametrize("kind", ["bytes", "list"])
def test_parquet_bytes_and_list_columns(tmp_path, kind):
    df = pd.DataFrame({"op_type": ["MatMul"], "device_id": ["t4"], "dtype": ["fp16"],
                       "latency_s": [0.001]})
    df["input_shapes"] = [b"\x00\x01"] if kind == "bytes" else [[1, 64]]
    path = tmp_path / f"{kind}.parquet"
    df.to_parquet(path)
    refused(tmp_path, path, r"column\(s\) input_shapes .* are not text or numbers")


# --------------------------------------------------------------------------- CSV written out
FORMULA = "=cmd|' /C calc'!A0"


def test_export_guards_formula_cells_and_reimports_unchanged(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    src = tmp_path / "m.csv"
    with src.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*HEADER.split(","), "notes", "model", "flops"])
        w.writerow(["MatMul", "t4", "fp16", "0.001", "@SUM(A1)", FORMULA, "-x", "2e9"])
        w.writerow(["MatMul", "t4", "fp16", "0.002", "'+1", "plain", "''-kept", "0"])
    assert import_file(src, store).added == 2
    stored = store.read()  # a guarded cell is read as the text it guards
    assert list(stored["run_id"]) == ["@SUM(A1)", "+1"]
    assert list(stored["model"]) == ["-x", "'-kept"]
    out = tmp_path / "out.csv"
    assert store.export(out) == 2
    cells = list(csv.DictReader(out.open(newline="")))
    assert [c["notes"] for c in cells] == ["'" + FORMULA, "plain"]
    assert [c["run_id"] for c in cells] == ["'@SUM(A1)", "'+1"]
    assert [c["model"] for c in cells] == ["'-x", "''-kept"]
    assert [c["flops"] for c in cells] == ["2000000000.0", "0.0"]
    assert all(not v.startswith(("=", "+", "-", "@")) for c in cells for v in c.values())
    again = import_file(out, Store(tmp_path / "s2.sqlite"))
    assert again.added == 2
    back = Store(tmp_path / "s2.sqlite").read()
    for col in ("notes", "run_id", "model"):
        assert list(back[col]) == list(stored[col])
    assert import_file(out, store).duplicates == 2  # same rows as before the round trip


def test_table_csv_guards_text_but_keeps_negative_numbers():
    buf = io.StringIO()
    emit({"t": Table(("name", "delta"), (("=1+2", -3.5), ("-x", -2), ("ok", 1.0)))}, "csv",
         out=buf)
    rows = list(csv.reader(io.StringIO(buf.getvalue())))
    assert rows == [["name", "delta"], ["'=1+2", "-3.5"], ["'-x", "-2"], ["ok", "1.0"]]
