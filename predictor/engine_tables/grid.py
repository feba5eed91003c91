"""A dense table of kernel times over sorted shape axes, read by multilinear interpolation.

``Grid.at(points)`` for points ``(n, d)``: per axis the bracketing cells ``a_i <= x <= a_{i+1}``
and weight ``t = (x - a_i) / (a_{i+1} - a_i)``; the value is ``sum_corners prod_axes w x v`` in
linear seconds: exact for ``c0 + c1 m n k`` (a kernel away from tile steps; the tables hold both
sides of each, m = 128 and 129). Outside an axis's range, or with a weighted corner not measured,
no value (NaN): the caller's model times it. Only along an axis of independent work (``split``:
a GEMM's rows or columns) a point past the last line ``a`` is ``x / a`` kernels of ``a``.

``Grid.at_sequences`` reads a 2-D grid whose first axis counts independent sequences (an
attention kernel over ``B`` sequences of ``L`` tokens): along each measured line ``L_j`` the
time is interpolated in ``B`` up to the line's largest measured ``B_j``, and beyond it is
``t(B_j, L_j) x B / B_j`` (the sequences split into kernels of ``B_j``: the tables stop where
the benchmark's memory did, not the engine's); then linear in ``L`` between the two lines.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Grid:
    """``values`` (seconds, NaN where not measured) over ``axes`` (strictly increasing)."""

    axes: tuple[np.ndarray, ...]
    values: np.ndarray

    def at(self, points: np.ndarray, split: tuple[int, ...] = ()) -> np.ndarray:
        """Interpolated seconds at each row of ``points`` (module docstring). ``split``: axes
        of independent work (a GEMM's rows and columns): past such an axis's last value ``a``
        a point at ``x`` is ``x / a`` kernels of ``a``, ``t(.., a, ..) x x / a``."""
        pts = np.atleast_2d(np.asarray(points, float)).copy()
        scale = np.ones(len(pts))
        for d in split:
            top = self.axes[d][-1]
            scale *= np.maximum(pts[:, d] / top, 1.0)
            pts[:, d] = np.minimum(pts[:, d], top)
        return scale * self._at(pts)

    def _at(self, pts: np.ndarray) -> np.ndarray:
        n = len(pts)
        lo_idx, hi_idx, weight = [], [], []
        inside = np.ones(n, bool)
        for d, axis in enumerate(self.axes):
            x = pts[:, d]
            inside &= (x >= axis[0]) & (x <= axis[-1])
            i = np.clip(np.searchsorted(axis, x, side="right") - 1, 0, len(axis) - 1)
            j = np.minimum(i + 1, len(axis) - 1)
            span = axis[j] - axis[i]
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(span > 0, (x - axis[i]) / np.where(span > 0, span, 1.0), 0.0)
            lo_idx.append(i)
            hi_idx.append(j)
            weight.append(np.clip(t, 0.0, 1.0))
        out = np.zeros(n)
        missing = ~inside
        for corner in itertools.product((0, 1), repeat=len(self.axes)):
            idx = tuple(np.where(inside, (hi if c else lo), 0)
                        for c, lo, hi in zip(corner, lo_idx, hi_idx, strict=True))
            w = np.ones(n)
            for c, t in zip(corner, weight, strict=True):
                w *= t if c else 1.0 - t
            v = self.values[idx]
            used = w > 0
            missing |= used & ~np.isfinite(v)
            out += np.where(used & np.isfinite(v), w * v, 0.0)
        return np.where(missing, np.nan, out)

    def at_sequences(self, points: np.ndarray) -> np.ndarray:
        """Seconds at ``(B, L)`` points of a sequences x tokens grid (module docstring)."""
        pts = np.atleast_2d(np.asarray(points, float))
        seqs, tokens = self.axes
        b, tok = pts[:, 0], pts[:, 1]
        inside = (b >= seqs[0]) & (tok >= tokens[0]) & (tok <= tokens[-1])
        j = np.clip(np.searchsorted(tokens, tok, side="right") - 1, 0, len(tokens) - 1)
        j1 = np.minimum(j + 1, len(tokens) - 1)
        span = tokens[j1] - tokens[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(span > 0, (tok - tokens[j]) / np.where(span > 0, span, 1.0), 0.0)
        lines = [self._line(c, b) for c in range(len(tokens))]
        table = np.stack(lines, axis=1) if lines else np.empty((len(b), 0))
        rows = np.arange(len(b))
        lo, hi = table[rows, j], table[rows, j1]
        out = (1 - w) * lo + w * np.where(w > 0, hi, 0.0)
        return np.where(inside & np.isfinite(out), out, np.nan)

    def _line(self, col: int, b: np.ndarray) -> np.ndarray:
        """Seconds at sequences ``b`` along tokens line ``col`` (NaN: nothing measured)."""
        v = self.values[:, col]
        ok = np.isfinite(v)
        if not ok.any():
            return np.full(len(b), np.nan)
        xs, ys = self.axes[0][ok], v[ok]
        return np.where(b <= xs[-1], np.interp(b, xs, ys), ys[-1] * b / xs[-1])
