"""Importers into the measurement store: the user's CSV/Parquet files and the public GPU kernels.

``import_file``: a CSV (``.csv.gz`` too) or Parquet file with the columns of
``training_data.schema.COLUMNS``; required ``op_type``, ``device_id``, ``dtype`` and a latency
(``latency_s``, or ``_ms``/``_us``/``_ns`` converted to seconds). Streamed in chunks and checked
row by row inside one store transaction: one bad row rejects the file, nothing written; limits
``ROOFCAST_MAX_IMPORT_BYTES`` (after decompression) and ``ROOFCAST_MAX_IMPORT_ROWS``.

``import_public``: NeuSight and DeepBench kernels from ``../shared/data/gpu_kernels``
(``public_kernels``), costed by the project's rules; rows it does not model are stored uncosted,
rows it cannot store are counted with the reason in ``ImportReport.not_imported``.

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.importers).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from roofcast.training_data.csv_cells import unguard
from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.schema import COLUMN_NAMES, normalize
from roofcast.training_data.store import MAX_LISTED, Store, format_problems

MAX_ROWS = 500_000
MAX_BYTES = 128 * 2**20
"""Default limits per imported file: rows, and bytes as read (after gzip decompression)."""
ROWS_ENV = "ROOFCAST_MAX_IMPORT_ROWS"
BYTES_ENV = "ROOFCAST_MAX_IMPORT_BYTES"
CHUNK_ROWS = 20_000
CHUNK_BYTES = 4 * 2**20
"""A chunk is CHUNK_ROWS rows or CHUNK_BYTES bytes of the file, whichever comes first."""
#: blank lines a CSV may hold (each is skipped, but at a loop step each: a gzip of newlines
#: is a bomb)
MAX_BLANK_LINES = 100_000
#: columns a measurement file may have (the schema has about 30; a row is checked per column)
MAX_COLUMNS = 256
MAX_LINE_CHARS = 2**20
SNIFF_BYTES = 65536
PUBLIC_DATASETS: dict[str, tuple[str, ...]] = {
    "neusight": ("neusight-gemm", "neusight-conv", "neusight-vec"),
    "deepbench": ("deepbench",),
}
PUBLIC_DATASETS["all"] = tuple(d for v in PUBLIC_DATASETS.values() for d in v)
_PROVIDER = {"neusight": "pytorch-cuda", "deepbench": "vendor-libs"}
#: the runtime each public dataset timed (NeuSight's harness: PyTorch eager modules); a dataset
#: not listed keeps ``runtime`` empty, read as its device kind's default
_RUNTIME = {"neusight": "pytorch-eager"}
_STORAGE_DTYPE = {4: "fp32", 2: "fp16", 1: "int8"}
_METRIC_DIRECTION = {"time": "fwd", "latency": "fwd", "time_fwd": "fwd",
                     "time_bwd_data": "bwd_data", "time_bwd_filter": "bwd_filter",
                     "time_bwd_weights": "bwd_filter", "time_bwd": "bwd"}


@dataclass(frozen=True)
class ImportReport:
    """What one import did: rows read, newly added, already stored, rows per device/dataset, and
    rows that could not be stored (reason -> count)."""

    name: str
    rows_read: int
    added: int
    duplicates: int
    per_device: pd.DataFrame
    not_imported: dict[str, int] = field(default_factory=dict)


# --------------------------------------------------------------------------- user files
def import_limits() -> tuple[int, int]:
    """(max decompressed bytes, max rows) per imported file: ``ROOFCAST_MAX_IMPORT_BYTES`` and
    ``ROOFCAST_MAX_IMPORT_ROWS`` when set, else ``MAX_BYTES`` and ``MAX_ROWS``."""
    return _env_limit(BYTES_ENV, MAX_BYTES), _env_limit(ROWS_ENV, MAX_ROWS)


def _env_limit(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(float(text)) if re.fullmatch(r"\d+(\.\d*)?(e\d+)?", text, re.I) else -1
    except OverflowError:
        value = -1
    if value < 1:
        raise MeasurementError(f"{name}={text!r} is not a positive whole number; unset it to use "
                               f"the default {default}")
    return value


def _too_big(name: str, what: str, limit: int, env: str) -> MeasurementError:
    return MeasurementError(f"{name}: over the limit of {limit} {what} per import (refused while "
                            f"reading); split the file, or raise the limit with {env}=N")


class _CappedBytes(io.RawIOBase):
    """Bytes of ``raw`` (a file, or a decompressing gzip stream) that refuses to read past
    ``limit`` bytes (decompressed) and a NUL byte in the first 64 KiB (a binary file)."""

    def __init__(self, raw: Any, name: str, limit: int) -> None:
        self._raw, self._name, self._limit, self.count = raw, name, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        n = self._raw.readinto(buf)
        if self.count < SNIFF_BYTES and b"\x00" in bytes(memoryview(buf)[:n]):
            raise MeasurementError(f"{self._name}: this is a binary file, not a CSV text file; "
                                   "export your measurements as CSV (UTF-8) or Parquet")
        self.count += n
        if self.count > self._limit:
            raise _too_big(self._name, "bytes (decompressed)", self._limit, BYTES_ENV)
        return n


def _lines(data: io.BufferedIOBase, name: str) -> Iterator[str]:
    """Physical lines of ``data`` decoded as UTF-8 (a leading BOM dropped), each at most
    ``MAX_LINE_CHARS`` bytes (nothing past a longer one is read)."""
    number = 0
    while line := data.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) > MAX_LINE_CHARS and not line.endswith(b"\n"):
            raise MeasurementError(f"{name}: line {number} is longer than {MAX_LINE_CHARS} "
                                   "bytes; is this a measurement CSV?")
        if number == 1 and line.startswith(codecs.BOM_UTF8):
            line = line[len(codecs.BOM_UTF8):]
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MeasurementError(
                f"{name}: not UTF-8 text (byte 0x{line[exc.start]:02x} on line {number}); save the "
                "file as UTF-8 CSV") from exc


def raw_chunks(path: str | Path, *, max_rows: int | None = None, max_bytes: int | None = None,
               chunk_rows: int = CHUNK_ROWS) -> Iterator[pd.DataFrame]:
    """The user's CSV (all cells as text) or Parquet file, ``chunk_rows`` rows at a time; the index
    is each row's line number (header = line 1). The byte limit (decompressed) and the row limit
    (default: :func:`import_limits`) are checked while reading; MeasurementError with what to do
    for a missing, empty, huge, binary or non-UTF-8 file."""
    path = Path(path)
    env_bytes, env_rows = import_limits()
    max_bytes = env_bytes if max_bytes is None else max_bytes
    max_rows = env_rows if max_rows is None else max_rows
    if not path.is_file():
        raise MeasurementError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise MeasurementError(
            f"{path.name}: the file is empty; expected a header line with at "
            "least op_type, device_id, dtype, latency_s and one row per measurement"
        )
    parquet = path.suffix.lower() in (".parquet", ".pq")
    chunks = _parquet_chunks if parquet else _csv_chunks
    rows = 0
    for chunk in chunks(path, max_bytes, min(chunk_rows, max_rows + 1)):
        rows += len(chunk)
        if rows > max_rows:
            raise _too_big(path.name, "rows", max_rows, ROWS_ENV)
        yield chunk


def _parquet_chunks(path: Path, max_bytes: int, chunk_rows: int) -> Iterator[pd.DataFrame]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        declared = sum(pf.metadata.row_group(i).total_byte_size
                       for i in range(pf.metadata.num_row_groups))
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise MeasurementError(f"{path.name}: not a readable Parquet file ({exc}); give a .csv or "
                               ".parquet file") from exc
    if declared > max_bytes:
        raise _too_big(path.name, "bytes (decompressed)", max_bytes, BYTES_ENV)
    check_columns(path.name, len(pf.schema_arrow))
    bad = [f"{f.name} ({f.type})" for f in pf.schema_arrow
           if not (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
                   or pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
                   or pa.types.is_boolean(f.type) or pa.types.is_null(f.type))]
    if bad:
        raise MeasurementError(f"{path.name}: column(s) {', '.join(bad)} are not text or numbers; "
                               "store shapes and attrs as JSON text (e.g. '[[1,64],[64,64]]')")
    line, seen_bytes = 2, 0
    try:
        for batch in pf.iter_batches(batch_size=chunk_rows):
            seen_bytes += batch.nbytes
            if seen_bytes > max_bytes:
                raise _too_big(path.name, "bytes (decompressed)", max_bytes, BYTES_ENV)
            df = batch.to_pandas()
            yield df.set_axis(pd.RangeIndex(line, line + len(df)))  # "line" = row + 2, as a CSV
            line += len(df)
    except (OSError, ValueError, pa.ArrowException) as exc:
        if isinstance(exc, MeasurementError):
            raise
        raise MeasurementError(f"{path.name}: not a readable Parquet file ({exc})") from exc
    if line == 2:
        raise MeasurementError(f"{path.name}: a header but no data rows")


def _csv_chunks(path: Path, max_bytes: int, chunk_rows: int) -> Iterator[pd.DataFrame]:
    """Text cells; the index is each row's line number in the file (header = line 1)."""
    with path.open("rb") as fh:
        gz = path.suffix.lower() == ".gz" and fh.read(2) == b"\x1f\x8b"
        fh.seek(0)
        raw = gzip.GzipFile(fileobj=fh) if gz else fh
        counter = _CappedBytes(raw, path.name, max_bytes)
        reader = csv.reader(_lines(io.BufferedReader(counter), path.name))
        try:
            yield from _csv_records(reader, path.name, chunk_rows, lambda: counter.count)
        except csv.Error as exc:
            raise MeasurementError(f"{path.name}: not a well-formed CSV (line {reader.line_num}: "
                                   f"{exc})") from exc
        except (OSError, EOFError, zlib.error) as exc:
            raise MeasurementError(f"{path.name}: not a readable gzip file ({exc})") from exc


