"""Efficiency curves: achieved fraction of peak vs kernel size, kept as data (fitted correction).

Curves live in ``predictor/data/efficiency/efficiency_curves.toml`` (format and the basis of
every default documented there) beside its ``metadata.json`` (``predictor.fitted``). A curve is
piecewise linear in log10(size) and flat beyond its end points; ``fraction(device, kind, engine,
dtype, size)`` evaluates it vectorised. A curve applies to one device (``device = "<catalog
id>"``), a device kind (``kind = "gpu"``) or all (``kind = "*"``). Lookup picks the most
specific curve: device id beats kind beats ``"*"``, then exact dtype beats ``"*"``. A missing
curve is an error, never a silent 1.0. ``fit(rows)`` replaces curves by ones fitted on
needed-efficiency rows (``efficiency_fit``).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.fitted import FittedMetadata, data_file, read_metadata, write_metadata

BUNDLED_DIR = Path(__file__).resolve().parent / "data" / "efficiency"
CURVES_FILE = "efficiency_curves.toml"
DEFAULT_CURVES_PATH = BUNDLED_DIR / CURVES_FILE
#: scopes that are a device kind, not a catalog device id.
KIND_SCOPES = ("gpu", "cpu", "accelerator", "*")
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

    def to_toml(self) -> str:
        """This curve as a ``[[curve]]`` block of the curves file."""
        key = "kind" if self.scope in KIND_SCOPES else "device"
        pts = ", ".join(f"[{float(x)!r}, {float(f)!r}]"
                        for x, f in zip(self.xs, self.fractions, strict=True))
        return (f"[[curve]]\n{key} = {json.dumps(self.scope)}\nengine = {json.dumps(self.engine)}"
                f"\ndtype = {json.dumps(self.dtype)}\nx = {json.dumps(self.x)}\npoints = [{pts}]"
                f"\nbasis = {json.dumps(self.basis)}\n")


class EfficiencyCurves:
    """A validated set of curves with most-specific-match lookup; a ``predictor.fitted``
    correction (``metadata``, ``fit``, ``predict``, ``save``, ``load``)."""

    kind: ClassVar[str] = "efficiency"
    suffixes: ClassVar[tuple[str, ...]] = (".toml",)

    def __init__(self, curves: list[Curve], metadata: FittedMetadata | None = None) -> None:
        self._curves = {(c.scope, c.engine, c.dtype): c for c in curves}
        self._metadata = metadata or FittedMetadata(self.kind, (CURVES_FILE,))

    @property
    def metadata(self) -> FittedMetadata:
        return self._metadata

    @property
    def curves(self) -> tuple[Curve, ...]:
        return tuple(self._curves.values())

    def fit(self, rows: pd.DataFrame) -> EfficiencyCurves:
        """Replace the curves fitted on needed-efficiency ``rows`` (``efficiency_fit``);
        the others (priors) stay."""
        from roofcast.predictor.efficiency_fit import fit_curves, fit_metadata

        for fields in fit_curves(rows):
            c = Curve(**fields)
            self._curves[(c.scope, c.engine, c.dtype)] = c
        self._metadata = fit_metadata(rows, self._metadata)
        return self

    def predict(self, features: pd.DataFrame) -> np.ndarray:
        """Fraction of peak per row of ``features`` (columns device, kind, engine, dtype, size)."""
        f = features
        return self.fraction(f["device"], f["kind"], f["engine"], f["dtype"], f["size"])

    def save(self, folder: Path | str) -> Path:
        """Write ``efficiency_curves.toml`` and ``metadata.json`` into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CURVES_FILE).write_text("\n".join(c.to_toml() for c in self.curves),
                                          encoding="utf-8")
        write_metadata(folder, replace(self._metadata, files=(CURVES_FILE,)))
        return folder

    @classmethod
    def load(cls, path: Path | str = BUNDLED_DIR) -> EfficiencyCurves:
        """A curves folder (``metadata.json`` + its TOML), or a bare curves TOML file."""
        path = Path(path)
        if path.is_dir():
            meta, _ = read_metadata(path)
            if meta.kind != cls.kind or len(meta.files) != 1:
                raise PredictionError(f"{path}: holds a {meta.kind!r} correction with files "
                                      f"{list(meta.files)}, not one {cls.kind!r} TOML file")
            return cls(cls._read(data_file(path, meta.files[0], cls.suffixes)).curves, meta)
        return cls._read(path)

    @classmethod
    def _read(cls, path: Path) -> EfficiencyCurves:
        """Read and validate a curves TOML (see the default file for the format)."""
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
                raise PredictionError(f"{where}: missing or bad key ({exc}); see the file "
                                      "header") from exc
            if engine not in CURVE_ENGINES:
                raise PredictionError(f"{where}: engine {engine!r} not in {CURVE_ENGINES}")
            if x != _X_FOR_ENGINE[engine]:
                raise PredictionError(f"{where}: engine {engine} needs x = "
                                      f"{_X_FOR_ENGINE[engine]!r}")
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
            raise PredictionError(f"{path.name}: a (device|kind, engine, dtype) curve is defined "
                                  "twice")
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
        flat = size.ravel()
        cols = [np.broadcast_to(np.asarray(a), size.shape).ravel() for a in (device, kind, engine,
                                                                            dtype)]
        key = np.zeros(flat.shape, dtype=np.int64)  # one integer per (device, kind, engine, dtype)
        for col in cols:
            codes, uniques = pd.factorize(col, use_na_sentinel=False)
            key = key * len(uniques) + codes
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        out = np.empty(flat.shape, dtype=float)
        for j, i in enumerate(first):
            dev, k, e, d = (str(c[i]) for c in cols)
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
