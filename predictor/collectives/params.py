"""Fitted per-fabric-kind parameters of the step model (``predictor/data/collectives/params.json``).

Per fabric kind (and ``nic`` for inter-node links): ``step_overhead_us`` added to the fabric's
per-hop ``latency_us`` on every step, and the achievable fraction of link bandwidth
``efficiency(size) = eff_max x size / (size + half_size_bytes)`` (protocol and pipelining losses
shrink as messages grow). The file records ``data_sha256`` of ``curves.csv`` it was fitted on;
loading refuses a file fitted on other curves. Refit: ``python benchmarks/fit_collectives.py``;
the folder is a ``predictor.fitted`` correction (``correction.CollectiveModel``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from roofcast.predictor.errors import PredictionError

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "collectives"
CURVES_PATH = DATA_DIR / "curves.csv"
PARAMS_PATH = DATA_DIR / "params.json"


@dataclass(frozen=True)
class FabricParams:
    step_overhead_us: float
    eff_max: float
    half_size_bytes: float

    def efficiency(self, size_bytes: float) -> float:
        return self.eff_max * size_bytes / (size_bytes + self.half_size_bytes)


def data_sha256(path: Path = CURVES_PATH) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@lru_cache(maxsize=1)
def load_params(path: Path = PARAMS_PATH) -> dict[str, FabricParams]:
    return parse_params(json.loads(path.read_text()), path, CURVES_PATH)


def parse_params(doc: Mapping[str, Any], path: Path, curves: Path) -> dict[str, FabricParams]:
    """The parameters of a parsed ``params.json`` (``path``), fitted on the ``curves`` file."""
    if doc.get("data_sha256") != data_sha256(curves):
        raise PredictionError(f"{path} was fitted on other collective curves than {curves}; "
                              "refit with benchmarks/fit_collectives.py")
    try:
        return {kind: FabricParams(**p) for kind, p in doc["params"].items()}
    except (KeyError, TypeError, AttributeError) as exc:
        raise PredictionError(f"{path}: malformed params ({exc}); refit with "
                              "benchmarks/fit_collectives.py") from None