def _csv_records(reader: Any, name: str, chunk_rows: int,
                 bytes_read: Callable[[], int]) -> Iterator[pd.DataFrame]:
    """Chunks of ``chunk_rows`` rows or ``CHUNK_BYTES`` bytes of the file, whichever comes first."""
    header = next(reader, None)
    while header is not None and not any(cell.strip() for cell in header):
        header = next(reader, None)
    if header is None:
        raise MeasurementError(f"{name}: the file is empty (only blank lines)")
    check_columns(name, len(header))
    records: list[list[str]] = []
    lines: list[int] = []
    problems: list[tuple[int, str]] = []
    any_rows = False
    blank = 0
    chunk_start = bytes_read()
    for rec in reader:
        if not any(cell.strip() for cell in rec):
            blank += 1  # skipped, but each costs a step of this loop: a file of newlines is a bomb
            if blank > MAX_BLANK_LINES:
                raise MeasurementError(f"{name}: more than {MAX_BLANK_LINES} blank lines (line "
                                       f"{reader.line_num}); a measurement file holds one row "
                                       "per line")
            continue
        if len(rec) != len(header):
            problems.append((reader.line_num, f"{len(rec)} cells but the header has "
                                              f"{len(header)} (quote values that contain commas)"))
            if len(problems) >= MAX_LISTED:
                break
            continue
        records.append(rec)
        lines.append(reader.line_num)
        full = len(records) == chunk_rows or bytes_read() - chunk_start > CHUNK_BYTES
        if full and not problems:
            any_rows = True
            yield _text_frame(records, header, lines)
            records, lines, chunk_start = [], [], bytes_read()
    if problems:
        raise MeasurementError(format_problems(problems, f"{name}: not a well-formed CSV"))
    if records:
        yield _text_frame(records, header, lines)
    elif not any_rows:
        raise MeasurementError(f"{name}: a header line but no data rows")


