"""Transfer of a learned efficiency to a row outside the model's training distribution.

``auto`` times a row by its family's learned model on every device, also out of distribution;
there the efficiency is bounded and the interval widened. With ``ŷ`` the predicted log10
inefficiency and ``[y_lo, y_hi]`` the model's in-sample prediction range
(``FamilyModel.y_range``): ``ŷ_t = min(max(ŷ, y_lo), y_hi)``,
``t = max(t_bound, (t_bound + floor_s) · 10^ŷ_t)``. With the conformal bounds ``[q_lo, q_hi]``
(``intervals``) and the device distance ``d`` (``ood``):
``w = TRANSFER_DECADES · max(1, d / DEVICE_DISTANCE)``, interval
``[t · 10^(q_lo − w), t · 10^(q_hi + w)]``, lower end ``>= t_bound``. Such rows say
``learned (transferred)``; ``learned`` keeps the raw extrapolation.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.learned.transfer).
"""

from __future__ import annotations

import numpy as np

from roofcast.predictor.learned.ood import DEVICE_DISTANCE

#: widening (decades) of a transferred row's interval at a device distance up to DEVICE_DISTANCE.
TRANSFER_DECADES = 0.1
#: label prefix of transferred rows in the ``predictor`` column.
TRANSFERRED = "learned (transferred)"


def clip_efficiency(y_hat: np.ndarray, y_range: tuple[float, float] | None) -> np.ndarray:
    """``ŷ`` clipped to ``y_range`` (module docstring); unchanged when the model has no range
    (saved before ranges were recorded)."""
    y_hat = np.asarray(y_hat, dtype=float)
    if y_range is None:
        return y_hat
    return np.clip(y_hat, y_range[0], y_range[1])


def widening(distance: np.ndarray) -> np.ndarray:
    """``w`` (decades) per row for device distances ``distance`` (module docstring)."""
    d = np.nan_to_num(np.asarray(distance, dtype=float), nan=0.0, posinf=1e6)
    return TRANSFER_DECADES * np.maximum(1.0, d / DEVICE_DISTANCE)


def widen(pred_s: np.ndarray, lower_s: np.ndarray, upper_s: np.ndarray, t_bound: np.ndarray,
          distance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of transferred rows: the conformal interval widened by ``widening``."""
    f = 10.0 ** widening(distance)
    pred_s = np.asarray(pred_s, dtype=float)
    lower = np.maximum(np.asarray(lower_s, float) / f, np.asarray(t_bound, float))
    upper = np.asarray(upper_s, float) * f
    return np.minimum(lower, pred_s), np.maximum(upper, pred_s)
