"""Loading a sweep's Parquet dataset into the app — only what the user gave, within limits.

A sweep (``roofcast sweep SPEC.toml --output DIR``) is a folder of Parquet files, one row per
cell (``predictor.sweeps.types.CELL_COLUMNS``), possibly hive-partitioned. Two sources: a
folder path that resolves under the working directory (:func:`resolve_folder`; a symlink out
of the folder is refused, not followed), or an uploaded zip (:func:`extract_zip`: member names
checked, only ``.parquet`` members written, by our own code, counted against
``MAX_EXTRACTED_BYTES`` as they decompress). :func:`read_sweep` reads them with
``pyarrow.dataset`` (no code is run from the files) within ``MAX_FILES`` files,
``MAX_DATASET_BYTES`` on disk and ``MAX_ROWS`` rows, and checks the columns. Every refusal is
a :class:`SweepLoadError` naming the file or member and what to do. The full list of checks:
docs/design/module-notes.md.
"""

from __future__ import annotations

import io
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.sweeps.types import (
    CELL_COLUMNS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    STR_COLUMNS,
)

#: the uploaded zip's size (compressed), as the app's other uploads
MAX_ZIP_BYTES = 200 * 2**20
#: the Parquet bytes a zip may decompress to, in all
MAX_EXTRACTED_BYTES = 2 * 2**30
#: Parquet files of one sweep (a 10^7-cell sweep written in 100k-row files is 100)
MAX_FILES = 10_000
#: the Parquet bytes of one sweep folder on disk
MAX_DATASET_BYTES = 2 * 2**30
#: cells loaded at once (~1 kB each in memory: a few GB at the cap)
MAX_ROWS = 5_000_000
#: columns that must hold numbers (NaN allowed: a cell with an error, a device with no price)
NUMERIC_COLUMNS = (*INT_COLUMNS, *FLOAT_COLUMNS)
#: columns read as text (hive partition folders give them as dictionary strings)
TEXT_COLUMNS = STR_COLUMNS
#: the columns the first round of sweeps wrote (before families, systems, plans and tokens): a
#: folder with these and not the rest is an older sweep, to re-run rather than "not a sweep"
FIRST_ROUND_COLUMNS = ("cell_id", "model", "device", "runtime", "batch", "precision", "mode",
                       "estimator", "time_s", "lower_s", "upper_s", "throughput_samples_per_s",
                       "memory_bytes", "mem_capacity_bytes", "fits", "price_usd", "tdp_W",
                       "usd_per_throughput", "throughput_per_W", "dominant_bound", "task_id",
                       "error")
_CHUNK = 1 << 20


class SweepLoadError(PredictionError):
    """A sweep folder or zip cannot be loaded: the message names what and says what to do."""


@dataclass(frozen=True)
class LoadedSweep:
    """The cells (``CELL_COLUMNS`` first, then any extra columns), the Parquet files read
    (relative to the dataset folder) and the members of a zip that were skipped."""

    cells: pd.DataFrame
    files: tuple[str, ...]
    skipped: tuple[str, ...] = field(default=())


# ----------------------------------------------------------------------------- folder path
def resolve_folder(text: str, base: Path | None = None) -> Path:
    """The folder ``text`` names, resolved, if it lies under ``base`` (default: the working
    directory); else :class:`SweepLoadError`."""
    base = (base or Path.cwd()).resolve()
    text = text.strip()
    if not text:
        raise SweepLoadError("no folder given: type the path of a sweep's output folder "
                             f"(relative to {base})")
    if "\x00" in text:
        raise SweepLoadError("the folder path contains a NUL character: type a plain path")
    given = Path(text).expanduser()
    path = given if given.is_absolute() else base / given
    try:
        folder = path.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise SweepLoadError(f"{text}: no such folder under {base}; give the folder "
                             "`roofcast sweep SPEC.toml --output DIR` wrote") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a permission error
        raise SweepLoadError(f"{text}: cannot be opened ({exc})") from None
    if not folder.is_relative_to(base):
        raise SweepLoadError(f"{text} is outside the working directory {base}: the app reads "
                             "sweep folders under it only; copy or link the folder there, or "
                             "upload it zipped")
    if not folder.is_dir():
        raise SweepLoadError(f"{text} is a file, not a folder: give the sweep's output folder "
                             "(the one holding the .parquet files)")
    return folder


