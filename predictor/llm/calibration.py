"""Per-engine corrections of modelled step times, fitted on measured serving data.

``engine_calibration(runtime)`` -> ``EngineCalibration``; ``apply(phase, model_s, hw, seqs=B)``
maps the uncalibrated kernel time of a ``prefill`` or one ``decode`` step of ``B`` sequences to
the engine's time and interval (s):

    t  = f_phase(hw) x a_phase x model_s + c_phase + s_phase x B
    lo = min(t, q_lo x t),  hi = max(t, q_hi x t)

``a``: slowdown over the kernel model; ``c`` (s): host time per step; ``s`` (s): per sequence
per step; ``f``, ``q``: factor and 10/90 % quantiles of the most specific level with evidence
(the device, its vendor); an unmeasured vendor keeps the kernel model's transfer (``f`` = 1),
``q`` widened by the fitted vendors' factors. An engine without a fit (today's: kernel model +
the profile's sourced host time per step) is the identity, its interval the kernel model's
(``lower_s``/``upper_s``). Figures: ``predictor/data/llm_engines/``; docs/design/engines.md.
"""
from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from roofcast.hw_catalog import HardwareSpecError, get_device
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.fitted import (
    FittedMetadata,
    data_file,
    read_json,
    read_metadata,
    rows_hash,
    write_metadata,
)

#: where the fitted factors come from, as the notes name it.
SOURCE = "Argonne's LLM-Inference-Bench (2024) runs"
DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "llm_engines"
DATA_NAME = "llm_engines.json"
DATA_FILE = DATA_DIR / DATA_NAME
PHASES: tuple[str, ...] = ("prefill", "decode")


@dataclass(frozen=True)
class PhaseCorrection:
    """``t = f x scale x model_s + overhead_s``; ``ratio_lo``/``ratio_hi``: quantiles of
    measured / predicted (leave-one-device-out); ``vendor_factors``: ``f`` per vendor
    (``HardwareSpec.vendor``); another vendor gets 1 and ``unseen_ratios``."""

    scale: float
    overhead_s: float
    ratio_lo: float
    ratio_hi: float
    vendor_factors: Mapping[str, float] = field(default_factory=dict, hash=False)
    vendor_ratios: Mapping[str, tuple[float, float]] = field(default_factory=dict, hash=False)
    #: the measured devices' own factors and in-sample (q_lo, q_hi), by catalog id.
    device_factors: Mapping[str, float] = field(default_factory=dict, hash=False)
    device_ratios: Mapping[str, tuple[float, float]] = field(default_factory=dict, hash=False)
    #: host seconds per sequence per step (module docstring ``s_phase``).
    seq_overhead_s: float = 0.0

    def ratios(self, vendor: str) -> tuple[float, float]:
        """(q_lo, q_hi) of a device vendor: its own where fitted, else the engine's."""
        q = _by_vendor(self.vendor_ratios, vendor)
        return (self.ratio_lo, self.ratio_hi) if q is None else (float(q[0]), float(q[1]))

    def vendor_factor(self, vendor: str) -> tuple[float, bool]:
        """(factor, fitted) of a device vendor (case-insensitive): a fitted vendor's factor,
        else 1 (the kernel model's own transfer, no borrowed factor) and False."""
        f = _by_vendor(self.vendor_factors, vendor)
        return (1.0, False) if f is None else (float(f), True)

    def unseen_ratios(self) -> tuple[float, float]:
        """(q_lo, q_hi) of a vendor without measurements: the engine's quantiles widened by the
        fitted vendors' (else the measured devices') factors, as far as they stray from 1 —
        that vendor's software may sit anywhere among them."""
        spread = [*self.vendor_factors.values()] or [*self.device_factors.values()] or [1.0]
        return (self.ratio_lo * min(1.0, *spread), self.ratio_hi * max(1.0, *spread))


def _same_vendor(a: str, b: str) -> bool:
    """Vendor names compared case-insensitively, surrounding blanks ignored."""
    return a.strip().casefold() == b.strip().casefold()


def _by_vendor(table: Mapping[str, Any], vendor: str) -> Any:
    """The entry of ``table`` for ``vendor`` (``_same_vendor``), None when it has none."""
    return next((v for name, v in table.items() if _same_vendor(name, vendor)), None)


