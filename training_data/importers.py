"""Importers into the measurement store: the user's CSV/Parquet files and the public GPU kernels.

User files (``import_file``)
----------------------------
A CSV (UTF-8, header line, comma separated; ``.csv.gz`` is decompressed) or Parquet file with the columns of
``training_data.schema.COLUMNS`` (full list with units in ``training_data/README.md``).
Required: ``op_type``, ``device_id`` (catalog id or alias, or ``local``), ``dtype``
(fp32|fp16|bf16|int8|...) and a latency: ``latency_s`` (seconds) or ``latency_ms`` /
``latency_us`` / ``latency_ns`` (converted to seconds). Everything else is optional: shapes as
JSON (``input_shapes = [[1,64],[64,64]]``), ``attrs`` as a JSON object, ``threads_intra``,
``batch``, ``flops``, ``run_id`` (give repeated measurements of the same op distinct ids) ...
``source`` defaults to ``user:<file name>``. Every row is checked first; one bad row rejects the
whole file with a message listing the bad lines (header = line 1) and their reasons, and nothing
is written. Limits: ``MAX_ROWS`` rows and ``MAX_BYTES`` bytes per file (split larger files).

Public kernels (``import_public``)
----------------------------------
``neusight``, ``deepbench`` or ``all`` from ``../shared/data/gpu_kernels`` via
``training_data.public_kernels`` (device names resolved through the catalog's aliases; FLOPs and
bytes from the project's cost rules). Rows that module does not model are stored too, uncosted
(flops NaN): RNN/LSTM/GRU (``family = recurrent``, forward rows costed by the recurrent rule),
all-reduce (``op_type = AllReduce``, ``family = collective``, ``attrs.num_devices``) and sparse GEMM
(``family = sparse_matmul``, ``attrs.sparsity``). Conv backward rows keep the forward conv's shapes
with ``direction = bwd_data | bwd_filter``. Repeated published measurements of the same kernel in
the same source get ``run_id`` 1, 2, ... in file order. Rows that cannot be stored (device name not
in the catalog, missing or non-positive time) are counted in ``ImportReport.not_imported`` with
the reason, never dropped silently.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.schema import COLUMN_NAMES, normalize
from roofcast.training_data.store import Store, format_problems

MAX_ROWS = 2_000_000
MAX_BYTES = 512 * 2**20
PUBLIC_DATASETS: dict[str, tuple[str, ...]] = {
    "neusight": ("neusight-gemm", "neusight-conv", "neusight-vec"),
    "deepbench": ("deepbench",),
}
PUBLIC_DATASETS["all"] = tuple(d for v in PUBLIC_DATASETS.values() for d in v)
_PROVIDER = {"neusight": "pytorch-cuda", "deepbench": "vendor-libs"}
_STORAGE_DTYPE = {4: "fp32", 2: "fp16", 1: "int8"}
_ONNX_DTYPE_NAME = {"float": "fp32", "float16": "fp16", "int8": "int8", "int32": "int32"}
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
def read_measurement_file(path: str | Path, *, max_rows: int = MAX_ROWS,
                          max_bytes: int = MAX_BYTES) -> pd.DataFrame:
    """The raw table of a user's CSV (all cells as text) or Parquet file; MeasurementError with
    what to do for a missing, empty, huge, binary or non-UTF-8 file."""
    path = Path(path)
    if not path.is_file():
        raise MeasurementError(f"{path}: no such file")
    size = path.stat().st_size
    if size == 0:
        raise MeasurementError(f"{path.name}: the file is empty; expected a header line with at "
                               "least op_type, device_id, dtype, latency_s and one row per measurement")
    if size > max_bytes:
        raise MeasurementError(f"{path.name}: the file is {size / 2**20:.1f} MiB, over the limit of "
                               f"{max_bytes / 2**20:.0f} MiB per import; split it into smaller files")
    df = _read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else _read_csv(path)
    if len(df) > max_rows:
        raise MeasurementError(f"{path.name}: {len(df)} rows, over the limit of {max_rows} rows per "
                               "import; split it into smaller files")
    return df


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise MeasurementError(f"{path.name}: not a readable Parquet file ({exc}); give a .csv or "
                               ".parquet file") from exc
    return df.set_axis(pd.RangeIndex(2, 2 + len(df)))  # "line" = row + 2, as in a CSV


def _read_csv(path: Path) -> pd.DataFrame:
    """All cells as text; the index is each row's line number in the file (header = line 1)."""
    data = path.read_bytes()
    if path.suffix.lower() == ".gz" and data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise MeasurementError(f"{path.name}: not a readable gzip file ({exc})") from exc
    if b"\x00" in data[:65536]:
        raise MeasurementError(f"{path.name}: this is a binary file, not a CSV text file; export "
                               "your measurements as CSV (UTF-8) or Parquet")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise MeasurementError(
            f"{path.name}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); save the "
            "file as UTF-8 CSV") from exc
    if not text.strip():
        raise MeasurementError(f"{path.name}: the file is empty (only blank lines)")
    reader = csv.reader(io.StringIO(text, newline=""))
    records: list[list[str]] = []
    lines: list[int] = []
    problems: list[tuple[int, str]] = []
    try:
        header = next(reader)
        for rec in reader:
            if not any(cell.strip() for cell in rec):
                continue  # blank line
            if len(rec) != len(header):
                problems.append((reader.line_num, f"{len(rec)} cells but the header has "
                                                  f"{len(header)} (quote values that contain commas)"))
            records.append(rec)
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise MeasurementError(f"{path.name}: not a well-formed CSV (line {reader.line_num}: "
                               f"{exc})") from exc
    if problems:
        raise MeasurementError(format_problems(problems, f"{path.name}: not a well-formed CSV"))
    if not records:
        raise MeasurementError(f"{path.name}: a header line but no data rows")
    df = pd.DataFrame(records, columns=header, index=lines, dtype=object)
    return df.replace("", None)


def import_file(path: str | Path, store: Store | None = None, *, max_rows: int = MAX_ROWS,
                max_bytes: int = MAX_BYTES) -> ImportReport:
    """Validate every row of the user's file, then append them all to ``store`` (or nothing)."""
    path = Path(path)
    store = store or Store()
    df = read_measurement_file(path, max_rows=max_rows, max_bytes=max_bytes)
    src = next((c for c in df.columns if str(c).strip().lower() == "source"), "source")
    blank = df[src].isna() | df[src].astype(str).str.strip().eq("") if src in df.columns else True
    df[src] = df[src].where(~blank, f"user:{path.name}") if src in df.columns else f"user:{path.name}"
    checked = normalize(df, lines=df.index.to_numpy())
    if checked.problems:
        raise MeasurementError(format_problems(checked.problems, path.name))
    frame = checked.frame
    result = store.insert_normalized(frame)
    return ImportReport(path.name, len(df), result.added, result.duplicates, _per_device(frame))


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


def public_rows(name: str, data_dir: str | Path | None = None) -> tuple[pd.DataFrame, dict[str, int]]:
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
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(COLUMN_NAMES))
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
