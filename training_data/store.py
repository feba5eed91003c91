"""The measurement store: one SQLite file of tidy rows (``training_data.schema``).

SQLite (stdlib, no dependency): several processes may append at once (WAL journal, a busy
timeout, one ``BEGIN IMMEDIATE`` transaction per append). An append validates every row first;
one bad row rejects the whole batch with a :class:`MeasurementError` that lists bad rows by
line, and nothing is written. The insert itself is one transaction: a process killed
mid-append leaves the store as it was. Rows whose ``row_key`` is already stored are skipped
and counted as duplicates, so importing the same file twice is a no-op. An older store gets a
new schema column (``runtime``) on first open, filled on read with the device kind's default
(``schema.with_default_runtimes``). Rationale: docs/design/module-notes.md.

Default file: ``$ROOFCAST_DATA_DIR/measurements.sqlite``, else
``$XDG_DATA_HOME/roofcast/measurements.sqlite``, else
``~/.local/share/roofcast/measurements.sqlite``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.hw_catalog.confined import write_target
from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.schema import (
    BY_NAME,
    COLUMN_NAMES,
    Problem,
    normalize,
    resolve_devices,
    with_default_runtimes,
)

ENV_VAR = "ROOFCAST_DATA_DIR"
FILE_NAME = "measurements.sqlite"
SCHEMA_VERSION = "1"
BUSY_TIMEOUT_S = 120.0
MAX_LISTED = 20
CACHE_KIB = 131072
"""SQLite page cache per connection (KiB): big batches with random keys stay in memory."""
_SQL_TYPES = {"str": "TEXT", "json": "TEXT", "int": "INTEGER", "float": "REAL"}
STORED_COLUMNS: tuple[str, ...] = (*COLUMN_NAMES, "row_key", "imported_at")


@dataclass(frozen=True)
class AppendResult:
    """Rows newly written and rows skipped because the store already held them."""

    added: int
    duplicates: int


def default_path() -> Path:
    """The store file used when none is given (module docstring)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env) / FILE_NAME
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "roofcast" / FILE_NAME


def format_problems(problems: list[Problem], what: str, limit: int = MAX_LISTED) -> str:
    """One line: ``what`` + how many rows are bad + the first ``limit`` problems.

    One line because every CLI refusal is one line (the CLI's error contract); problems are
    " | "-separated (reasons hold ";"), each with its file line number.
    """
    lines = sorted({ln for ln, _ in problems})
    file_wide = all(ln == 1 for ln in lines)
    head = (f"{what}: {len(problems)} problem(s) with the columns" if file_wide else
            f"{what}: {len([ln for ln in lines if ln > 1])} bad row(s)")
    body = [f"line {ln}: {reason}" for ln, reason in problems[:limit]]
    if len(problems) > limit:
        body.append(f"... and {len(problems) - limit} more problem(s)")
    return f"{head}; nothing was written: {' | '.join(body)} -- fix them and import again"


