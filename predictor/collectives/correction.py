"""The collective step model as one ``predictor.fitted`` correction (kind ``collectives``).

Folder: ``curves.csv`` (the measured curves it was fitted on), ``params.json`` (per fabric kind
``FabricParams``, the network probes, ``data_sha256`` of ``curves.csv``) and ``metadata.json``.
``fit(rows)``: the least-squares parameters on curve rows (``fit.fit_params``, networks probed
by ``measured.probe_points``); ``predict(features)``: the step model's seconds per curve row
(columns system, collective, size_bytes, n_ranks, ranks_per_node) laid out as it was measured.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from roofcast.predictor.collectives.params import CURVES_PATH, DATA_DIR, FabricParams, parse_params
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.fitted import (
    FittedMetadata,
    data_file,
    read_json,
    read_metadata,
    rows_hash,
    write_metadata,
)

CURVES = CURVES_PATH.name
PARAMS = "params.json"
Probes = Mapping[str, tuple[float, float]]


def params_document(curves_sha256: str, params: Mapping[str, FabricParams], probes: Probes
                    ) -> dict[str, Any]:
    """The ``params.json`` document of a fit (network probes with the NIC each implies)."""
    from roofcast.predictor.collectives.fit import FIT_MAX_BYTES, FIT_MIN_BYTES
    from roofcast.predictor.collectives.measured import probed_nic

    nics = {s: dataclasses.asdict(probed_nic(s, p, params["nic/p2p"])) for s, p in probes.items()}
    return {"data": CURVES, "data_sha256": curves_sha256,
            "fit_sizes_bytes": [FIT_MIN_BYTES, FIT_MAX_BYTES],
            "network_probes": {s: {"size_bytes": size, "time_s": t, "nic": nics[s]}
                               for s, (size, t) in probes.items()},
            "params": {k: dataclasses.asdict(p) for k, p in params.items()}}


class CollectiveModel:
    """Measured curves + fitted step-model parameters (module docstring)."""

    kind: ClassVar[str] = "collectives"
    suffixes: ClassVar[tuple[str, ...]] = (".csv", ".json")

    def __init__(self, curves: pd.DataFrame, params: Mapping[str, FabricParams],
                 probes: Probes, metadata: FittedMetadata | None = None) -> None:
        self.curves, self.params, self.probes = curves, dict(params), dict(probes)
        self._metadata = metadata or FittedMetadata(self.kind, (CURVES, PARAMS))

    @property
    def metadata(self) -> FittedMetadata:
        return self._metadata

    def fit(self, rows: pd.DataFrame) -> CollectiveModel:
        from roofcast.predictor.collectives.fit import FIT_MAX_BYTES, fit_params, fit_rows
        from roofcast.predictor.collectives.measured import probe_points

        self.curves = rows.reset_index(drop=True)
        self.probes = probe_points(self.curves, FIT_MAX_BYTES)
        self.params = fit_params(self.curves, self.probes)
        used = fit_rows(self.curves, self.probes)
        err = np.abs(np.log(self.predict(used) / used.time_s.to_numpy(float)))
        err = err[np.isfinite(err)]  # rows no modelled algorithm runs on (fit.fit_params)
        sources = sorted({str(s).split(":", 1)[0] for s in self.curves.get("source", [])})
        self._metadata = FittedMetadata(
            self.kind, (CURVES, PARAMS), tuple(sources), self._metadata.versions,
            dt.date.today().isoformat(), rows_hash(self.curves),
            {"fit_rows": len(used), "median_abs_log_error": float(np.median(err))})
        return self

    def predict(self, features: pd.DataFrame) -> np.ndarray:
        from roofcast.predictor.collectives.fit import predict_rows

        return predict_rows(features, self.params, self.probes)

    def save(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.curves.to_csv(folder / CURVES, index=False)
        sha = hashlib.sha256((folder / CURVES).read_bytes()).hexdigest()
        doc = params_document(sha, self.params, self.probes)
        (folder / PARAMS).write_text(_json(doc), encoding="utf-8")
        write_metadata(folder, dataclasses.replace(self._metadata, files=(CURVES, PARAMS)))
        return folder

    @classmethod
    def load(cls, folder: str | Path = DATA_DIR) -> CollectiveModel:
        meta, _ = read_metadata(folder)
        if meta.kind != cls.kind or sorted(meta.files) != sorted((CURVES, PARAMS)):
            raise PredictionError(f"{folder}: holds a {meta.kind!r} correction with files "
                                  f"{list(meta.files)}, not {CURVES} + {PARAMS}")
        curves_path = data_file(folder, CURVES, cls.suffixes)
        params_path = data_file(folder, PARAMS, cls.suffixes)
        doc = read_json(params_path, "parameter file")
        params = parse_params(doc, params_path, curves_path)
        try:
            probes = {s: (float(p["size_bytes"]), float(p["time_s"]))
                      for s, p in doc.get("network_probes", {}).items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PredictionError(f"{params_path}: malformed network_probes ({exc})") from None
        return cls(pd.read_csv(curves_path), params, probes, meta)


def _json(doc: Mapping[str, Any]) -> str:
    import json

    return json.dumps(doc, indent=1, allow_nan=False) + "\n"
