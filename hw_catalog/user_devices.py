"""Save a what-if device into the user's device folder as a derived device file.

``save_user_device("h100-sxm", {"mem_bw_scale": 2.0}, "h100-2xbw")`` writes
``<user folder>/h100-2xbw.toml``::

    id = "h100-2xbw"
    base = "h100-sxm"
    name = "..."
    mem_bw_scale = 2.0

Rationale: ``docs/design/module-notes.md`` (roofcast.hw_catalog.user_devices).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofcast.hw_catalog.catalog import Catalog, load_catalog, normalize_name, user_dir
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
    or a file of that name already in the folder (unless ``overwrite`` and that device is a file
    of the user folder), a name or alias another device already has, or values the catalog
    would refuse. On any failure the folder is left as it was: an overwritten file is restored.
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
    _check_free(catalog, dev_id, doc, target, overwrite)
    derive_from_file_doc(base_spec, doc, label=str(target), origin="user", path=str(target))
    folder.mkdir(parents=True, exist_ok=True)
    text = (f"# What-if device derived from '{base_spec.id}' (saved by roofcast).\n"
            + dumps(doc))
    backup = _backup(target, dev_id)
    try:
        _write_atomic(target, text, dev_id)
        after = load_catalog(user_folder=folder)
        broken = {p: m for p, m in after.skipped.items() if p not in catalog.skipped}
        if broken:
            raise HardwareSpecError(
                f"saving {target} would leave device files unusable, so nothing was saved: "
                + "; ".join(broken.values()))
    except BaseException:
        if backup is not None:
            os.replace(backup, target)
        else:
            target.unlink(missing_ok=True)
        raise
    if backup is not None:
        backup.unlink(missing_ok=True)
    return target


def _check_free(catalog: Catalog, dev_id: str, doc: Mapping[str, Any], target: Path,
                overwrite: bool) -> None:
    """Refuse an id, file or name that belongs to something else (module docstring)."""
    if dev_id in catalog.devices:
        existing = Path(catalog.files[dev_id]).resolve()
        if not (overwrite and existing == target.resolve()):
            where = ("the user folder" if existing.parent == target.parent.resolve()
                     else "the catalog")
            raise HardwareSpecError(
                f"device id {dev_id!r} already exists in {where} ({existing}); choose another id"
                + (" or allow overwriting" if where == "the user folder" else ""))
    elif os.path.lexists(target):
        problem = catalog.skipped.get(str(target))
        raise HardwareSpecError(
            f"{target} already exists" + (f" but does not load ({problem})" if problem else "")
            + "; choose another id, or fix or remove that file first")
    for label in (dev_id, doc.get("name"), *doc.get("aliases", ())):
        owner = catalog.names.get(normalize_name(label)) if label else None
        if owner is not None and owner != dev_id:
            raise HardwareSpecError(
                f"name {label!r} is already used by device {owner!r} ({catalog.files[owner]}); "
                "choose another name")


def _backup(target: Path, dev_id: str) -> Path | None:
    """A hard link to the file about to be overwritten (restored if the save fails)."""
    if not os.path.lexists(target):
        return None
    backup = target.with_name(f".{dev_id}.toml.{os.getpid()}.bak")
    backup.unlink(missing_ok=True)
    os.link(target, backup, follow_symlinks=False)
    return backup


def _write_atomic(target: Path, text: str, dev_id: str) -> None:
    """Write ``text`` to a temp file in the folder and rename it over ``target``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dev_id}-", suffix=".toml.tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