@dataclass(frozen=True)
class EngineCalibration:
    """One engine's fitted correction (module docstring); ``fitted`` False: identity."""

    runtime: str
    fitted: bool = False
    phases: Mapping[str, PhaseCorrection] = field(default_factory=dict, hash=False)
    note: str = ""
    #: device kinds of the fitted rows; others are left uncalibrated.
    device_kinds: tuple[str, ...] = ("gpu",)

    #: measured runs per device the fit has (catalog id -> rows).
    device_runs: Mapping[str, int] = field(default_factory=dict, hash=False)

    def covers(self, hw: Any) -> bool:
        """Whether the fit applies to ``hw``: fitted, and a device kind it has rows of."""
        return self.fitted and hw.kind in self.device_kinds

    def measured(self, hw: Any) -> bool:
        """Whether ``hw`` is a catalog device of the fit's rows, unchanged (module docstring:
        a derived or edited device is not the device that was measured)."""
        if not self.covers(hw) or hw.base is not None or hw.id not in self.device_runs:
            return False
        if not all(hw.id in self.phases[ph].device_factors for ph in PHASES):
            return False
        try:
            return get_device(hw.id) == hw
        except HardwareSpecError:
            return False

    def level(self, phase: str, hw: Any) -> tuple[str, float, float, float]:
        """(level, factor, q_lo, q_hi) of ``phase`` on a covered ``hw``: ``device``,
        ``vendor`` or ``unseen vendor`` (module docstring)."""
        p = self.phases[phase]
        if self.measured(hw):
            q = p.device_ratios.get(hw.id, (p.ratio_lo, p.ratio_hi))
            return "device", float(p.device_factors[hw.id]), float(q[0]), float(q[1])
        f, seen = p.vendor_factor(hw.vendor)
        if not seen:
            return "unseen vendor", f, *p.unseen_ratios()
        return "vendor", f, *p.ratios(hw.vendor)

    def apply(self, phase: str, model_s: Any, hw: Any, *, seqs: Any = 1,
              lower_s: Any = None, upper_s: Any = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Engine time (s) and its interval of a ``phase`` whose modelled time is ``model_s``
        (s, array-like) on device ``hw`` (a ``HardwareSpec``), ``seqs`` sequences per step
        (array-like, broadcast); monotone in ``model_s`` and ``seqs``. ``lower_s``/``upper_s``:
        the kernel model's interval of ``model_s``, the interval where no fit covers ``hw``
        (None: ``model_s`` itself)."""
        if phase not in PHASES:
            raise PredictionError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
        m = np.asarray(model_s, dtype=float)
        if not self.covers(hw):
            lo = m.copy() if lower_s is None else np.minimum(m, np.asarray(lower_s, float))
            hi = m.copy() if upper_s is None else np.maximum(m, np.asarray(upper_s, float))
            return m, lo, hi
        p = self.phases[phase]
        _, f, q_lo, q_hi = self.level(phase, hw)
        t = f * p.scale * m + p.overhead_s + p.seq_overhead_s * np.asarray(seqs, dtype=float)
        return t, np.minimum(t, q_lo * t), np.maximum(t, q_hi * t)

    def notes(self, hw: Any) -> tuple[str, ...]:
        """What the correction is for ``hw``: uncalibrated, or fitted, and which level
        (``level``) applied."""
        if not self.fitted:
            return (self.note,)
        if not self.covers(hw):
            return (f"{self.runtime} is calibrated on {', '.join(self.device_kinds)} devices "
                    f"only; on this {hw.kind} its times are the uncalibrated kernel model",)
        out = [self.note]
        (lvl, fp, _, _), (_, fd, _, _) = (self.level(ph, hw) for ph in PHASES)
        factors = f"prefill {fp:.2f}, decode {fd:.2f}"
        if lvl == "device":
            out.append(f"{self.runtime} on {hw.id}: factors ({factors}) fitted on this device's "
                       f"{self.device_runs[hw.id]} measured runs in {SOURCE} (the engine's "
                       "software on this device, not a device figure); interval from their "
                       "residuals")
        elif lvl == "vendor":
            mine = self._vendor_devices(hw.vendor)
            out.append(f"{self.runtime} on {hw.id}: vendor factor ({factors}) from "
                       f"{hw.vendor} devices {', '.join(mine) or '(all)'} (device not measured) "
                       f"in {SOURCE} (the engine's software on that vendor's devices, not a "
                       "device figure); interval from leave-one-device-out")
        else:
            q = {ph: self.phases[ph].unseen_ratios() for ph in PHASES}
            out.append(f"{self.runtime} has no measurements on {hw.vendor} devices: the kernel "
                       "model's times transfer as they are (factor 1, no other vendor's factor "
                       "borrowed); the interval spans the fitted vendors' factors (prefill "
                       f"x{q['prefill'][0]:.2g}..x{q['prefill'][1]:.2g}, decode "
                       f"x{q['decode'][0]:.2g}..x{q['decode'][1]:.2g})")
        return tuple(out)

    def _vendor_devices(self, vendor: str) -> list[str]:
        """The fit's devices of ``vendor`` (catalog vendors, case-insensitive), in the fit's
        order."""
        return [d for d in self.device_runs if _same_vendor(get_device(d).vendor, vendor)]


def _phase(doc: Mapping[str, Any], where: str, source: Path) -> PhaseCorrection:
    try:
        p = PhaseCorrection(
            *(float(doc[k]) for k in ("scale", "overhead_s", "ratio_lo", "ratio_hi")),
            vendor_factors={str(k): float(v) for k, v in doc.get("vendor_factors", {}).items()},
            vendor_ratios={str(k): (float(v[0]), float(v[1]))
                           for k, v in doc.get("vendor_ratios", {}).items()},
            device_factors={str(k): float(v) for k, v in doc.get("device_factors", {}).items()},
            device_ratios={str(k): (float(v[0]), float(v[1]))
                           for k, v in doc.get("device_ratios", {}).items()},
            seq_overhead_s=float(doc.get("seq_overhead_s", 0.0)))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise PredictionError(f"{source}: {where} is malformed ({exc}); rerun "
                              "benchmarks/fit_llm_engines.py") from exc
    factors = [*p.vendor_factors.values(), *p.device_factors.values()]
    ratios = [(p.ratio_lo, p.ratio_hi), *p.vendor_ratios.values(), *p.device_ratios.values()]
    if not (p.scale > 0 and p.overhead_s >= 0 and p.seq_overhead_s >= 0
            and all(0 < lo <= hi for lo, hi in ratios) and all(f > 0 for f in factors)):
        raise PredictionError(f"{source}: {where} has a non-positive scale or factor, a "
                              f"negative overhead or an inverted interval: {p}")
    return p


@lru_cache(maxsize=1)
def calibration_document() -> dict[str, Any]:
    """The parsed calibration file ({} when it is missing)."""
    if not DATA_FILE.is_file():
        return {}
    return json.loads(DATA_FILE.read_text(encoding="utf-8"))


def engine_calibration(runtime: str) -> EngineCalibration:
    """The fitted correction of serving engine ``runtime`` (uncalibrated with a note when the
    calibration file has no fit for it)."""
    return calibration_of(calibration_document(), runtime, DATA_FILE)


def calibration_of(document: Mapping[str, Any], runtime: str,
                   source: Path = DATA_FILE) -> EngineCalibration:
    """``engine_calibration`` of a parsed calibration ``document`` (read from ``source``)."""
    doc = document.get("engines", {}).get(runtime)
    if not doc or not doc.get("fitted", True):
        return EngineCalibration(runtime, note=uncalibrated_note(runtime))
    phases = {ph: _phase(doc[ph], f"engines.{runtime}.{ph}", source) for ph in PHASES}
    loo = doc.get("loo", {}).get("median_abs_pct")
    devices = ", ".join(doc.get("rows_per_device", {}))
    seq = phases["decode"].seq_overhead_s
    host = (f"; host time {seq * 1e6:.0f} us per sequence per decode step" if seq > 0 else "")
    return EngineCalibration(
        runtime, fitted=True, phases=phases,
        device_runs={str(k): int(v) for k, v in doc.get("rows_per_device", {}).items()},
        device_kinds=tuple(str(k) for k in doc.get("device_kinds", ("gpu",))),
        note=(f"{runtime} calibrated on LLM-Inference-Bench ({devices}); leave-one-device-out "
              f"median error {loo:.0f} %{host}" if loo is not None else
              f"{runtime} calibrated on LLM-Inference-Bench ({devices}); one device only: no "
              f"leave-one-device-out figure{host}"))


def uncalibrated_note(runtime: str) -> str:
    """What an engine without a fit predicts with: for a profile naming its kernel model and
    host time (``ServingSpec.kernel_estimator``, ``step_overhead_source``), those; else a
    warning that its times are the uncalibrated kernel model."""
    from roofcast.predictor.runtimes import get_runtime

    try:
        spec = get_runtime(runtime).serving
    except PredictionError:
        spec = None
    if spec is None or not spec.kernel_estimator:
        return (f"{runtime}: no measured serving data to calibrate against; times are the "
                "uncalibrated kernel model (expect larger errors)")
    version = f" {spec.version}" if spec.version else ""
    return (f"{runtime}{version}: not fitted to serving runs; each step is the "
            f"{spec.kernel_estimator} kernel model (per-op tables timed with CUDA graphs "
            f"inside the engine's container) + {spec.step_overhead_us:g} us exposed host "
            f"time per step ({spec.step_overhead_source or 'no source given'}); interval: the "
            "kernel model's")


class EngineCalibrations:
    """Every engine's calibration as one ``predictor.fitted`` correction (kind ``llm-engines``):
    ``llm_engines.json`` + ``metadata.json``. ``predict(features)``: engine seconds per row
    (columns runtime, phase, model_s, device (catalog id), optional seqs); ``fit(rows)``: the
    ``engines`` table fitted on measured rows (``calibration_select.fit_all``)."""

    kind: ClassVar[str] = "llm-engines"
    suffixes: ClassVar[tuple[str, ...]] = (".json",)

    def __init__(self, document: Mapping[str, Any], metadata: FittedMetadata | None = None,
                 source: Path = DATA_FILE) -> None:
        self.document = dict(document)
        self._metadata = metadata or FittedMetadata(self.kind, (DATA_NAME,))
        self.source = source

    @property
    def metadata(self) -> FittedMetadata:
        return self._metadata

    def fit(self, rows: pd.DataFrame) -> EngineCalibrations:
        from roofcast.predictor.llm.calibration_select import fit_all

        self.document = {**self.document, "engines": fit_all(rows)}
        self._metadata = replace(self._metadata, fitted_on=dt.date.today().isoformat(),
                                 data_hash=rows_hash(rows), validation={
                                     e: d.get("loo", d["in_distribution"])
                                     for e, d in self.document["engines"].items()})
        return self

    def predict(self, features: pd.DataFrame) -> np.ndarray:
        out = np.empty(len(features))
        seqs = features["seqs"] if "seqs" in features else pd.Series(1, index=features.index)
        keys = features[["runtime", "phase", "device"]].astype(str)
        for (runtime, phase, dev), idx in keys.groupby(list(keys.columns)).indices.items():
            cal = calibration_of(self.document, runtime, self.source)
            out[idx] = cal.apply(phase, features["model_s"].to_numpy(float)[idx],
                                 get_device(dev), seqs=seqs.to_numpy(float)[idx])[0]
        return out

    def save(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.document, indent=1, sort_keys=False, allow_nan=False)
        (folder / DATA_NAME).write_text(text + "\n", encoding="utf-8")
        write_metadata(folder, replace(self._metadata, files=(DATA_NAME,)))
        return folder

    @classmethod
    def load(cls, folder: str | Path = DATA_DIR) -> EngineCalibrations:
        meta, _ = read_metadata(folder)
        if meta.kind != cls.kind or len(meta.files) != 1:
            raise PredictionError(f"{folder}: holds a {meta.kind!r} correction with files "
                                  f"{list(meta.files)}, not one {cls.kind!r} JSON file")
        path = data_file(folder, meta.files[0], cls.suffixes)
        doc = read_json(path, "calibration file")
        for runtime in doc.get("engines", {}):
            calibration_of(doc, runtime, path)  # every engine validated now, not when served
        return cls(doc, meta, path)
