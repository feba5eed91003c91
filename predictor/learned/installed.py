"""Installed learned models: named model folders in the user's data folder, one of them active.

Folder: ``<data folder>/models`` where the data folder is the measurement store's
(``$ROOFCAST_DATA_DIR``, else ``$XDG_DATA_HOME/roofcast``, else ``~/.local/share/roofcast``).
Each model is a subfolder ``NAME/`` as ``persistence.save`` writes it; the text file ``active``
names the model ``predict``, the app and the API use when neither ``model_dir`` nor
``$ROOFCAST_LEARNED_MODEL`` is given (``estimator.model_folder``); without it, the shipped
default. ``default`` is the shipped model's name and cannot be installed or removed.

Writes are atomic: ``install`` is ``persistence.save`` into ``NAME`` (written into a hidden
folder beside, then swapped in by renames; the old model's own files deleted afterwards);
``use`` writes ``active`` beside and renames it. ``remove`` deletes only the files the model's
``metadata.json`` lists (itself and its model files), then the folder if nothing else is left.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from roofcast.hw_catalog.confined import read_confined
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned.persistence import (
    DEFAULT_DIR,
    METADATA,
    delete_model,
    listed_files,
    save,
)
from roofcast.predictor.learned.predictor import LearnedModel

DEFAULT_NAME = "default"
ACTIVE_FILE = "active"
_MAX_ACTIVE_BYTES = 256
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def models_dir() -> Path:
    """``<data folder>/models`` (module docstring)."""
    from roofcast.training_data.store import default_path

    return default_path().parent / "models"


def check_name(name: str) -> str:
    """``name`` if it can name an installed model (letters, digits, ``._-``; not ``default``)."""
    if not _NAME.fullmatch(name) or name == DEFAULT_NAME:
        raise PredictionError(f"model name {name!r} is not allowed: use letters, digits, '.', '_' "
                              f"and '-' (at most 64, not starting with a symbol), not "
                              f"{DEFAULT_NAME!r}")
    return name


def _own_folder(path: Path) -> bool:
    """``path`` is a real folder (not a link) holding a ``metadata.json``."""
    return not path.is_symlink() and path.is_dir() and (path / METADATA).is_file()


def installed_names() -> list[str]:
    """Names of the installed models (real folders, not links, holding a ``metadata.json``),
    sorted."""
    root = models_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if _NAME.fullmatch(p.name) and _own_folder(p))


def active_name() -> str:
    """The active model's name, ``default`` when none is chosen. The ``active`` file is read
    only as a small plain file of the models folder (a link out of it, a FIFO or a big file is
    refused) and must hold a model name, so its content is never echoed beyond one name."""
    root = models_dir()
    path = root / ACTIVE_FILE
    if not os.path.lexists(path):
        return DEFAULT_NAME
    data = read_confined(path, root, max_bytes=_MAX_ACTIVE_BYTES,
                         what="file naming the active model", error=PredictionError)
    name = data.decode("utf-8", "replace").strip()
    if name != DEFAULT_NAME and not _NAME.fullmatch(name):
        raise PredictionError(f"{path} does not hold a model name; choose the active model "
                              f"again with `roofcast models use NAME` (or delete {path})")
    return name


def active_folder() -> Path | None:
    """The active installed model's folder, or None when the shipped default is active; raises
    when the ``active`` file names a model that is no longer installed."""
    name = active_name()
    if name == DEFAULT_NAME:
        return None
    folder = models_dir() / name
    if not _own_folder(folder):
        raise PredictionError(f"the active learned model {name!r} is not installed in "
                              f"{models_dir()}; choose another with `roofcast models use NAME` "
                              f"(`roofcast models use {DEFAULT_NAME}` for the shipped one)")
    return folder


def folder_of(name: str) -> Path:
    """The folder of installed model ``name`` (``default``: the shipped model's)."""
    if name == DEFAULT_NAME:
        return DEFAULT_DIR
    folder = models_dir() / check_name(name)
    if folder.is_symlink():
        raise PredictionError(f"{folder} is a symbolic link, not a model roofcast installed; "
                              "roofcast neither uses nor removes linked folders: delete the "
                              "link yourself")
    if not _own_folder(folder):
        have = ", ".join([DEFAULT_NAME, *installed_names()])
        raise PredictionError(f"no installed learned model {name!r}; installed: {have}")
    return folder


def install(model: LearnedModel, name: str, activate: bool = True) -> Path:
    """Save ``model`` as installed model ``name`` (replacing one of that name) and, with
    ``activate``, make it the active one. Returns its folder."""
    root = models_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = save(model, root / check_name(name))
    if activate:
        use(name)
    return target


def use(name: str) -> Path:
    """Make installed model ``name`` (``default``: the shipped one) the active one; its folder."""
    folder = folder_of(name)
    root = models_dir()
    if name == DEFAULT_NAME:
        (root / ACTIVE_FILE).unlink(missing_ok=True)
        return folder
    fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{ACTIVE_FILE}.")  # never an existing path
    with os.fdopen(fd, "w") as fh:
        fh.write(name + "\n")
    os.replace(tmp, root / ACTIVE_FILE)  # replaces a link itself, never its target
    return folder


def model_files(folder: Path) -> list[Path]:
    """The files a model folder's metadata lists: its model files and ``metadata.json``
    (``persistence.listed_files``)."""
    return listed_files(folder)


def remove(name: str) -> list[Path]:
    """Delete installed model ``name`` (``persistence.delete_model``). If it was active, the
    shipped default becomes active. Returns the files deleted."""
    if name == DEFAULT_NAME:
        raise PredictionError(f"the shipped model {DEFAULT_NAME!r} cannot be removed")
    folder = folder_of(name)
    was_active = active_name() == name
    files = delete_model(folder)
    if was_active:
        (models_dir() / ACTIVE_FILE).unlink(missing_ok=True)
    return files


def _metadata(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / METADATA).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PredictionError(f"cannot read {folder / METADATA}: {exc}") from exc


def _pooled(meta: dict[str, Any], kind: str) -> float | None:
    rows = meta.get("validation", {}).get("per_op_pooled", [])
    return next((r["learned_median_ape_pct"] for r in rows if r.get("kind") == kind), None)


def _e2e(meta: dict[str, Any]) -> float | None:
    rows = meta.get("validation", {}).get("end_to_end", [])
    return next((r["learned_median_ape_pct"] for r in rows if r.get("kind") == "ALL"), None)


def describe(name: str) -> dict[str, Any]:
    """One ``models list`` row: name, active, created, training sources and rows, the validation
    medians (per-op APE pooled per device kind, end-to-end APE) and the folder."""
    folder = folder_of(name)
    meta = _metadata(folder)
    rows = meta.get("source_rows") or {}
    sources = ", ".join(f"{s} {n}" for s, n in rows.items()) or "+".join(meta.get("sources", []))
    return {"name": name, "active": name == active_name(), "created": meta.get("created", ""),
            "sources": sources, "rows": meta.get("rows"),
            "cpu_op_median_ape_pct": _pooled(meta, "cpu"),
            "gpu_op_median_ape_pct": _pooled(meta, "gpu"),
            "e2e_median_ape_pct": _e2e(meta), "folder": str(folder)}


def list_table() -> pd.DataFrame:
    """``describe`` of the shipped model and every installed one."""
    return pd.DataFrame([describe(n) for n in (DEFAULT_NAME, *installed_names())])
