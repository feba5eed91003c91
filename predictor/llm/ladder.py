"""Decode batches timed at the powers of two around them, interpolated linearly in the batch.

The learned kernel model's decode rows were trained at power-of-two batches (aiconfigurator's
tables: 1, 2, 4, ..., 2048 sequences); between them its trees are not monotone (llama-3.1-8b,
h100-sxm, 698 keys: 196 sequences 23.7 ms, 208 sequences 20.2 ms). A step whose one decode
segment (``new_tokens = 1``) runs ``b`` sequences, ``lo <= b <= hi = 2 lo``, is timed as

    t(b) = t(lo) + (b - lo) / (hi - lo) x (t(hi) - t(lo))     seconds

(aiconfigurator reads its own tables the same way), so a step with more sequences never costs
less where the model is monotone at the powers of two. Other steps are timed as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Rung:
    """Where one step's time comes from: expanded steps ``lo`` and ``hi`` (indices), ``w`` the
    weight of ``hi``; ``own`` the step itself (its rows' shapes)."""

    own: int
    lo: int
    hi: int
    w: float


def pow2_bracket(batch: int) -> tuple[int, int]:
    """The powers of two around ``batch`` (both ``batch`` when it is one)."""
    lo = 1 << (int(batch).bit_length() - 1)
    return lo, lo if lo == batch else 2 * lo


def expand(steps: Sequence) -> tuple[list, list[Rung]]:
    """The steps to time (a bracketed step is timed too, for its rows' shapes, with its rungs
    ``LABEL@bN``) and, per step of ``steps``, its ``Rung``."""
    out, rungs = [], []
    for s in steps:
        dec = [i for i, g in enumerate(s.segments) if g.new_tokens == 1]
        lo, hi = pow2_bracket(s.segments[dec[0]].batch) if len(dec) == 1 else (0, 0)
        if lo == hi:
            rungs.append(Rung(len(out), len(out), len(out), 0.0))
            out.append(s)
            continue
        i, b = dec[0], s.segments[dec[0]].batch
        out.append(s)
        for n in (lo, hi):
            segs = (*s.segments[:i], replace(s.segments[i], batch=n), *s.segments[i + 1:])
            out.append(replace(s, label=f"{s.label}@b{n}", segments=segs))
        rungs.append(Rung(len(out) - 3, len(out) - 2, len(out) - 1, (b - lo) / (hi - lo)))
    return out, rungs


def combine(values: np.ndarray, rungs: Sequence[Rung]) -> np.ndarray:
    """Per step, ``values`` (an array over the expanded steps on axis 0) interpolated."""
    lo = np.array([r.lo for r in rungs], int)
    hi = np.array([r.hi for r in rungs], int)
    w = np.array([r.w for r in rungs], float).reshape((-1,) + (1,) * (values.ndim - 1))
    return (1.0 - w) * values[lo] + w * values[hi]


#: table columns interpolated like the step times (the others are the step's own rows').
TIME_COLUMNS = ("time_s", "lower_s", "upper_s", "kernel_s")


def step_rows(table: pd.DataFrame, step_idx: np.ndarray, n_rows: int, devices: Sequence[str],
              labels: Sequence[str], rungs: Sequence[Rung]) -> tuple[pd.DataFrame, dict]:
    """The evaluated ``table`` (rows of the expanded steps, device-major; ``step_idx`` their
    step) with each bracketed step's own rows' times interpolated between its rungs' rows, and
    ``(label, device) -> positions`` of each step's rows."""
    positions = np.arange(n_rows)
    rows_of = {}
    cols = {c: table[c].to_numpy(float).copy() for c in TIME_COLUMNS}
    for lb, r in zip(labels, rungs, strict=True):
        for d, dev in enumerate(devices):
            own = d * n_rows + positions[step_idx == r.own]
            rows_of[(lb, dev)] = own
            if r.lo != r.hi:
                lo = d * n_rows + positions[step_idx == r.lo]
                hi = d * n_rows + positions[step_idx == r.hi]
                for v in cols.values():
                    v[own] = (1.0 - r.w) * v[lo] + r.w * v[hi]
    return table.assign(**cols), rows_of
