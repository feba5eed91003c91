"""Transfer of a learned efficiency to a row outside the model's training distribution.

``auto`` gives every device of a comparison the same road: where a learned model exists for a
row's (road, family) the row is timed by it on *every* device, also on a device unlike the
training devices (a B200 beside an A100) or for a shape outside the training ranges. The models
take only op and device-relative inputs (``features.FEATURES``), so their efficiency carries
over through those features; out of distribution it is bounded and its interval widened:

* efficiency clipped to what the model produced in training: with ``ŷ`` the predicted log10
  inefficiency and ``[y_lo, y_hi]`` the range of the family model's in-sample predictions
  over its training rows (``FamilyModel.y_range``)::

      ŷ_t = min(max(ŷ, y_lo), y_hi)
      t   = max(t_bound, (t_bound + floor_s) · 10^ŷ_t)

  never below the physical roofline bound ``t_bound``, never more (or less) efficient than any
  training kernel of the family was predicted to be;
* interval widened with the distance to the training devices: with ``[q_lo, q_hi]`` the row's
  conformal log10 residual bounds (``intervals``) and ``d`` its device distance (``ood``)::

      w = TRANSFER_DECADES · max(1, d / DEVICE_DISTANCE)
      [t · 10^(q_lo - w), t · 10^(q_hi + w)],   lower end >= t_bound

  Checked on a held-out public GPU (``benchmarks/gpu_transfer.py --coverage
  a100-40gb-pcie``: the whole model trained on P4, P100, T4 and V100, whose device distance
  puts every A100 row out of distribution): median APE 14.9 % for both roads, 90 % interval
  coverage 97.7 % with the in-distribution intervals and 99.7 % widened (5979 rows). The
  conformal intervals already hold on that device; ``TRANSFER_DECADES`` (±26 % at
  ``d <= DEVICE_DISTANCE``, growing linearly beyond) is a margin for devices farther from the
  training GPUs (a B200), where no measurement exists to calibrate it.

Such rows say ``learned (transferred)`` in the ``predictor`` column; ``learned`` (the expert
road) keeps the raw extrapolation and the in-distribution interval.
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
