"""Reading device files without trusting them: which files are read, and how.

Each ``*.toml`` entry of a device folder is read by :func:`read_device_file`, which raises
``HardwareSpecError`` naming the file before interpreting a byte unless it is a regular file
inside the folder (``confined``), at most ``MAX_FILE_BYTES``, UTF-8, with dotted keys of at most
``MAX_KEY_PARTS`` parts (``tomllib`` memory grows with the square of a key's length) and valid
TOML. :func:`fingerprint` stats the entries for the catalog cache without raising;
:class:`SkippedFiles` is the loader's policy: a built-in file raises, a user file is skipped
with a one-line warning.

Rationale: ``docs/design/module-notes.md`` (roofcast.hw_catalog.device_files).
"""

from __future__ import annotations

import contextlib
import os
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from roofcast.hw_catalog.confined import read_confined
from roofcast.hw_catalog.errors import DeviceFileWarning, HardwareSpecError
from roofcast.hw_catalog.safe_load import MAX_KEY_PARTS, load_toml

MAX_FILE_BYTES = 256 * 1024
"""Largest device file read (bytes)."""
__all__ = ["MAX_FILE_BYTES", "MAX_KEY_PARTS", "SkippedFiles", "catalog_files",
           "check_file_name", "device_files", "fingerprint", "parse_toml", "read_bytes",
           "read_device_file"]


def device_files(folder: Path) -> list[Path]:
    """The ``*.toml`` entries of ``folder`` (any file type; sorted), ``[]`` if it is no folder."""
    try:
        return sorted(folder.glob("*.toml")) if folder.is_dir() else []
    except OSError:
        return []


def catalog_files(builtin: Path, user: Path) -> Iterator[tuple[Path, Path, str]]:
    """(folder, file, origin) of each file of the built-in folder ("builtin") then the user's
    ("user"); a user folder that is the built-in one is read once."""
    for folder, origin in ((builtin, "builtin"), (user, "user")):
        if builtin == user and origin == "user":
            continue
        for path in device_files(folder):
            yield folder, path, origin


def check_file_name(path: Path, doc_id: str) -> None:
    """A file's ``id`` must be its name."""
    if path.stem != doc_id:
        raise HardwareSpecError(f"{path}: file name must be '{doc_id}.toml' to match its id "
                                f"{doc_id!r}; rename the file or fix the id")


def fingerprint(folders: tuple[Path, ...]) -> tuple[tuple[str, int, int, int], ...]:
    """(path, inode, mtime_ns, size) of every device file entry; never raises.

    A followed link's target is stat-ed too, so editing the target reloads the catalog."""
    out = []
    for folder in folders:
        for p in device_files(folder):
            for follow in (False, True):
                try:
                    st = os.stat(p, follow_symlinks=follow)
                except OSError:
                    out.append((str(p), -1, -1, -1))
                    break
                out.append((str(p), st.st_ino, st.st_mtime_ns, st.st_size))
                if not stat.S_ISLNK(st.st_mode):
                    break
    return tuple(out)


def read_bytes(path: Path, folder: Path) -> bytes:
    """The bytes of a regular device file inside ``folder`` (``confined``), at most
    ``MAX_FILE_BYTES``; ``HardwareSpecError`` naming the file otherwise."""
    return read_confined(path, folder, max_bytes=MAX_FILE_BYTES, what="device file",
                         error=HardwareSpecError)


def parse_toml(data: bytes, label: str) -> dict[str, Any]:
    """Decode UTF-8 and parse TOML through the guarded loader (``safe_load``: key depth,
    nesting); every problem is a ``HardwareSpecError`` naming ``label``."""
    return load_toml(data, label, error=HardwareSpecError, max_bytes=MAX_FILE_BYTES)


def read_device_file(path: Path, folder: Path) -> dict[str, Any]:
    """The parsed document of one device file of ``folder`` (module docstring)."""
    return parse_toml(read_bytes(path, folder), str(path))


MAX_WARNINGS = 10
"""Skipped files reported one by one; more are summarised in one line."""


class SkippedFiles:
    """Problems of the files being loaded: a built-in file's problem is raised (a packaging bug
    the test suite catches), a user file's is recorded and the file skipped, so one bad file
    does not break every command (:meth:`guard`); :meth:`warn` reports them."""

    def __init__(self) -> None:
        self.problems: dict[str, str] = {}  # path -> message
        self.ids: set[str] = set()  # device ids whose file was skipped
        self.stems: dict[str, str] = {}  # file stem -> path, to explain a miss

    @contextlib.contextmanager
    def guard(self, path: Path, origin: str, dev_id: str | None = None) -> Iterator[None]:
        """Run the block; a ``HardwareSpecError`` skips ``path`` unless it is built in."""
        try:
            yield
        except HardwareSpecError as exc:
            if origin == "builtin":
                raise
            self.problems.setdefault(str(path), str(exc))
            self.stems.setdefault(path.stem, str(path))
            if dev_id is not None:
                self.ids.add(dev_id)

    def warn(self) -> None:
        """One ``DeviceFileWarning`` per skipped file (``MAX_WARNINGS``, then a summary)."""
        items = list(self.problems.items())
        for path, message in items[:MAX_WARNINGS]:
            text = message if message.startswith(path) else f"{path}: {message}"
            warnings.warn(f"skipped device file: {text}", DeviceFileWarning, stacklevel=2)
        if len(items) > MAX_WARNINGS:
            warnings.warn(f"skipped {len(items) - MAX_WARNINGS} more device files: "
                          f"{', '.join(p for p, _ in items[MAX_WARNINGS:MAX_WARNINGS + 5])}"
                          f"{', ...' if len(items) > MAX_WARNINGS + 5 else ''}",
                          DeviceFileWarning, stacklevel=2)
