"""The on-disk caches' switch, folder and writes (imported graphs, parsed device files).

A cache is read and written only inside ``used()`` (the command line turns it on for one
command; library calls, sweeps and tests work afresh unless they ask for it), in
``$XDG_CACHE_HOME/roofcast/<name>`` (default ``~/.cache/roofcast/<name>``). Entries are JSON,
written atomically (temporary file, then rename); never pickles. This module imports nothing
of roofcast, so every package may use it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

_ON: ContextVar[bool] = ContextVar("roofcast_disk_cache", default=False)


@contextmanager
def used() -> Iterator[None]:
    """The caches are on inside the block (module docstring)."""
    token = _ON.set(True)
    try:
        yield
    finally:
        _ON.reset(token)


def folder(name: str) -> Path | None:
    """The folder of cache ``name``, or None when caches are off (outside ``used``, or no home
    folder)."""
    if not _ON.get():
        return None
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError:  # no home folder: no cache
        return None
    return Path(base) / "roofcast" / name


def write_atomic(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` through a temporary file and a rename; False (nothing left
    behind) when the folder cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


def prune(where: Path, max_entries: int) -> None:
    """Remove the least recently used ``*.json`` entries of ``where`` beyond ``max_entries``."""
    entries = []
    for path in where.glob("*.json"):
        with contextlib.suppress(OSError):
            entries.append((path.stat().st_mtime_ns, path))
    for _, path in sorted(entries, reverse=True)[max_entries:]:
        with contextlib.suppress(OSError):
            path.unlink()