def parquet_files(folder: Path) -> list[Path]:
    """The ``.parquet`` files under ``folder`` (sorted; names starting with ``.`` or ``_``
    skipped, as Parquet readers do), each resolved and checked to stay inside ``folder``."""
    folder = folder.resolve()
    found = []
    for path in sorted(folder.rglob("*.parquet")):
        rel = path.relative_to(folder)
        if any(part.startswith((".", "_")) for part in rel.parts):
            continue
        real = path.resolve()
        if not real.is_relative_to(folder):
            raise SweepLoadError(f"{rel} links outside the sweep folder (to {real}): the app "
                                 "reads only files inside the folder given; remove the link")
        if real.is_file():
            found.append(real)
        if len(found) > MAX_FILES:
            raise SweepLoadError(f"more than {MAX_FILES} Parquet files under {folder}: give "
                                 "one sweep's folder, not a folder of many")
    if not found:
        raise SweepLoadError(f"no .parquet files under {folder}: give the folder "
                             "`roofcast sweep SPEC.toml --output DIR` wrote")
    return found


# ----------------------------------------------------------------------------- zip upload
def _member_path(info: zipfile.ZipInfo) -> PurePosixPath:
    """The member's relative path, or :class:`SweepLoadError` if it could leave the folder."""
    name = info.filename
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise SweepLoadError(f"the zip member {name!r} is a symbolic link: zip the files "
                             "themselves (zip -r, without -y)")
    if ("\\" in name or "\x00" in name or name.startswith("/")
            or (len(name) > 1 and name[1] == ":")):
        raise SweepLoadError(f"the zip member {name!r} has an absolute or non-POSIX path: zip "
                             "the folder with relative paths (cd to its parent; "
                             "zip -r out.zip DIR)")
    path = PurePosixPath(name)
    if any(part == ".." for part in path.parts):
        raise SweepLoadError(f"the zip member {name!r} climbs out of the folder ('..'): zip "
                             "the folder with plain relative paths")
    return path


def extract_zip(data: bytes, dest: Path) -> tuple[list[Path], list[str]]:
    """Write the zip's ``.parquet`` members under ``dest`` (each member checked:
    docs/design/module-notes.md lists how); the written files and the skipped members' names."""
    archive = _open_zip(data)
    dest = dest.resolve()
    written: list[Path] = []
    skipped: list[str] = []
    total = 0
    with archive:
        infos = archive.infolist()
        if len(infos) > 4 * MAX_FILES:
            raise SweepLoadError(f"the zip has {len(infos)} members, over {4 * MAX_FILES}: "
                                 "zip one sweep's folder")
        for info in infos:
            path = _member_path(info)
            if _is_folder_or_metadata(info, path):
                continue
            if path.suffix != ".parquet":
                skipped.append(info.filename)
                continue
            _check_member(info, len(written), total)
            target = _member_target(dest, path, info.filename)
            total += _copy_member(archive, info, target, total)
            written.append(target)
    if not written:
        raise SweepLoadError("the zip holds no .parquet files: zip the folder "
                             "`roofcast sweep SPEC.toml --output DIR` wrote")
    return written, skipped


def _open_zip(data: bytes) -> zipfile.ZipFile:
    """The upload as a zip archive, or :class:`SweepLoadError` if too large or not a zip."""
    if len(data) > MAX_ZIP_BYTES:
        raise SweepLoadError(f"the zip is {len(data) / 2**20:.1f} MB, over the upload limit of "
                             f"{MAX_ZIP_BYTES // 2**20} MB: type the folder path instead")
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise SweepLoadError("the upload is not a zip file: zip the sweep folder "
                             "(zip -r sweep.zip DIR) and upload that") from None


def _is_folder_or_metadata(info: zipfile.ZipInfo, path: PurePosixPath) -> bool:
    """A folder entry, or metadata by Parquet convention (the sweep's _roofcast_sweep.json)."""
    return info.is_dir() or any(p.startswith((".", "_")) for p in path.parts)


def _check_member(info: zipfile.ZipInfo, n_written: int, total_bytes: int) -> None:
    """:class:`SweepLoadError` if the member is encrypted, one Parquet file too many, or its
    declared size takes the extracted total past the limit."""
    if info.flag_bits & 0x1:
        raise SweepLoadError(f"the zip member {info.filename!r} is encrypted: zip "
                             "without a password")
    if n_written >= MAX_FILES:
        raise SweepLoadError(f"the zip has more than {MAX_FILES} Parquet files: zip "
                             "one sweep's folder")
    if total_bytes + info.file_size > MAX_EXTRACTED_BYTES:
        raise SweepLoadError(_too_big(info.filename))


def _member_target(dest: Path, path: PurePosixPath, name: str) -> Path:
    """Where the member goes under ``dest`` (its folder made), checked to stay inside."""
    target = dest.joinpath(*path.parts)
    if not target.resolve().is_relative_to(dest):  # belt and braces after the checks
        raise SweepLoadError(f"the zip member {name!r} would leave the folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _copy_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path,
                 total_bytes: int) -> int:
    """Copy the member to the new file ``target`` in chunks, stopping past its declared size or
    the extracted-total limit (``total_bytes`` extracted before it); the bytes written."""
    size = 0
    try:
        with archive.open(info) as src, open(target, "xb") as out:
            while chunk := src.read(_CHUNK):
                size += len(chunk)
                if size > info.file_size or total_bytes + size > MAX_EXTRACTED_BYTES:
                    raise SweepLoadError(_too_big(info.filename))
                out.write(chunk)
    except FileExistsError:
        raise SweepLoadError(f"the zip holds {info.filename!r} twice: zip the folder "
                             "once") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as exc:
        raise SweepLoadError(f"the zip member {info.filename!r} cannot be read ({exc}): "
                             "zip the folder again") from None
    return size


