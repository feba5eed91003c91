"""Save and load a ``LearnedModel`` without pickle.

A model folder holds:

* ``metadata.json``: ``format`` (``FORMAT``), ``features`` (the ordered feature list the models
  were trained on), per model key the candidate and its file (XGBoost) or its numbers (ridge /
  median), conformal interval quantiles, OOD training ranges and device vectors, end-to-end
  calibration, plus ``data_hash`` (sha256 of the training rows), library versions, the training
  command and the validation tables;
* ``<kind>__<family>.ubj``: XGBoost boosters in XGBoost's own UBJ format
  (``booster.save_model``), loaded with ``xgboost.Booster().load_model``.

Loading checks the format and that the saved feature list equals the code's
``features.FEATURES`` (same names, same order); any difference raises ``PredictionError``
telling the user to retrain — a model is never applied to features it was not trained on.
Before that, ``metadata_schema`` reads the metadata safely and checks it against its schema
(types, finite sane numbers, booster files confined to the folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned.features import FEATURES
from roofcast.predictor.learned.intervals import BinnedIntervals, EndToEnd
from roofcast.predictor.learned.metadata_schema import check_metadata, read_metadata
from roofcast.predictor.learned.model import FamilyModel
from roofcast.predictor.learned.ood import DeviceSet, Ranges
from roofcast.predictor.learned.predictor import LearnedModel

FORMAT = "roofcast-learned/1"
METADATA = "metadata.json"
DEFAULT_DIR = Path(__file__).resolve().parent / "default"


def library_versions() -> dict[str, str]:
    import platform

    import numpy
    import sklearn
    import xgboost

    return {"xgboost": xgboost.__version__, "scikit-learn": sklearn.__version__,
            "numpy": numpy.__version__, "python": platform.python_version()}


def save(model: LearnedModel, folder: str | Path) -> Path:
    """Write ``model`` to ``folder`` (created; existing model files replaced)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.ubj"):
        old.unlink()
    meta: dict[str, Any] = {
        "format": FORMAT, "features": list(FEATURES), "versions": library_versions(),
        **{k: v for k, v in model.meta.items() if k not in ("format", "features")},
        "models": {k: fm.save(folder) for k, fm in sorted(model.models.items())},
        "intervals": {k: iv.to_json() for k, iv in sorted(model.intervals.items())},
        "ranges": {k: r.to_json() for k, r in sorted(model.ranges.items())},
        "devices": {k: d.to_json() for k, d in sorted(model.devices.items())},
        "e2e": {k: e.to_json() for k, e in sorted(model.e2e.items())},
    }
    tmp = folder / (METADATA + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=False, allow_nan=False))
    os.replace(tmp, folder / METADATA)
    return folder


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
        models = {k: FamilyModel.load(folder, d, tuple(saved)) for k, d in meta["models"].items()}
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