def check_columns(name: str, n_columns: int) -> None:
    """MeasurementError when a file has more columns than a measurement row can use (the
    schema's columns plus room for extras): each column costs a pass of every check."""
    if n_columns > MAX_COLUMNS:
        raise MeasurementError(f"{name}: {n_columns} columns; a measurement file has at most "
                               f"{MAX_COLUMNS} (the columns of training_data/schema.py plus "
                               "extras): remove the columns roofcast does not read")


def _text_frame(records: list[list[str]], header: list[str], lines: list[int]) -> pd.DataFrame:
    """Cells as text ("" -> None), spreadsheet guards (``csv_cells``) removed."""
    df = pd.DataFrame(records, columns=header, index=lines, dtype=object)
    for col in range(df.shape[1]):
        s = df.iloc[:, col]
        guarded = s.str.startswith("'", na=False)
        if guarded.any():
            df.iloc[:, col] = s.where(~guarded, s[guarded].map(unguard))
    return df.replace("", None)


def checked_chunks(path: str | Path, *, source: str | None = None, max_rows: int | None = None,
                   max_bytes: int | None = None) -> Iterator[pd.DataFrame]:
    """Normalized chunks (``schema.normalize``) of the user's file; an empty ``source`` cell
    becomes ``source``. Raises MeasurementError listing the bad rows as soon as they reach
    ``MAX_LISTED`` (or at the end, or at once for problems with the columns); no chunk is yielded
    after the first bad row, so a consumer that writes in one transaction writes nothing."""
    path = Path(path)
    seen: dict[bytes, int] = {}  # row_key (128 bits) -> first line, across chunks
    problems: list[tuple[int, str]] = []
    last_line = 1
    for raw in raw_chunks(path, max_rows=max_rows, max_bytes=max_bytes):
        if source is not None:
            raw = _default_source(raw, source)
        checked = normalize(raw, lines=raw.index.to_numpy())
        if any(line == 1 for line, _ in checked.problems):
            raise MeasurementError(format_problems(checked.problems, path.name))
        problems += checked.problems + _repeats(checked.frame["row_key"], raw.index, seen)
        last_line = int(raw.index[-1])
        if len(problems) >= MAX_LISTED:
            raise MeasurementError(f"{format_problems(sorted(problems), path.name)} "
                                   f"(stopped reading at line {last_line})")
        if not problems:
            yield checked.frame
    if problems:
        raise MeasurementError(format_problems(sorted(problems), path.name))