def _too_big(name: str) -> str:
    return (f"the zip decompresses past {MAX_EXTRACTED_BYTES // 2**30} GB (at {name!r}): "
            "type the folder path instead, or zip a smaller sweep")


# ----------------------------------------------------------------------------- reading
def read_sweep(files: list[Path], root: Path, skipped: tuple[str, ...] = ()) -> LoadedSweep:
    """The cells of the Parquet ``files`` (all under ``root``, hive folders read as columns),
    checked as docs/design/module-notes.md lists."""
    root = root.resolve()
    size = sum(f.stat().st_size for f in files)
    if size > MAX_DATASET_BYTES:
        raise SweepLoadError(f"the sweep is {size / 2**30:.2f} GB of Parquet, over "
                             f"{MAX_DATASET_BYTES // 2**30} GB: filter it first (pyarrow or "
                             "duckdb) and load the part you need")
    names = tuple(str(f.relative_to(root)) for f in files)
    try:
        dataset = pads.dataset([str(f) for f in files], format="parquet", partitioning="hive",
                               partition_base_dir=str(root))
        rows = dataset.count_rows()
        if rows > MAX_ROWS:
            raise SweepLoadError(f"the sweep has {rows:,} cells, over the app's {MAX_ROWS:,}: "
                                 "filter it first and load the part you need")
        table = dataset.to_table()
    except (pa.ArrowException, OSError) as exc:
        raise SweepLoadError(f"the sweep's Parquet files cannot be read ({_short(exc)}): give "
                             "the folder a roofcast sweep wrote, with no other .parquet files "
                             "in it") from None
    cells = check_cells(_plain(table))
    return LoadedSweep(cells=cells, files=names, skipped=tuple(skipped))


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _plain(table: pa.Table) -> pd.DataFrame:
    """The table as pandas, dictionary (partition) columns as their values."""
    cols = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        cols[name] = col
    return pa.table(cols).to_pandas()


def check_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """``cells`` with ``CELL_COLUMNS`` first, typed; :class:`SweepLoadError` when a column is
    missing or of the wrong kind, or a cell appears twice."""
    missing = [c for c in CELL_COLUMNS if c not in cells.columns]
    if missing and all(c in cells.columns for c in FIRST_ROUND_COLUMNS):
        raise SweepLoadError(f"an older roofcast sweep: the Parquet files lack the column(s) "
                             f"{', '.join(missing)} (families, systems, plans, tokens); re-run "
                             "the sweep (`roofcast sweep SPEC.toml --output DIR`) and load that")
    if missing:
        raise SweepLoadError(f"not a roofcast sweep: the Parquet files lack the column(s) "
                             f"{', '.join(missing)}; load the folder `roofcast sweep "
                             "SPEC.toml --output DIR` wrote")
    out = cells[list(CELL_COLUMNS) + [c for c in cells.columns if c not in CELL_COLUMNS]].copy()
    for col in NUMERIC_COLUMNS:
        if out[col].dtype.kind not in "iuf":
            raise SweepLoadError(f"the column {col} holds {out[col].dtype} values, not numbers: "
                                 "the files are not a roofcast sweep's output")
    if out["fits"].dtype.kind != "b":
        raise SweepLoadError(f"the column fits holds {out['fits'].dtype} values, not true/false: "
                             "the files are not a roofcast sweep's output")
    for col in TEXT_COLUMNS:
        out[col] = out[col].fillna("").astype(str)
    dup = out["cell_id"].duplicated()
    if dup.any():
        raise SweepLoadError(f"{int(dup.sum())} cell(s) appear twice (first: "
                             f"{out.loc[dup, 'cell_id'].iloc[0]}): the folder mixes sweeps or "
                             "holds a copy; give one sweep's output folder")
    return out.sort_values("cell_id", kind="stable", ignore_index=True)


def load_folder(text: str, base: Path | None = None) -> LoadedSweep:
    """The sweep in the folder the user typed (:func:`resolve_folder`)."""
    folder = resolve_folder(text, base)
    return read_sweep(parquet_files(folder), folder)


def load_zip(data: bytes) -> LoadedSweep:
    """The sweep in an uploaded zip of its folder (:func:`extract_zip`, read, then deleted)."""
    with tempfile.TemporaryDirectory(prefix="roofcast-sweep-") as tmp:
        files, skipped = extract_zip(data, Path(tmp))
        return read_sweep(files, Path(tmp), tuple(skipped))
