"""Every kind of fitted correction, the one loader, and the one list of what is installed.

``KINDS``: kind -> class (each meets ``fitted.FittedCorrection``); ``BUNDLED``: kind -> the
folder of the correction shipped with roofcast. ``load_correction(folder)`` reads any
correction folder by the kind its ``metadata.json`` names (an unknown kind, a corrupt metadata
file or a pickle raise ``PredictionError``). ``installed()``: one row per shipped correction and
per installed learned model (``learned.installed``): kind, name, active, fitted_on, data_hash,
sources, folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from roofcast.predictor.collectives.correction import CollectiveModel
from roofcast.predictor.collectives.params import DATA_DIR as COLLECTIVES_DIR
from roofcast.predictor.efficiency import BUNDLED_DIR as EFFICIENCY_DIR
from roofcast.predictor.efficiency import EfficiencyCurves
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.fitted import FittedMetadata, read_metadata
from roofcast.predictor.learned import installed as learned_installed
from roofcast.predictor.learned.correction import LearnedCorrection
from roofcast.predictor.learned.persistence import DEFAULT_DIR as LEARNED_DIR
from roofcast.predictor.llm.calibration import DATA_DIR as ENGINES_DIR
from roofcast.predictor.llm.calibration import EngineCalibrations

KINDS: dict[str, type] = {cls.kind: cls for cls in (
    EfficiencyCurves, LearnedCorrection, EngineCalibrations, CollectiveModel)}
BUNDLED: dict[str, Path] = {"efficiency": EFFICIENCY_DIR, "learned": LEARNED_DIR,
                            "llm-engines": ENGINES_DIR, "collectives": COLLECTIVES_DIR}


def correction_class(kind: str) -> type:
    """The class of fitted-correction ``kind``."""
    cls = KINDS.get(kind)
    if cls is None:
        raise PredictionError(f"unknown fitted-correction kind {kind!r}; known: "
                              f"{', '.join(KINDS)}")
    return cls


def load_correction(folder: str | Path, kind: str | None = None) -> Any:
    """The correction saved in ``folder`` (its metadata names the kind; ``kind``: the one
    expected)."""
    meta, _ = read_metadata(folder)
    if kind is not None and meta.kind != kind:
        raise PredictionError(f"{folder} holds a {meta.kind!r} correction, not {kind!r}")
    return correction_class(meta.kind).load(folder)


def _row(meta: FittedMetadata, name: str, active: bool, folder: Path) -> dict[str, Any]:
    return {"kind": meta.kind, "name": name, "active": active, "fitted_on": meta.fitted_on,
            "data_hash": meta.data_hash[:12], "sources": ", ".join(meta.sources),
            "folder": str(folder)}


def installed() -> pd.DataFrame:
    """What is installed (module docstring); the metadata of each is read, not the data."""
    active = learned_installed.active_name()
    rows = [_row(read_metadata(folder)[0], learned_installed.DEFAULT_NAME,
                 kind != "learned" or active == learned_installed.DEFAULT_NAME, folder)
            for kind, folder in BUNDLED.items()]
    for name in learned_installed.installed_names():
        folder = learned_installed.folder_of(name)
        rows.append(_row(read_metadata(folder)[0], name, name == active, folder))
    return pd.DataFrame(rows)