def read_checked(path: str | Path, *, source: str | None = None) -> pd.DataFrame:
    """All rows of :func:`checked_chunks` in one frame (within the import limits)."""
    parts = list(checked_chunks(path, source=source))
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _default_source(raw: pd.DataFrame, source: str) -> pd.DataFrame:
    src = next((c for c in raw.columns if str(c).strip().lower() == "source"), None)
    if src is None:
        return raw.assign(source=source)
    blank = raw[src].isna() | raw[src].astype(str).str.strip().eq("")
    raw[src] = raw[src].where(~blank, source)
    return raw


def _repeats(keys: pd.Series, lines: Any, seen: dict[bytes, int]) -> list[tuple[int, str]]:
    """Rows whose key an earlier chunk already had (within a chunk ``normalize`` reports them)."""
    out = []
    for key, line in zip(keys, lines, strict=True):
        k = bytes.fromhex(key)[:16]
        first = seen.setdefault(k, int(line))
        if first != line and first < int(lines[0]):
            out.append((int(line), f"duplicate of line {first} (same op, shapes, device, config, "
                                   "source and run_id); give repeated measurements distinct run_id "
                                   "values"))
    return out


def import_file(path: str | Path, store: Store | None = None, *, max_rows: int | None = None,
                max_bytes: int | None = None) -> ImportReport:
    """Read, check and append the user's file chunk by chunk in one store transaction: every row
    lands, or (one bad row, a limit passed) none."""
    path = Path(path)
    store = store or Store()
    tally: list[pd.DataFrame] = []
    rows = 0

    def counted() -> Iterator[pd.DataFrame]:
        nonlocal rows
        for frame in checked_chunks(path, source=f"user:{path.name}", max_rows=max_rows,
                                    max_bytes=max_bytes):
            rows += len(frame)
            tally.append(_per_device(frame))
            yield frame

    result = store.insert_batches(counted())
    per_device = (pd.concat(tally).groupby(["device_id", "dataset"], as_index=False)["rows"].sum()
                  if tally else pd.DataFrame(columns=["device_id", "dataset", "rows"]))
    return ImportReport(path.name, rows, result.added, result.duplicates, per_device)


