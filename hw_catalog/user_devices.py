"""Save a what-if device into the user's device folder as a derived device file.

``save_user_device("h100-sxm", {"mem_bw_scale": 2.0}, "h100-2xbw")`` writes
``<user folder>/h100-2xbw.toml``::

    id = "h100-2xbw"
    base = "h100-sxm"
    name = "..."
    mem_bw_scale = 2.0

The file is the derived-device form of ``devices/SCHEMA.md`` (``base`` plus overrides and scale
factors in TOML key names), so it stays a what-if on top of its base: later corrections of the
base's figures carry over. Before writing, the document is validated and derived in memory (the
same checks as loading the file); the id must be new unless ``overwrite`` and the existing file is
in the user folder. The write is atomic (temp file + ``os.replace``) and the catalog is reloaded to
check the file loads; if it does not, the file is removed and the error raised.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofcast.hw_catalog.catalog import load_catalog, user_dir
from roofcast.hw_catalog.derive import derive_from_file_doc, split_changes
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.schema import SCALES, set_path
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.hw_catalog.tomlwrite import dumps
from roofcast.hw_catalog.validate import validate_document


def derived_document(base_id: str, changes: Mapping[str, Any], dev_id: str,
                     name: str | None = None) -> dict[str, Any]:
    """The derived-device document: ``id``, ``base``, optional ``name``, scales at the top
    level and explicit overrides at their schema paths (``mem_bw_GBps`` -> ``[memory]``)."""
    overrides, scales = split_changes(changes)
    doc: dict[str, Any] = {"id": dev_id, "base": base_id}
    if name:
        doc["name"] = name
    for key in SCALES:
        if key in scales:
            doc[key] = float(scales[key])
    for path, value in overrides.items():
        set_path(doc, path, value)
    return doc


def save_user_device(base: str | HardwareSpec, changes: Mapping[str, Any], dev_id: str, *,
                     name: str | None = None, folder: str | Path | None = None,
                     overwrite: bool = False) -> Path:
    """Write the what-if device ``base`` + ``changes`` as ``<folder>/<dev_id>.toml`` (module
    docstring); ``folder`` defaults to :func:`~hw_catalog.catalog.user_dir`. Returns the path.

    Raises ``HardwareSpecError`` for an empty change set, a bad id, an id already in the catalog
    (unless ``overwrite`` and that device is a file of the user folder), or values the catalog
    would refuse.
    """
    if not changes:
        raise HardwareSpecError("a saved device needs at least one change from its base "
                                "(e.g. mem_bw_scale=2)")
    folder = Path(folder) if folder is not None else user_dir()
    catalog = load_catalog(user_folder=folder)
    base_spec = base if isinstance(base, HardwareSpec) else catalog.get(base)
    if base_spec.id not in catalog.devices:
        raise HardwareSpecError(f"base {base_spec.id!r} is not a catalog device; save the base "
                                "device first or start from a catalog device")
    dev_id = dev_id.strip()
    doc = derived_document(base_spec.id, changes, dev_id, name)
    target = folder / f"{dev_id}.toml"
    validate_document(doc, str(target), derived=True)
    if dev_id in catalog.devices:
        existing = Path(catalog.files[dev_id]).resolve()
        if not (overwrite and existing == target.resolve()):
            where = "the user folder" if existing.parent == folder.resolve() else "the catalog"
            raise HardwareSpecError(
                f"device id {dev_id!r} already exists in {where} ({existing}); choose another id"
                + (" or allow overwriting" if where == "the user folder" else ""))
    derive_from_file_doc(base_spec, doc, label=str(target), origin="user", path=str(target))
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dev_id}-", suffix=".toml.tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(f"# What-if device derived from '{base_spec.id}' (saved by roofcast).\n")
            fh.write(dumps(doc))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        load_catalog(user_folder=folder)
    except HardwareSpecError:
        target.unlink(missing_ok=True)
        raise
    return target
