"""Parsed device files kept on disk, so a command line skips ``tomllib`` (pure Python, ~1.3 ms a
file: 0.09 s of the 65-file catalog, a tenth of ``roofcast predict``).

One entry, ``<cache>/catalog/docs.json`` (``roofcast.disk_cache``, on inside ``used()`` only):
``{"code": digest, "docs": {sha256 of a file's bytes: its parsed document}}``, the documents of
the last catalog loaded. Looked up by content: every file is still read through
``device_files.read_bytes``'s checks, so an edited file is parsed afresh, and every document is
validated as a parsed one is. A document is stored only when it reads back equal from JSON (no
dates, no NaN); ``code`` is Python's version and the guarded loader's source, so a stricter
loader re-parses. An entry that does not read back is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import roofcast.disk_cache as disk_cache
import roofcast.hw_catalog.safe_load as safe_load
from roofcast.hw_catalog.device_files import parse_toml

ENTRY = "docs.json"
MAX_ENTRY_BYTES = 16 << 20
"""Largest entry read (bytes): 65 files of the 256 KiB cap each fit."""


@cache
def code_digest() -> str:
    """Python's version (``tomllib``) and the guarded loader's source."""
    source = Path(safe_load.__file__).read_bytes()
    return hashlib.sha256(sys.version.encode() + b"|" + source).hexdigest()


class ParsedFiles:
    """The documents of one catalog load: ``parse`` each file's bytes, then ``save``."""

    def __init__(self) -> None:
        self.where = disk_cache.folder("catalog")
        self.known = _read(self.where / ENTRY) if self.where is not None else {}
        self.texts: dict[str, str] = {}  # digest -> the document as JSON, if it reads back

    def parse(self, data: bytes, label: str) -> dict[str, Any]:
        """The document of a device file's ``data`` (``label`` names it in errors)."""
        digest = hashlib.sha256(data).hexdigest()
        doc = self.known.get(digest)
        if doc is not None:  # read from JSON: it reads back as it is
            self.texts[digest] = json.dumps(doc)
            return doc
        doc = parse_toml(data, label)
        try:  # a date or NaN is not stored
            text = json.dumps(doc, allow_nan=False, default=_refuse)
        except (TypeError, ValueError):
            return doc
        if json.loads(text) == doc:
            self.texts[digest] = text
        return doc

    def save(self) -> None:
        """Write the entry when the cache is on and this load's documents differ from it."""
        if self.where is None or self.texts.keys() == self.known.keys():
            return
        docs = ", ".join(f'"{k}": {t}' for k, t in self.texts.items())
        disk_cache.write_atomic(self.where / ENTRY,
                                f'{{"code": "{code_digest()}", "docs": {{{docs}}}}}')


def _refuse(value: Any) -> Any:
    raise TypeError(f"not stored: {type(value).__name__}")


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """The entry's documents by digest; {} for a missing, damaged or foreign entry."""
    try:
        if path.stat().st_size > MAX_ENTRY_BYTES:
            return {}
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(doc, dict) or doc.get("code") != code_digest():
        return {}
    docs = doc.get("docs")
    if not isinstance(docs, dict):
        return {}
    return {k: v for k, v in docs.items() if isinstance(v, dict)}
