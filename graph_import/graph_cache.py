"""An on-disk cache of imported graphs, so a model file imported before skips onnx and shape
inference (most of an import's time, and the onnx import itself).

Key: sha256 of the model's bytes, the bound dims, the name, the read cap, the budgets
(``defaults.LIMITS``), the roofcast version, the content of every ``graph_import`` module and
the versions of onnx, numpy and Python (anything that can change an import's result). Entry:
one JSON file ``<key>.json`` in ``$XDG_CACHE_HOME/roofcast/graphs`` (default
``~/.cache/roofcast/graphs``), used inside ``used()`` only (the command line). An entry is
written atomically (temporary file, then rename) and only when it decodes back to an equal
graph; one that does not parse or decode, or names another key, is ignored and rewritten. No
pickles: numpy values are stored as dtype, shape and bytes (``graph_codec``). At most
``MAX_ENTRIES`` entries are kept (least recently used removed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from roofcast.defaults import LIMITS

if TYPE_CHECKING:
    from collections.abc import Iterator

    from roofcast.graph_import.types import Graph

#: entries kept; a write beyond it removes the least recently used
MAX_ENTRIES = 32
_ON: ContextVar[bool] = ContextVar("roofcast_graph_cache", default=False)


@contextmanager
def used() -> Iterator[None]:
    """Imports inside the block read and write the cache (the command line turns it on for
    one command; library calls, sweeps and tests import afresh unless they ask for it)."""
    token = _ON.set(True)
    try:
        yield
    finally:
        _ON.reset(token)
PACKAGE_DIR = Path(__file__).resolve().parent


def folder() -> Path | None:
    """The cache folder, or None when the cache is off (outside ``used``, or no home folder)."""
    if not _ON.get():
        return None
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError:  # no home folder: no cache
        return None
    return Path(base) / "roofcast" / "graphs"


def key(data: bytes | bytearray, dims: Mapping[str, int] | None, name: str | None,
        max_bytes: int) -> str:
    """The entry key of importing ``data`` with ``dims`` and ``name`` (module docstring)."""
    h = hashlib.sha256(data)
    h.update(json.dumps({
        "dims": sorted((dims or {}).items()), "name": name, "max_bytes": max_bytes,
        "budgets": [(k, os.environ.get(k)) for k in sorted(LIMITS)],
        "code": _code_digest(),
    }).encode())
    return h.hexdigest()


@cache
def _code_digest() -> str:
    """Roofcast's version, the content of the graph_import modules (not the LLM readers) and
    the dtype table, and the versions of onnx, numpy and Python."""
    from importlib.metadata import version

    import numpy as np

    import roofcast.dtypes
    from roofcast.graph_import.graph_codec import FORMAT

    h = hashlib.sha256(f"{FORMAT}|".encode())
    h.update(f"{version('roofcast')}|{version('onnx')}|{np.__version__}|{sys.version}".encode())
    files = sorted(p for p in PACKAGE_DIR.rglob("*.py") if "llm" not in p.relative_to(
        PACKAGE_DIR).parts)
    for path in [*files, Path(roofcast.dtypes.__file__)]:
        if path.is_file():
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def read(entry_key: str) -> Graph | None:
    """The cached graph of ``entry_key``, or None (cache off, no entry, or an entry that does
    not read back: it is then ignored, and the import rewrites it)."""
    where = folder()
    if where is None:
        return None
    from roofcast.graph_import.graph_codec import decode

    path = where / f"{entry_key}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("key") != entry_key:
            return None
        graph = decode(doc)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: kept by _prune
    return graph


def write(entry_key: str, graph: Graph) -> bool:
    """Store ``graph`` under ``entry_key`` when the cache is on, the graph encodes (every value
    a number, string, list or numeric array) and decodes back to an equal graph; True when
    written. A folder that cannot be written leaves the cache unused."""
    from roofcast.graph_import.graph_codec import decode, encoded_text, same_graph

    where = folder()
    if where is None:
        return False
    text = encoded_text(graph)
    if text is None:
        return False
    if not same_graph(decode(json.loads(text)), graph, text):
        return False
    written = _write_atomic(where / f"{entry_key}.json", f'{{"key": "{entry_key}", {text[1:]}')
    if written:
        _prune(where)
    return written


def _prune(where: Path) -> None:
    """Remove the least recently used entries beyond ``MAX_ENTRIES``."""
    entries = []
    for path in where.glob("*.json"):
        with contextlib.suppress(OSError):
            entries.append((path.stat().st_mtime_ns, path))
    for _, path in sorted(entries, reverse=True)[MAX_ENTRIES:]:
        with contextlib.suppress(OSError):
            path.unlink()


def _write_atomic(path: Path, text: str) -> bool:
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