def _use_wal(con: sqlite3.Connection) -> None:
    """Put the file in WAL mode (persistent: a no-op once the file is WAL).

    Switching the journal mode needs an exclusive lock, and SQLite answers "database is locked"
    at once, without waiting on the busy timeout, when another process holds the file (two
    processes creating the same store together). Retry with backoff up to ``BUSY_TIMEOUT_S``.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay_s = 0.002
    while True:
        try:
            # the pragma answers the mode in force: the old one when it could not switch
            if con.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() == "wal":
                return
            reason = "the journal mode did not switch to WAL"
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            reason = str(exc)
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError(reason)
        time.sleep(delay_s)
        delay_s = min(2 * delay_s, 0.1)


class Store:
    """A SQLite measurement store at ``path`` (default: :func:`default_path`)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()

    # ----------------------------------------------------------------- connection
    @contextmanager
    def _connect(self, create: bool = True) -> Iterator[sqlite3.Connection]:
        if self.path.exists() and not self.path.is_file():
            # a folder, /dev/null, a FIFO: SQLite would fail, or write a -journal/-wal beside it
            raise MeasurementError(f"{self.path} is not a file: give the measurement store's "
                                   "file path with --store (e.g. DIR/measurements.sqlite)")
        if not create and not self.path.exists():
            raise MeasurementError(f"no measurement store at {self.path}; import or measure "
                                   "something first (`roofcast data import FILE`)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            _use_wal(con)
            con.execute("PRAGMA synchronous = NORMAL")
            con.execute(f"PRAGMA cache_size = -{int(CACHE_KIB)}")
            self._ensure_schema(con)
            yield con
        except sqlite3.DatabaseError as exc:
            raise MeasurementError(f"{self.path} is not a usable roofcast measurement store "
                                   f"({exc}); give another path with --store") from exc
        finally:
            con.close()

    @staticmethod
    def _ensure_schema(con: sqlite3.Connection) -> None:
        cols = ",\n".join(f'"{c.name}" {_SQL_TYPES[c.kind]}' for c in BY_NAME.values())
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                        (SCHEMA_VERSION,))
            con.execute(f"CREATE TABLE IF NOT EXISTS measurements (id INTEGER PRIMARY KEY, {cols},"
                        " row_key TEXT NOT NULL UNIQUE, imported_at TEXT NOT NULL)")
            have = {row[1] for row in con.execute("PRAGMA table_info(measurements)")}
            for c in BY_NAME.values():
                if c.name not in have:  # a column added to the schema since the store was made
                    con.execute(f'ALTER TABLE measurements ADD COLUMN "{c.name}" '
                                f"{_SQL_TYPES[c.kind]}")
            for col in ("device_id", "family", "op_type"):
                con.execute(f"CREATE INDEX IF NOT EXISTS ix_{col} ON measurements ({col})")
            version = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        if version != SCHEMA_VERSION:
            raise MeasurementError(f"store schema version {version} is not {SCHEMA_VERSION}; "
                                   "export it with the roofcast that wrote it")

    # ----------------------------------------------------------------- writing
    def append(self, df: pd.DataFrame, *, what: str = "measurements",
               first_line: int = 2) -> AppendResult:
        """Validate every row of ``df``, then write them all in one transaction (or none).

        ``what`` names the batch in error messages (e.g. the file); ``first_line`` is the line
        number of the first row as the user sees it (2 for a CSV with a header).
        """
        checked = normalize(df, first_line=first_line)
        if checked.problems:
            raise MeasurementError(format_problems(checked.problems, what))
        return self.insert_normalized(checked.frame)

    def insert_normalized(self, frame: pd.DataFrame) -> AppendResult:
        """Write a frame that ``schema.normalize`` returned without problems, in one transaction;
        rows whose ``row_key`` is already stored are skipped and counted as duplicates."""
        return self.insert_batches([frame])

    def insert_batches(self, frames: Iterable[pd.DataFrame]) -> AppendResult:
        """Write normalized frames as they come, all in one transaction: when the iterable raises
        (a bad row further on, a size limit), the transaction is rolled back and nothing is
        written. The store is not opened until the first frame arrives."""
        it = iter(frames)
        first = next(it, None)
        if first is None:
            return AppendResult(added=0, duplicates=0)
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        cols = [*COLUMN_NAMES, "row_key"]
        names = ", ".join(f'"{c}"' for c in (*cols, "imported_at"))
        marks = ", ".join("?" * (len(cols) + 1))
        sql = f"INSERT OR IGNORE INTO measurements ({names}) VALUES ({marks})"
        rows = 0
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                before = con.total_changes
                for frame in itertools.chain([first], it):
                    con.executemany(sql, ((*r, now) for r in _records(frame[cols])))
                    rows += len(frame)
                added = con.total_changes - before
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return AppendResult(added=added, duplicates=rows - added)

    # ----------------------------------------------------------------- reading
    def read(self, *, device: str | Iterable[str] | None = None,
             family: str | Iterable[str] | None = None,
             op_type: str | Iterable[str] | None = None,
             source: str | Iterable[str] | None = None,
             model: str | Iterable[str] | None = None,
             limit: int | None = None) -> pd.DataFrame:
        """Stored rows (all schema columns plus ``row_key`` and ``imported_at``), in insertion
        order. Each filter takes one value or several; ``device`` accepts aliases; ``source``
        matches the whole source or its prefix before ':' (``neusight`` matches
        ``neusight:...``)."""
        where, params = [], []
        if device is not None:
            devices = _many(device)
            known = resolve_devices(devices)
            ids = [v if isinstance(v, str) else d for d, v in known.items()]
            where.append(_in("device_id", ids, params))
        for col, value in (("family", family), ("op_type", op_type), ("model", model)):
            if value is not None:
                where.append(_in(col, _many(value), params))
        if source is not None:
            parts = []
            for s in _many(source):
                parts.append("(source = ? OR source LIKE ?)")
                params += [s, s.replace("%", r"\%") + ":%"]
            where.append("(" + " OR ".join(parts) + ")")
        sql = "SELECT " + ", ".join(f'"{c}"' for c in STORED_COLUMNS) + " FROM measurements"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if not self.path.exists():
            return _typed(pd.DataFrame(columns=list(STORED_COLUMNS)))
        with self._connect() as con:
            df = pd.read_sql_query(sql, con, params=params)
        return with_default_runtimes(_typed(df))

    def count(self) -> int:
        """Number of stored rows (0 when the file does not exist yet)."""
        if not self.path.exists():
            return 0
        with self._connect() as con:
            return int(con.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])

    def stats(self) -> pd.DataFrame:
        """Rows per device, runtime, dataset (``source`` before ':') and family, with the median
        latency."""
        cols = ["device_id", "runtime", "dataset", "family", "rows", "op_types",
                "median_latency_s"]
        if not self.path.exists():
            return pd.DataFrame(columns=cols)
        with self._connect() as con:
            df = pd.read_sql_query(
                "SELECT device_id, runtime, source, family, op_type, latency_s FROM measurements",
                con)
        if df.empty:
            return pd.DataFrame(columns=cols)
        df["runtime"] = df["runtime"].fillna("")
        with_default_runtimes(df)
        df["dataset"] = df["source"].str.split(":", n=1).str[0]
        g = df.groupby(["device_id", "runtime", "dataset", "family"], sort=True)
        out = g.agg(rows=("latency_s", "size"), op_types=("op_type", "nunique"),
                    median_latency_s=("latency_s", "median")).reset_index()
        return out[cols]

    def export(self, path: str | Path, **filters: object) -> int:
        """Write the stored rows (``read(**filters)``) to ``path`` (.csv or .parquet), in the
        import format (schema columns only), and return the row count. In a CSV, text cells that
        a spreadsheet would run as a formula are guarded (``training_data.csv_cells``; the
        importer reads them back unchanged)."""
        path = Path(path)
        writers = {".csv": lambda d, p: _guard_text(d).to_csv(p, index=False),
                   ".parquet": lambda d, p: d.to_parquet(p, index=False),
                   ".pq": lambda d, p: d.to_parquet(p, index=False)}
        suffix = path.suffix.lower()
        if suffix not in writers:
            raise MeasurementError(
                f"cannot export to {path.name}: use a .csv or .parquet file name")
        write_target(path, what="export", error=MeasurementError)  # no link, FIFO or folder
        df = self.read(**filters)[list(COLUMN_NAMES)]  # type: ignore[arg-type]
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
        os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain open() would create it
        try:  # written beside, then renamed over: a reader never sees half a file
            writers[suffix](df, tmp)
            write_target(path, what="export", error=MeasurementError)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return len(df)


