"""The measurement store as a partitioned Parquet dataset (``roofcast data export --format
parquet --partition-by device --output DIR``), what ``roofcast train --from DIR`` and
``predictor.learned.distributed`` read with ``dask.dataframe.read_parquet``.

Layout (Hive partitioning, what pyarrow and Dask read back)::

    DIR/_roofcast_export.json                   manifest: format, partition column, rows, columns
    DIR/device_id=<id, URI-escaped>/part-<n>.parquet    at most ``ROWS_PER_FILE`` rows per file

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.partitioned).
"""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.schema import BY_NAME, COLUMN_NAMES

MANIFEST = "_roofcast_export.json"
FORMAT = "roofcast-measurements-parquet/1"
ROWS_PER_FILE = 500_000
#: ``--partition-by`` name -> (store column: one folder per distinct value, the ``Store.read``
#: filter that selects one value).
PARTITION_COLUMNS: dict[str, tuple[str, str]] = {"device": ("device_id", "device")}


@dataclass(frozen=True)
class ExportReport:
    """What an export wrote: the folder, rows, partitions (values) and files."""

    folder: Path
    rows: int
    partitions: int
    files: int


def arrow_schema(columns: tuple[str, ...]):
    """The Arrow schema of the stored columns (module docstring)."""
    import pyarrow as pa

    types = {"float": pa.float64(), "int": pa.int64(), "str": pa.string(), "json": pa.string()}
    return pa.schema([(c, types[BY_NAME[c].kind]) for c in columns])


def partition_column(name: str) -> tuple[str, str]:
    """(store column, read filter) of a ``--partition-by`` name; MeasurementError for an
    unknown one."""
    if name not in PARTITION_COLUMNS:
        raise MeasurementError(f"cannot partition by {name!r}; choose one of "
                               f"{', '.join(PARTITION_COLUMNS)}")
    return PARTITION_COLUMNS[name]


def _check_target(folder: Path) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise MeasurementError(f"{folder} exists and is not an empty folder; give a new folder "
                               "(an export never overwrites)")
    if not folder.parent.is_dir():
        raise MeasurementError(f"the parent folder {folder.parent} does not exist; create it first")


def export_partitioned(store, folder: str | Path, partition_by: str = "device",
                       rows_per_file: int = ROWS_PER_FILE, **filters: object) -> ExportReport:
    """Write the rows of ``store`` (``Store.read(**filters)``) as a partitioned Parquet dataset
    at ``folder`` (module docstring) and return what was written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    col, filter_name = partition_column(partition_by)
    _check_target(folder)
    values = _values(store, col, filter_name, filters)
    if not values:
        raise MeasurementError("no stored rows match; nothing to export (`roofcast data stats` "
                               "lists what the store holds)")
    columns = tuple(c for c in COLUMN_NAMES if c != col)
    schema = arrow_schema(columns)
    tmp = folder.parent / f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    rows = files = 0
    written: list[str] = []
    try:
        for value in values:
            df = store.read(**{**filters, filter_name: [value]})
            if df.empty:  # no row of this value passes the other filters
                continue
            written.append(value)
            part = tmp / f"{col}={quote(value, safe='')}"
            part.mkdir()
            for i, start in enumerate(range(0, len(df), rows_per_file)):
                chunk = df.iloc[start:start + rows_per_file][list(columns)]
                table = pa.Table.from_pandas(_arrow_ready(chunk), schema=schema,
                                             preserve_index=False)
                pq.write_table(table, part / f"part-{i:05d}.parquet")
                files += 1
            rows += len(df)
        if not written:
            raise MeasurementError("no stored rows match; nothing to export (`roofcast data "
                                   "stats` lists what the store holds)")
        (tmp / MANIFEST).write_text(json.dumps({
            "format": FORMAT, "partition_by": partition_by, "partition_column": col,
            "rows": rows, "partitions": len(written), "files": files,
            "columns": list(COLUMN_NAMES)}, indent=1))
        if folder.exists():
            folder.rmdir()  # checked empty above
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportReport(folder, rows, len(written), files)


def _values(store, col: str, filter_name: str, filters: dict) -> list[str]:
    """The partition values to export: the column's distinct stored values (from
    ``Store.stats``, which reads a few columns, not whole rows), narrowed to the ones the same
    filter asks for (device names resolved to catalog ids as ``Store.read`` does)."""
    from roofcast.training_data.schema import resolve_devices

    listed = sorted(store.stats()[col].astype(str).unique())
    wanted = filters.get(filter_name)
    if wanted:
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        ids = {v if isinstance(v, str) else d for d, v in resolve_devices(names).items()}
        listed = [v for v in listed if v in ids]
    return listed


def _arrow_ready(df: pd.DataFrame) -> pd.DataFrame:
    """Int64 (nullable) -> object with None so pyarrow casts to int64 with nulls; text ''
    stays ''."""
    out = df.copy()
    for c in out.columns:
        if str(out[c].dtype) == "Int64":
            out[c] = out[c].astype(object).where(out[c].notna(), None)
    return out


def read_manifest(folder: str | Path) -> dict:
    """The manifest of an exported dataset; MeasurementError when ``folder`` is not one."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise MeasurementError(f"{folder} is not a roofcast Parquet export (no {MANIFEST}); "
                               "write one with `roofcast data export --format parquet "
                               "--partition-by device --output DIR`")
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise MeasurementError(f"{path}: unreadable manifest ({exc}); export again") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise MeasurementError(f"{path}: not a {FORMAT} manifest; export again")
    return meta


def is_export(folder: str | Path) -> bool:
    """Whether ``folder`` holds an export manifest."""
    return (Path(folder) / MANIFEST).is_file()
