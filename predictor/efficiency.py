"""Efficiency curves: achieved fraction of peak vs kernel size, kept as data.

Curves live in ``predictor/data/efficiency_curves.toml`` (format and the basis of every default
documented there). A curve is piecewise linear in log10(size) and flat beyond its end points;
``fraction(device, kind, engine, dtype, size)`` evaluates it vectorised. A curve applies to one
device (``device = "<catalog id>"``), a device kind (``kind = "gpu"``) or all (``kind = "*"``).
Lookup picks the most specific curve: device id beats kind beats ``"*"``, then exact dtype beats
``"*"``. A missing curve is an error, never a silent 1.0.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError

DEFAULT_CURVES_PATH = Path(__file__).resolve().parent / "data" / "efficiency_curves.toml"
CURVE_ENGINES = ("matrix", "vector", "memory")
_X_FOR_ENGINE = {"matrix": "log10_flops", "vector": "log10_flops", "memory": "log10_bytes"}


@dataclass(frozen=True)
class Curve:
    """One efficiency curve: ``points`` as (log10 size, fraction) pairs, increasing in x.

    ``scope`` is the catalog device id the curve belongs to, or a kind, or ``"*"``.
    """

    scope: str
    engine: str
    dtype: str
    x: str
    xs: tuple[float, ...]
    fractions: tuple[float, ...]
    basis: str

    def __call__(self, size: np.ndarray) -> np.ndarray:
        logx = np.log10(np.maximum(np.asarray(size, dtype=float), 1.0))
        return np.interp(logx, self.xs, self.fractions)


class EfficiencyCurves:
    """A validated set of curves with most-specific-match lookup."""

    def __init__(self, curves: list[Curve]) -> None:
        self._curves = {(c.scope, c.engine, c.dtype): c for c in curves}

    @classmethod
    def load(cls, path: Path | str = DEFAULT_CURVES_PATH) -> EfficiencyCurves:
        """Read and validate a curves TOML (see the default file for the format)."""
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise PredictionError(f"cannot read efficiency curves {path}: {exc}") from exc
        curves = []
        for i, raw in enumerate(data.get("curve", [])):
            where = f"{path.name} curve #{i + 1}"
            try:
                scope = str(raw["device"]) if "device" in raw else str(raw["kind"])
                engine, dtype = str(raw["engine"]), str(raw["dtype"])
                pts = np.asarray(raw["points"], dtype=float)
                basis = str(raw["basis"]).strip()
                x = str(raw["x"])
            except (KeyError, ValueError, TypeError) as exc:
                raise PredictionError(f"{where}: missing or bad key ({exc}); see the file header") from exc
            if engine not in CURVE_ENGINES:
                raise PredictionError(f"{where}: engine {engine!r} not in {CURVE_ENGINES}")
            if x != _X_FOR_ENGINE[engine]:
                raise PredictionError(f"{where}: engine {engine} needs x = {_X_FOR_ENGINE[engine]!r}")
            if pts.ndim != 2 or pts.shape[1] != 2 or len(pts) < 1:
                raise PredictionError(f"{where}: points must be [[x, fraction], ...]")
            if np.any(np.diff(pts[:, 0]) <= 0):
                raise PredictionError(f"{where}: points must have increasing x")
            if np.any(pts[:, 1] <= 0) or np.any(pts[:, 1] > 1):
                raise PredictionError(f"{where}: fractions must be in (0, 1]")
            if not basis:
                raise PredictionError(f"{where}: a non-empty 'basis' is required")
            curves.append(Curve(scope, engine, dtype, x, tuple(pts[:, 0]), tuple(pts[:, 1]), basis))
        key_count = len({(c.scope, c.engine, c.dtype) for c in curves})
        if key_count != len(curves):
            raise PredictionError(f"{path.name}: a (device|kind, engine, dtype) curve is defined twice")
        return cls(curves)

    def curve(self, kind: str, engine: str, dtype: str, device: str = "") -> Curve:
        """The most specific curve for (device, kind, engine, dtype)."""
        for k in (device, kind, "*"):
            for d in (dtype, "*"):
                c = self._curves.get((k, engine, d))
                if c is not None:
                    return c
        raise PredictionError(
            f"no efficiency curve for kind={kind!r} engine={engine!r} dtype={dtype!r}; "
            "add one (or a '*' default) to the curves file"
        )

    def fraction(self, device: np.ndarray, kind: np.ndarray, engine: np.ndarray,
                 dtype: np.ndarray, size: np.ndarray) -> np.ndarray:
        """Vectorised: fraction of peak per row (one curve evaluation per distinct key)."""
        size = np.asarray(size, dtype=float)
        cols = [np.broadcast_to(np.asarray(a).astype(str), size.shape).ravel()
                for a in (device, kind, engine, dtype)]
        codes = pd.MultiIndex.from_arrays(cols).factorize() if size.size else (np.array([], int), [])
        inv, uniq = codes
        flat = size.ravel()
        out = np.empty(flat.shape, dtype=float)
        for j, (dev, k, e, d) in enumerate(uniq):
            mask = inv == j
            out[mask] = self.curve(k, e, d, dev)(flat[mask])
        return out.reshape(size.shape)


_DEFAULT: EfficiencyCurves | None = None


def default_curves() -> EfficiencyCurves:
    """The bundled curves (loaded once)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = EfficiencyCurves.load()
    return _DEFAULT
