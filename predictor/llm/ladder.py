"""Decode steps timed at the powers of two around their batch and context, interpolated.

The learned kernel model's decode attention rows were trained at power-of-two batches and
contexts (aiconfigurator's tables: 1, 2, 4, ..., 2048 sequences; isl + step = 2^k keys) and
its GEMM rows at power-of-two token counts; between them its trees are not monotone
(llama-3.1-8b, h100-sxm, 698 keys: 196 sequences 23.7 ms, 208 sequences 20.2 ms). A step
whose one decode segment (``new_tokens = 1``) runs ``b`` sequences over ``c`` keys is timed
bilinearly between the corners ``lo <= x <= hi = 2 lo`` of both (b and c):

    t(b, c) = sum over corners (1 - |b' - b| / (hi_b - lo_b)) (1 - |c' - c| / (hi_c - lo_c))
              x t(b', c')                                                     seconds

(aiconfigurator reads its own tables the same way), so a step with more sequences or keys
never costs less where the model is monotone at the powers of two. A bracketed step is timed
itself too, for its rows' shapes; its rows' times are interpolated the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

#: table columns interpolated like the step times (the others are the step's own rows').
TIME_COLUMNS = ("time_s", "lower_s", "upper_s", "kernel_s")


@dataclass(frozen=True)
class Rung:
    """Where one step's time comes from: ``parts`` (expanded step index, weight); ``own`` the
    step itself (its rows' shapes)."""

    own: int
    parts: tuple[tuple[int, float], ...]

    @property
    def bracketed(self) -> bool:
        return self.parts != ((self.own, 1.0),)


def pow2_bracket(x: int) -> tuple[int, int]:
    """The powers of two around ``x`` (both ``x`` when it is one)."""
    lo = 1 << (int(x).bit_length() - 1)
    return lo, lo if lo == x else 2 * lo


def _weights(x: int) -> list[tuple[int, float]]:
    lo, hi = pow2_bracket(x)
    if lo == hi:
        return [(lo, 1.0)]
    w = (x - lo) / (hi - lo)
    return [(lo, 1.0 - w), (hi, w)]


def expand(steps: Sequence) -> tuple[list, list[Rung]]:
    """The steps to time (a bracketed step, then its corners ``LABEL@bB.cC``) and, per step
    of ``steps``, its ``Rung``."""
    out, rungs = [], []
    for s in steps:
        dec = [i for i, g in enumerate(s.segments) if g.new_tokens == 1]
        own = len(out)
        out.append(s)
        seg = s.segments[dec[0]] if len(dec) == 1 else None
        corners = [(b, wb, c, wb * wc) for b, wb in _weights(seg.batch)
                   for c, wc in _weights(seg.context)] if seg else []
        if len(corners) <= 1:
            rungs.append(Rung(own, ((own, 1.0),)))
            continue
        i, parts = dec[0], []
        for b, _, c, w in corners:
            segs = (*s.segments[:i], replace(seg, batch=b, context=c), *s.segments[i + 1:])
            parts.append((len(out), w))
            out.append(replace(s, label=f"{s.label}@b{b}.c{c}", segments=segs))
        rungs.append(Rung(own, tuple(parts)))
    return out, rungs


def weights(rungs: Sequence[Rung], n_timed: int) -> np.ndarray:
    """(steps, timed steps) matrix: a step's time = its row x the timed steps' times."""
    m = np.zeros((len(rungs), n_timed))
    for i, r in enumerate(rungs):
        for j, w in r.parts:
            m[i, j] += w
    return m


def combine(values: np.ndarray, rungs: Sequence[Rung]) -> np.ndarray:
    """Per step, ``values`` (an array over the expanded steps on axis 0) interpolated."""
    return np.tensordot(weights(rungs, len(values)), values, axes=1)


def step_rows(table: pd.DataFrame, step_idx: np.ndarray, n_rows: int, devices: Sequence[str],
              labels: Sequence[str], rungs: Sequence[Rung]) -> tuple[pd.DataFrame, dict]:
    """The evaluated ``table`` (rows of the expanded steps, device-major; ``step_idx`` their
    step) with each bracketed step's own rows' times interpolated between its corners' rows,
    and ``(label, device) -> positions`` of each step's rows."""
    positions = np.arange(n_rows)
    rows_of = {}
    cols = {c: table[c].to_numpy(float).copy() for c in TIME_COLUMNS}
    src = {c: v.copy() for c, v in cols.items()}
    for lb, r in zip(labels, rungs, strict=True):
        for d, dev in enumerate(devices):
            own = d * n_rows + positions[step_idx == r.own]
            rows_of[(lb, dev)] = own
            if not r.bracketed:
                continue
            for c, v in cols.items():
                v[own] = sum(w * src[c][d * n_rows + positions[step_idx == j]]
                             for j, w in r.parts)
    return table.assign(**cols), rows_of
