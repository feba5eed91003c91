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
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import roofcast.disk_cache as disk_cache
from roofcast.defaults import LIMITS

if TYPE_CHECKING:
    from roofcast.graph_import.types import Graph

#: entries kept; a write beyond it removes the least recently used
MAX_ENTRIES = 32
PACKAGE_DIR = Path(__file__).resolve().parent
used = disk_cache.used  # the command line's switch, shared with the device-file cache


def folder() -> Path | None:
    """The cache folder, or None when the cache is off (outside ``used``, or no home folder)."""
    return disk_cache.folder("graphs")


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
        os.utime(path)  # recently used: kept by disk_cache.prune
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
    written = disk_cache.write_atomic(where / f"{entry_key}.json",
                                      f'{{"key": "{entry_key}", {text[1:]}')
    if written:
        disk_cache.prune(where, MAX_ENTRIES)
    return written