def _guard_text(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns with ``csv_cells.guard`` applied; number columns unchanged."""
    from roofcast.training_data.csv_cells import guard

    text = [c for c in df.columns if BY_NAME[c].kind in ("str", "json")]
    return df.assign(**{c: df[c].map(lambda v: guard(v) if isinstance(v, str) else v)
                        for c in text})


# --------------------------------------------------------------------- helpers
def _many(value: str | Iterable[str]) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _in(col: str, values: list[str], params: list[object]) -> str:
    params.extend(values)
    return f'"{col}" IN ({", ".join("?" * len(values))})'


def _records(frame: pd.DataFrame) -> list[tuple[object, ...]]:
    """Rows as Python tuples with NaN / NA as None (SQLite NULL)."""
    cols = []
    for name in frame.columns:
        s = frame[name]
        arr = s.astype(object).to_numpy()
        mask = s.isna().to_numpy()
        if mask.any():
            arr = arr.copy()
            arr[mask] = None
        if s.dtype.kind == "f":
            arr = np.array([None if v is None else float(v) for v in arr], dtype=object)
        elif str(s.dtype) == "Int64":
            arr = np.array([None if v is None else int(v) for v in arr], dtype=object)
        cols.append(arr)
    return list(zip(*cols, strict=True))


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    for name in STORED_COLUMNS:
        col = BY_NAME.get(name)
        kind = col.kind if col else "str"
        if kind == "float":
            df[name] = pd.to_numeric(df[name], errors="coerce").astype(float)
        elif kind == "int":
            df[name] = pd.to_numeric(df[name], errors="coerce").astype("Int64")
        else:
            df[name] = df[name].astype(object).where(df[name].notna(), "")
    return df
