"""The one contract of every fitted correction: fit, predict, metadata JSON + its own data files.

A correction (efficiency curves, the learned models, the LLM engine calibration, the collective
step model; ``fitted_registry`` lists the kinds) is a folder holding ``metadata.json`` and the
data files it names, each in the correction's own non-pickle format (TOML, CSV, JSON, UBJ).
``metadata.json`` holds ``FittedMetadata``'s fields at its top level (a kind may add keys of
its own): kind, files, sources, versions, fitted_on (ISO date), data_hash (sha256 of the
training rows) and validation figures. ``read_metadata`` reads it untrusted (confined,
size-capped, strict JSON); ``data_file`` admits only a plain file of the kind's suffixes that is
not a pickle. Every problem raises ``PredictionError``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

import pandas as pd

from roofcast.hw_catalog.confined import confined_file, read_confined
from roofcast.predictor.errors import PredictionError

METADATA = "metadata.json"
MAX_METADATA_BYTES = 16 * 2**20
MAX_DATA_BYTES = 256 * 2**20
#: ``format`` of a metadata file written before it carried ``kind`` -> its kind.
LEGACY_FORMATS: dict[str, str] = {"roofcast-learned/1": "learned"}
#: suffixes never read, whatever a metadata file says (pickles execute code when loaded).
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib", ".npy", ".npz", ".pt", ".pth")
_HASH = re.compile(r"^([0-9a-f]{64})?$")
_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})?$")


@dataclass(frozen=True)
class FittedMetadata:
    """What was fitted, on what, with which libraries, when, and how well (module docstring)."""

    kind: str
    files: tuple[str, ...]
    sources: tuple[str, ...] = ()
    versions: Mapping[str, str] = field(default_factory=dict, hash=False)
    fitted_on: str = ""
    data_hash: str = ""
    validation: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "files": list(self.files), "sources": list(self.sources),
                "versions": dict(self.versions), "fitted_on": self.fitted_on,
                "data_hash": self.data_hash, "validation": dict(self.validation)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], where: str) -> FittedMetadata:
        """The metadata of a parsed ``metadata.json``; ``PredictionError`` naming the field."""
        kind = doc.get("kind", LEGACY_FORMATS.get(str(doc.get("format"))))
        checks = {
            "kind": (kind, lambda v: isinstance(v, str) and bool(v)),
            "files": (doc.get("files", _legacy_files(doc)), lambda v: isinstance(v, list) and all(
                isinstance(n, str) for n in v)),
            "sources": (doc.get("sources", []), lambda v: isinstance(v, list) and all(
                isinstance(s, str) for s in v)),
            "versions": (doc.get("versions", {}), lambda v: isinstance(v, dict) and all(
                isinstance(x, str) for x in v.values())),
            "fitted_on": (doc.get("fitted_on", ""), lambda v: isinstance(v, str)
                          and bool(_DATE.match(v))),
            "data_hash": (doc.get("data_hash", ""), lambda v: isinstance(v, str)
                          and bool(_HASH.match(v))),
            "validation": (doc.get("validation", {}), lambda v: isinstance(v, dict)),
        }
        for name, (value, ok) in checks.items():
            if not ok(value):
                raise PredictionError(f"{where}: metadata field {name!r} is missing or malformed "
                                      f"({str(value)[:60]!r}); refit or restore the folder")
        return cls(kind, tuple(checks["files"][0]), tuple(checks["sources"][0]),
                   dict(checks["versions"][0]), checks["fitted_on"][0], checks["data_hash"][0],
                   dict(checks["validation"][0]))


def _legacy_files(doc: Mapping[str, Any]) -> list[str] | None:
    """The files of a learned model saved before ``files`` was written: its boosters."""
    models = doc.get("models")
    if "kind" in doc or doc.get("format") not in LEGACY_FORMATS or not isinstance(models, dict):
        return None
    return sorted(str(d["file"]) for d in models.values() if isinstance(d, dict) and "file" in d)


@runtime_checkable
class FittedCorrection(Protocol):
    """A fitted correction (module docstring): ``fit`` returns itself, ``predict`` one value per
    row of ``features``, ``save`` writes ``metadata.json`` + data files, ``load`` reads them."""

    kind: ClassVar[str]
    suffixes: ClassVar[tuple[str, ...]]

    @property
    def metadata(self) -> FittedMetadata: ...

    def fit(self, rows: pd.DataFrame) -> Self: ...

    def predict(self, features: pd.DataFrame) -> Any: ...

    def save(self, folder: str | Path) -> Path: ...

    @classmethod
    def load(cls, folder: str | Path) -> Self: ...


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def read_json(path: Path, what: str = "metadata file") -> dict[str, Any]:
    """A JSON object file of ``path.parent``, read untrusted (module docstring)."""
    folder = path.parent
    try:
        data = read_confined(path, folder, max_bytes=MAX_METADATA_BYTES, what=what,
                             error=PredictionError)
    except PredictionError as exc:
        raise PredictionError(f"folder {folder}: {exc}") from None
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError as exc:
        raise PredictionError(f"folder {folder}: {path.name} is not UTF-8 text (byte "
                              f"{exc.start})") from None
    except RecursionError:
        raise PredictionError(f"folder {folder}: {path.name} is nested too deeply to "
                              "read") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, too-long integers
        raise PredictionError(f"folder {folder}: {path.name} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise PredictionError(f"folder {folder}: {path.name} must hold a JSON object, got "
                              f"{type(doc).__name__}")
    return doc


def read_metadata(folder: str | Path) -> tuple[FittedMetadata, dict[str, Any]]:
    """(metadata, the whole parsed document) of a correction folder."""
    path = Path(folder) / METADATA
    if not path.is_file():
        raise PredictionError(f"{folder}: no fitted correction here ({METADATA} missing)")
    doc = read_json(path)
    return FittedMetadata.from_json(doc, str(path)), doc


def data_file(folder: str | Path, name: str, suffixes: tuple[str, ...]) -> Path:
    """The data file ``name`` of ``folder``: a plain name ending in one of ``suffixes``, a
    regular file inside the folder, and not a pickle (by name or by its first byte)."""
    folder = Path(folder)
    if (not name or Path(name).name != name or name in (".", "..")
            or name.lower().endswith(PICKLE_SUFFIXES) or not name.endswith(suffixes)):
        raise PredictionError(f"{folder}: data file {name!r} refused: a fitted correction's data "
                              f"is a plain file name ending in {', '.join(suffixes)} (never a "
                              "pickle)")
    path = confined_file(folder / name, folder, max_bytes=MAX_DATA_BYTES, what="data file",
                         error=PredictionError)
    with open(path, "rb") as fh:
        if fh.read(1) == b"\x80":
            raise PredictionError(f"{path}: this is a pickle; fitted corrections never load one")
    return path


def write_metadata(folder: str | Path, metadata: FittedMetadata,
                   extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``metadata.json`` (the metadata's fields, then ``extra``) into ``folder``."""
    path = Path(folder) / METADATA
    doc = {**metadata.to_json(), **(extra or {})}
    path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def rows_hash(rows: pd.DataFrame) -> str:
    """sha256 of a table of training rows (values and column names, not the index)."""
    digest = hashlib.sha256(",".join(map(str, rows.columns)).encode())
    digest.update(pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def library_versions(*names: str) -> dict[str, str]:
    """Versions of python, numpy, pandas and the installed packages ``names``."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("numpy", "pandas", *names):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out
