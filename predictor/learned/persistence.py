"""Save and load a ``LearnedModel`` without pickle (the ``learned`` fitted correction's folder).

* ``metadata.json``: the ``predictor.fitted`` fields (kind ``learned``, files, sources,
  versions, fitted_on, data_hash, validation) plus ``format`` (``FORMAT``), ``features`` (the
  ordered list the models were trained on), per model key the candidate and its file (XGBoost)
  or its numbers (ridge / median), interval quantiles, OOD ranges and device vectors, the
  end-to-end calibration and the training command;
* ``<kind>__<family>.ubj``: XGBoost boosters in XGBoost's own UBJ format.

Loading checks the metadata (``metadata_schema``: safe read, schema, files confined to the
folder), that the saved feature list equals ``features.FEATURES`` (names and order) and each
booster's own list, else ``PredictionError`` telling the user to retrain; a family's booster
is read when first used (``LazyModels``: a graph needs a few). Writes are atomic (``save``).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from datetime import date
from pathlib import Path
from typing import Any

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.fitted import FittedMetadata
from roofcast.predictor.learned.features import FEATURES
from roofcast.predictor.learned.intervals import BinnedIntervals, EndToEnd
from roofcast.predictor.learned.metadata_schema import check_metadata, read_metadata
from roofcast.predictor.learned.model import FamilyModel
from roofcast.predictor.learned.ood import DeviceSet, Ranges
from roofcast.predictor.learned.predictor import LearnedModel

FORMAT = "roofcast-learned/1"
METADATA = "metadata.json"
DEFAULT_DIR = Path(__file__).resolve().parent / "default"
#: bytes of a booster file read at load for its feature names (they come first).
HEAD_BYTES = 1 << 16


def library_versions() -> dict[str, str]:
    import platform

    import numpy
    import sklearn
    import xgboost

    return {"xgboost": xgboost.__version__, "scikit-learn": sklearn.__version__,
            "numpy": numpy.__version__, "python": platform.python_version()}


def check_output(folder: str | Path) -> Path:
    """The folder ``save`` will write for ``folder`` (resolved), after checking it can be written:
    it is a folder or does not exist yet, and its nearest existing ancestor (the folder the new
    one is created and renamed in) and the folder itself are writable. Call it before training,
    so a bad ``--output`` is refused at once. Raises ``PredictionError``."""
    target = Path(folder).expanduser().resolve()
    problem = None
    if target.parent == target:
        problem = "it is the file system's root"
    elif target.exists() and not target.is_dir():
        problem = "it exists and is not a folder"
    else:
        ancestor = next(p for p in target.parents if p.exists())
        if target.parent.exists() and not target.parent.is_dir():
            problem = f"{target.parent} is not a folder"
        elif not ancestor.is_dir():
            problem = f"{ancestor} is not a folder"
        elif not os.access(ancestor, os.W_OK | os.X_OK):
            problem = f"{ancestor} is not writable"
        elif target.exists() and not os.access(target, os.W_OK | os.X_OK):
            problem = "it is not writable"
    if problem:
        raise PredictionError(f"cannot save a learned model to {folder}: {problem}; give a "
                              "writable folder (new or holding a model) instead")
    return target


def save(model: LearnedModel, folder: str | Path) -> Path:
    """Write ``model`` to ``folder`` (resolved; returned) atomically, never losing a user's file.

    The model is written into a new hidden folder beside ``folder`` (``.NAME.new-TAG``); then an
    existing ``folder`` is renamed aside (``.NAME.old-TAG``) and the new folder renamed to
    ``folder``: at every moment ``folder`` is the old model or the new one, never half of one.
    Nothing is deleted on failure (the old folder is renamed back). Afterwards the old folder's
    entries are settled (``_settle``): the files its metadata lists are deleted, every other
    entry (the user's) moves into the new folder.
    """
    target = check_output(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:12]
    tmp = target.parent / f".{target.name}.new-{tag}"
    aside = target.parent / f".{target.name}.old-{tag}"
    try:
        tmp.mkdir()
        _write(model, tmp)
        if target.exists():
            os.replace(target, aside)
        os.replace(tmp, target)
    except BaseException:
        if aside.exists() and not target.exists():
            os.replace(aside, target)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if aside.exists():
        _settle(aside, target)
    return target


def fitted_metadata(model: LearnedModel) -> FittedMetadata:
    """The ``predictor.fitted`` metadata of ``model`` (from its ``meta``; files: its boosters)."""
    meta = model.meta
    files = tuple(k.replace("/", "__") + ".ubj" for k, fm in sorted(model.models.items())
                  if fm.candidate == "xgboost")
    sources = meta.get("sources") or [s for s in str(meta.get("source", "")).split("+") if s]
    return FittedMetadata(
        "learned", files, tuple(map(str, sources)), dict(meta.get("versions") or {}),
        str(meta.get("fitted_on") or str(meta.get("created", ""))[:10]),
        str(meta.get("data_hash", "")), dict(meta.get("validation") or {}))


def _write(model: LearnedModel, folder: Path) -> None:
    common = fitted_metadata(model).to_json()
    meta: dict[str, Any] = {
        "format": FORMAT, "features": list(FEATURES),
        **{k: v for k, v in model.meta.items() if k not in ("format", "features")},
        **common, "versions": common["versions"] or library_versions(),
        "fitted_on": common["fitted_on"] or date.today().isoformat(),
        "models": {k: fm.save(folder) for k, fm in sorted(model.models.items())},
        "intervals": {k: iv.to_json() for k, iv in sorted(model.intervals.items())},
        "ranges": {k: r.to_json() for k, r in sorted(model.ranges.items())},
        "devices": {k: d.to_json() for k, d in sorted(model.devices.items())},
        "e2e": {k: e.to_json() for k, e in sorted(model.e2e.items())},
    }
    (folder / METADATA).write_text(json.dumps(meta, indent=1, sort_keys=False, allow_nan=False))


def listed_files(folder: Path) -> list[Path]:
    """The files of ``folder`` that are a model's own: ``metadata.json`` (when it is a roofcast
    model's, ``format`` = ``FORMAT``) and the model files it lists by plain name. Lenient: an
    unreadable or foreign ``metadata.json`` lists nothing, a path with a separator is skipped."""
    try:
        meta = json.loads((folder / METADATA).read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return []
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        return []
    models = meta.get("models")
    descs = models.values() if isinstance(models, dict) else []
    names = [d.get("file") for d in descs if isinstance(d, dict)]
    plain = [n for n in names if isinstance(n, str) and n and Path(n).name == n and n != ".."]
    return [folder / n for n in plain] + [folder / METADATA]


def delete_model(folder: Path) -> list[Path]:
    """Delete the files ``folder``'s metadata lists (``listed_files``; links are removed, not
    followed), then the folder if nothing else is in it. Returns the files deleted."""
    files = [f for f in listed_files(folder) if f.is_symlink() or f.is_file()]
    for f in files:
        f.unlink()
    if not any(folder.iterdir()):
        folder.rmdir()
    return files


def _settle(old: Path, new: Path) -> None:
    """After a swap: delete the old model's own files, move the user's other entries from
    ``old`` into ``new``. An entry whose name the new model took stays in ``old``, which is then
    renamed to a visible ``NAME.kept-TAG`` beside ``new`` instead of being deleted."""
    own = {f.name for f in listed_files(old)}
    for entry in list(old.iterdir()):
        if entry.name not in own and not (new / entry.name).exists():
            os.replace(entry, new / entry.name)
    delete_model(old)
    if old.exists():
        os.replace(old, new.parent / f"{new.name}.kept-{old.name.rsplit('-', 1)[-1]}")


def load(folder: str | Path | None = None) -> LearnedModel:
    """Read a model folder (default: the shipped ``predictor/learned/default``)."""
    folder = Path(folder) if folder is not None else DEFAULT_DIR
    path = folder / METADATA
    if not path.is_file():
        raise PredictionError(f"no learned model at {folder} ({METADATA} missing); "
                              "train one with `roofcast train --output DIR`")
    meta = read_metadata(path)
    if meta.get("format") != FORMAT:
        raise PredictionError(f"{path}: format {meta.get('format')!r} is not {FORMAT!r}; retrain "
                              "with `roofcast train`")
    check_metadata(meta, folder)
    saved = list(meta.get("features", []))
    if saved != list(FEATURES):
        missing = [f for f in FEATURES if f not in saved]
        extra = [f for f in saved if f not in FEATURES]
        detail = (f"missing {missing}, unknown {extra}" if missing or extra
                  else "same names in another order")
        raise PredictionError(
            f"learned model at {folder} was trained on a different feature list than this "
            f"version of roofcast computes ({detail}); retrain it with `roofcast train`")
    try:
        models = LazyModels(folder, meta["models"], tuple(saved))
        intervals = {k: BinnedIntervals.from_json(d) for k, d in meta["intervals"].items()}
        ranges = {k: Ranges.from_json(d) for k, d in meta["ranges"].items()}
        devices = {k: DeviceSet.from_json(d) for k, d in meta["devices"].items()}
        e2e = {k: EndToEnd.from_json(d) for k, d in meta.get("e2e", {}).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise PredictionError(f"{path}: malformed model metadata ({exc!r}); retrain") from exc
    missing = sorted(set(models) - set(intervals) | set(models) - set(ranges))
    if missing:
        raise PredictionError(f"{path}: models {missing} lack intervals or ranges; retrain")
    rest = {k: v for k, v in meta.items()
            if k not in ("models", "intervals", "ranges", "devices", "e2e")}
    return LearnedModel(models, intervals, ranges, devices, e2e, rest)


class LazyModels(Mapping):
    """Model key -> ``FamilyModel`` of a saved folder, each read on first use (then kept).
    Made after ``check_metadata``; checks at once that every booster file was trained on
    ``features`` (its head names them), so a wrong file is refused at load as before."""

    def __init__(self, folder: Path, descs: Mapping[str, Any], features: tuple[str, ...]) -> None:
        from roofcast.predictor.learned.trees import feature_names

        self._folder, self._descs, self._features = folder, dict(descs), features
        self._loaded: dict[str, FamilyModel] = {}
        for desc in self._descs.values():
            if "file" not in desc:
                continue
            path = folder / str(desc["file"])
            try:
                with open(path, "rb") as fh:
                    names = feature_names(fh.read(HEAD_BYTES))
            except OSError:
                continue  # FamilyModel.load says it cannot read the file
            if names is not None and list(names) != list(features):
                raise PredictionError(
                    f"model file {path} was trained on features {list(names)}, which differ "
                    "from its metadata; retrain with `roofcast train`")

    def __getitem__(self, key: str) -> FamilyModel:
        if key not in self._loaded:
            desc = self._descs[key]  # KeyError: no model for key
            try:
                self._loaded[key] = FamilyModel.load(self._folder, desc, self._features)
            except (KeyError, TypeError, ValueError) as exc:
                raise PredictionError(f"{self._folder / METADATA}: malformed model metadata "
                                      f"({exc!r}); retrain") from exc
        return self._loaded[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._descs)

    def __len__(self) -> int:
        return len(self._descs)