def _per_device(frame: pd.DataFrame) -> pd.DataFrame:
    ds = frame["source"].str.split(":", n=1).str[0]
    out = frame.assign(dataset=ds).groupby(["device_id", "dataset"]).size()
    return out.rename("rows").reset_index()


# --------------------------------------------------------------------------- public kernels
def import_public(name: str, store: Store | None = None,
                  data_dir: str | Path | None = None) -> ImportReport:
    """Import the public kernel set ``name`` (neusight | deepbench | all) into ``store``."""
    if name not in PUBLIC_DATASETS:
        raise MeasurementError(f"unknown public dataset {name!r}; expected one of "
                               f"{', '.join(PUBLIC_DATASETS)}")
    frame, not_imported = public_rows(name, data_dir)
    checked = normalize(frame)
    if checked.problems:  # our own conversion is wrong: say so, do not write
        raise MeasurementError(format_problems(checked.problems, f"public data {name}"))
    result = (store or Store()).insert_normalized(checked.frame)
    return ImportReport(f"public:{name}", len(frame) + sum(not_imported.values()), result.added,
                        result.duplicates, _per_device(checked.frame), not_imported)


def public_rows(
    name: str, data_dir: str | Path | None = None
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Schema rows of public set ``name`` and the not-importable counts (reason -> rows)."""
    from roofcast.training_data.public_kernels import PublicDataError, load_kernels, load_unmodelled

    datasets = PUBLIC_DATASETS[name]
    try:
        table = load_kernels(data_dir)
        extra = load_unmodelled(data_dir)
    except PublicDataError as exc:
        raise MeasurementError(str(exc)) from exc
    kernels = table.kernels[table.kernels["dataset"].isin(datasets)].reset_index(drop=True)
    extra = extra[extra["dataset"].isin(datasets)].reset_index(drop=True)
    not_imported: dict[str, int] = {}
    # load_kernels counts its own losses over all public files, not per dataset
    for hw, n in table.unmapped.items():
        not_imported[f"device {hw!r} not in the catalog (count over all public files)"] = n
    bad = table.skipped.get("non-positive or missing latency", 0)
    if bad:
        not_imported["non-positive or missing latency (count over all public files)"] = bad
    parts = [_modelled_rows(kernels)] if len(kernels) else []
    if len(extra):
        rows, lost = _unmodelled_rows(extra)
        parts.append(rows)
        for k, v in lost.items():
            not_imported[k] = not_imported.get(k, 0) + v
    frame = (
        pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(COLUMN_NAMES))
    )
    frame["run_id"] = _repeat_ids(frame)
    return frame.reindex(columns=list(COLUMN_NAMES)), not_imported


def _source(kernels: pd.DataFrame) -> pd.Series:
    """'neusight:<path>' / 'deepbench:<sheet>' from the publisher's 'repo:path'."""
    family = kernels["dataset"].str.split("-", n=1).str[0]
    path = kernels["source"].str.split(":", n=1).str[-1]
    return family + ":" + path


def _notes(k: pd.DataFrame) -> pd.Series:
    text = ("workload=" + k["workload"] + "; hardware=" + k["hardware"] + "; precision="
            + k["precision_raw"])
    text = text + np.where(k["split"].ne(""), "; split=" + k["split"], "")
    return text + np.where(k["kernel_name"].ne(""), "; kernel=" + k["kernel_name"], "")


def _base(k: pd.DataFrame) -> pd.DataFrame:
    """The columns every public row fills the same way."""
    out = pd.DataFrame(index=k.index)
    out["domain"] = ""
    out["model"] = ""
    out["node"] = ""
    out["dtype"] = k["storage_bytes"].map(_STORAGE_DTYPE)
    out["precision"] = k["precision"]
    out["device_id"] = k["device"]
    out["provider"] = k["dataset"].str.split("-", n=1).str[0].map(_PROVIDER)
    out["runtime"] = k["dataset"].str.split("-", n=1).str[0].map(_RUNTIME).fillna("")
    out["latency_s"] = k["latency_s"]
    out["source"] = _source(k)
    out["notes"] = _notes(k)
    out["opt_level"] = "n/a"
    return out


def _shape_json(node: Any) -> tuple[str, str, str]:
    ins = [list(t.shape) for t in node.inputs if t is not None]
    outs = [list(t.shape) for t in node.outputs]
    return (json.dumps(ins, separators=(",", ":")), json.dumps(outs, separators=(",", ":")),
            json.dumps(dict(node.attrs), sort_keys=True, separators=(",", ":")))


def _modelled_rows(k: pd.DataFrame) -> pd.DataFrame:
    from roofcast.training_data.public_kernels import kernel_nodes, kernel_workload

    out = _base(k)
    nodes = kernel_nodes(k)
    texts: dict[int, tuple[str, str, str]] = {}
    for n in nodes:
        if id(n) not in texts:
            texts[id(n)] = _shape_json(n)
    shapes = nodes.map(lambda n: texts[id(n)])
    out["input_shapes"] = shapes.str[0]
    out["output_shapes"] = shapes.str[1]
    out["attrs"] = shapes.str[2]
    out["op_type"] = k["op_type"]
    out["family"] = k["family"]
    out["direction"] = k["direction"]
    out["mode"] = np.where(k["direction"].eq("fwd"), "infer", "train")
    work = kernel_workload(k)
    for col in ("flops", "bytes_read", "bytes_written", "weight_bytes", "gemm_batch", "gemm_m",
                "gemm_n", "gemm_k"):
        out[col] = work[col]
    return out


# ----------------------------------------------------- rows public_kernels does not model
def _rnn(op_type: str, gates: int) -> Callable[[Any], dict[str, Any]]:
    """ONNX-layout RNN of DeepBench's config: X [T, N, H] (input size = hidden), W [1, G·H, H],
    R [1, G·H, H]; forward rows costed by the recurrent cost rule, backward rows uncosted."""
    def build(r: Any) -> dict[str, Any]:
        t, n, h = int(r.rnn_timesteps), int(r.batch), int(r.rnn_hidden)
        shapes = [[t, n, h], [1, gates * h, h], [1, gates * h, h]]
        row = {"op_type": op_type, "family": "recurrent", "input_shapes": shapes,
               "output_shapes": [[t, 1, n, h]], "attrs": {"hidden_size": h}}
        if r.direction == "fwd":
            row.update(_rnn_cost(op_type, shapes, [t, 1, n, h], h, r.storage_bytes))
        return row
    return build


def _rnn_cost(op_type: str, shapes: list[list[int]], out: list[int], hidden: int,
              storage_bytes: int) -> dict[str, float]:
    from roofcast.graph_import.costs import cost_of
    from roofcast.graph_import.types import OpNode, TensorInfo

    dt = {4: "float", 2: "float16", 1: "int8"}[int(storage_bytes)]
    ins = tuple(TensorInfo(nm, tuple(s), dt) for nm, s in zip("XWR", shapes, strict=True))
    node = OpNode(name=op_type.lower(), op_type=op_type, domain="", inputs=ins,
                  outputs=(TensorInfo("Y", tuple(out), dt),), attrs={"hidden_size": hidden},
                  weight_inputs=frozenset({"W", "R"}))
    cost = cost_of(node)
    if cost is None:
        return {}
    return {"flops": cost.flops, "bytes_read": cost.bytes_read,
            "bytes_written": cost.bytes_written, "weight_bytes": cost.weight_bytes}


def _allreduce(r: Any) -> dict[str, Any]:
    floats = int(re.search(r"floats=(\d+)", r.shape_or_config).group(1))  # type: ignore[union-attr]
    return {"op_type": "AllReduce", "domain": "com.microsoft", "family": "collective",
            "input_shapes": [[floats]], "output_shapes": [[floats]],
            "attrs": {"num_devices": int(r.num_devices)}}


def _sparse_gemm(r: Any) -> dict[str, Any]:
    m, n, k = int(r.M), int(r.N), int(r.K)
    sparsity = float(re.search(r"sparsity=([0-9.]+)", r.shape_or_config).group(1))  # type: ignore[union-attr]
    a = [k, m] if r.trans_a else [m, k]
    b = [n, k] if r.trans_b else [k, n]
    return {"op_type": "SparseGemm", "family": "sparse_matmul", "input_shapes": [a, b],
            "output_shapes": [[m, n]],
            "attrs": {"sparsity": sparsity, "transA": int(r.trans_a), "transB": int(r.trans_b)},
            "gemm_batch": 1.0, "gemm_m": float(m), "gemm_n": float(n), "gemm_k": float(k)}


_UNMODELLED: dict[str, Callable[[Any], dict[str, Any]]] = {
    "lstm": _rnn("LSTM", 4), "gru": _rnn("GRU", 3), "rnn_vanilla": _rnn("RNN", 1),
    "allreduce": _allreduce, "sparse_gemm": _sparse_gemm,
}


def _unmodelled_rows(x: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    x = x.copy()
    x["direction"] = x["metric"].map(_METRIC_DIRECTION)
    lost: dict[str, int] = {}
    checks = {
        "device name not in the catalog": x["device"].isna(),
        "non-positive or missing latency": ~(x["latency_s"] > 0),
        "unknown metric": x["direction"].isna(),
        "no importer for this workload": ~x["workload"].isin(list(_UNMODELLED)),
    }
    keep = pd.Series(True, index=x.index)
    for reason, mask in checks.items():
        hit = mask & keep
        for wl, n in x.loc[hit, "workload"].value_counts().items():
            lost[f"{wl}: {reason}"] = int(n)
        keep &= ~mask
    x = x[keep]
    if x.empty:
        return pd.DataFrame(columns=list(COLUMN_NAMES)), lost
    built = pd.DataFrame([_UNMODELLED[r.workload](r) for r in x.itertuples(index=False)],
                         index=x.index)
    out = _base(x)
    for col in ("input_shapes", "output_shapes", "attrs"):
        built[col] = built[col].map(lambda v: json.dumps(v, sort_keys=True, separators=(",", ":")))
    for col in built.columns:
        out[col] = built[col]
    out["domain"] = out["domain"].fillna("")
    out["direction"] = x["direction"]
    out["mode"] = x["mode"].str.extract(r"^(infer|train)", expand=False).fillna("infer")
    out["batch"] = x["batch"].where(x["workload"].isin(["lstm", "gru", "rnn_vanilla"]))
    return out, lost


def _repeat_ids(frame: pd.DataFrame) -> pd.Series:
    """'1', '2', ... for repeated rows of the same kernel, device and source, in file order."""
    key_cols = ["op_type", "domain", "input_shapes", "attrs", "dtype", "precision", "direction",
                "device_id", "mode", "source", "batch"]
    cols = [c for c in key_cols if c in frame.columns]
    filled = frame[cols].astype(object).where(frame[cols].notna(), "")
    return (filled.groupby(cols, sort=False).cumcount() + 1).astype(str)
