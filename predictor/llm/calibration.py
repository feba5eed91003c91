"""Per-engine corrections of modelled step times, fitted on measured serving data.

Contract (placeholder until the fit lands): ``engine_calibration(runtime)`` returns an
``EngineCalibration`` whose ``apply(phase, model_s, hw)`` maps the summed kernel times of a
``prefill`` or a ``decode`` step to the engine's time with an interval: arrays ``(t, lo, hi)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EngineCalibration:
    """Identity placeholder: t = model time, interval = the model time itself."""

    runtime: str
    fitted: bool = False

    def apply(self, phase: str, model_s: np.ndarray, hw: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = np.asarray(model_s, dtype=float)
        return t, t, t


def engine_calibration(runtime: str) -> EngineCalibration:
    return EngineCalibration(runtime)
