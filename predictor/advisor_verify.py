"""Measure an advice on this machine: the recommended and the default settings with ONNX Runtime.

``verify(advice, source, dims, repeats, warmup)`` (``local`` device only): one ONNX Runtime CPU
session per setting (threads, ``ORT_PARALLEL`` when inter-op, the optimisation level; profiler
off), settings whose sessions would not fit in memory left out with a note; ``warmup`` untimed
runs, then ``repeats`` interleaved rounds of bursts (time per run = burst time / calls; latency
= median; throughput = batch / latency). Measured gain as the advice's; ``error`` = predicted /
measured gain - 1; noise = the larger of half the IQR of per-round gains and the A/A gain of a
second session of the default.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from roofcast.predictor.advisor import Advice, Setting
from roofcast.predictor.errors import PredictionError

LOCAL = "local"
#: pause before each timed run: ONNX Runtime's pool threads spin after a run, and on a small
#: machine a session timed right after another would pay for the other's spinning threads.
SETTLE_S = 0.05
#: one timed sample runs a setting back to back for at least this long (a burst): a single short
#: run right after the settle pause starts with cold caches and sleeping cores, which taxes a
#: 5 ms batch-1 run more than a 20 ms batch-4 one and inflates the measured gain of batching.
MIN_SAMPLE_S = 0.2
MAX_BURST = 50
#: share of the available memory the measured sessions may take (the rest: activations, Python).
MEMORY_SHARE = 0.7


@dataclass(frozen=True)
class Verification:
    """Measured vs predicted for the default and the recommended settings."""

    table: pd.DataFrame  # role, setting, batch, predicted_ms, measured_ms, p25/p75, throughput
    predicted_gain: float
    measured_gain: float
    noise: float  # max(relative half-IQR of the per-round gains, session_noise)
    error: float  # predicted_gain / measured_gain - 1
    repeats: int
    load_before: float
    load_after: float
    notes: tuple[str, ...] = ()  # settings left out (memory)
    session_noise: float = float("nan")  # |A/A gain - 1| of two default sessions (NaN: none)

    @property
    def at_least_as_fast(self) -> bool:
        """The recommendation measures at least as fast as the default within the noise."""
        return self.measured_gain >= 1.0 - self.noise


def check_local(device: str) -> None:
    if device != LOCAL:
        raise PredictionError(
            f"--verify measures on this machine, so it needs --hw local (got {device!r}); "
            "run `roofcast hw calibrate` once, then `roofcast advise MODEL --hw local --verify`")


def _session(prepared, setting: Setting, workdir: Path):
    import onnxruntime as ort

    from roofcast.training_data.collectors.ort_cpu import MeasureConfig, session_options

    cfg = MeasureConfig(threads_intra=int(setting.threads or os.cpu_count() or 1),
                        threads_inter=setting.inter_op_threads if setting.inter_op else 1,
                        opt_level=setting.opt_level, repeats=1, warmup=0)
    so = session_options(cfg, workdir, save_optimized=False)
    so.enable_profiling = False
    weights = getattr(prepared, "weights", None)
    if weights:  # big initializers kept out of the proto (models beyond protobuf's 2 GB)
        values = [ort.OrtValue.ortvalue_from_numpy(a) for a in weights.values()]
        so.add_external_initializers(list(weights), values)
    try:
        return ort.InferenceSession(prepared.runnable.SerializeToString(), so,
                                    providers=[cfg.provider])
    except Exception as exc:  # ORT/protobuf raise their own types
        raise PredictionError(f"ONNX Runtime cannot load {prepared.name} for "
                              f"{setting.label()} ({type(exc).__name__}: "
                              f"{str(exc).strip()[:200]})") from None


def mem_available_bytes() -> float | None:
    """``MemAvailable`` of /proc/meminfo in bytes; None where the file is absent."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def session_bytes(prepared) -> float:
    """Memory one ONNX Runtime session of ``prepared`` holds, estimated as its weights again:
    the CPU provider packs every MatMul/Conv weight into its own layout per session (the
    user-supplied big weights stay shared, their packed copies do not)."""
    return float(prepared.runnable.ByteSize()
                 + sum(a.nbytes for a in getattr(prepared, "weights", {}).values()))


def settings_that_fit(settings: list[Setting], per_session_bytes: float,
                      available_bytes: float | None, keep: int = 2) -> list[Setting]:
    """The settings whose sessions fit in ``MEMORY_SHARE`` of the available memory: the first
    ``keep`` (default and recommendation) or PredictionError, then as many more as fit."""
    if available_bytes is None:
        return list(settings)
    budget = MEMORY_SHARE * available_bytes
    n = min(len(settings), int(budget // max(per_session_bytes, 1.0)))
    if n < min(keep, len(settings)):
        raise PredictionError(
            f"measuring {min(keep, len(settings))} settings needs about "
            f"{min(keep, len(settings)) * per_session_bytes / 1e9:.1f} GB (each ONNX Runtime "
            f"session packs its own copy of the {per_session_bytes / 1e9:.1f} GB of weights) but "
            f"{available_bytes / 1e9:.1f} GB is available; close other programs or verify a "
            "smaller model or batch")
    return list(settings[:n])


def measure_settings(source: Any, dims: Mapping[str, int], settings: list[Setting],
                     repeats: int, warmup: int, seed: int = 0
                     ) -> tuple[np.ndarray, list[Setting]]:
    """(wall seconds of shape (repeats, measured settings), the settings measured): interleaved
    rounds (module docstring). The weights are drawn once and shared by every batch
    (``prepare_dims``); settings after the first two are left out when their
    sessions would not fit in memory (``settings_that_fit``)."""
    from roofcast.training_data.collectors.ort_cpu import prepare, prepare_dims

    if repeats < 1 or warmup < 0:
        raise PredictionError(f"repeats must be >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    prepared: dict[int, Any] = {}
    for b in dict.fromkeys(s.batch for s in settings):
        first = next(iter(prepared.values()), None)
        prepared[b] = (prepare(source, {**dims, "batch": b}, seed=seed) if first is None
                       else prepare_dims(first, {**dims, "batch": b}, seed=seed))
    per_session = max(session_bytes(p) for p in prepared.values())
    settings = settings_that_fit(settings, per_session, mem_available_bytes())
    with tempfile.TemporaryDirectory(prefix="roofcast-advise-") as tmp:
        sessions = [_session(prepared[s.batch], s, Path(tmp)) for s in settings]
        feeds = [prepared[s.batch].feeds for s in settings]
        bursts = []
        for sess, feed in zip(sessions, feeds, strict=True):
            t0 = time.perf_counter()
            for _ in range(max(warmup, 1)):
                sess.run(None, feed)
            one_s = (time.perf_counter() - t0) / max(warmup, 1)
            bursts.append(max(1, min(MAX_BURST, math.ceil(MIN_SAMPLE_S / max(one_s, 1e-6)))))
        wall = np.zeros((repeats, len(settings)))
        for r in range(repeats):
            order = range(len(settings)) if r % 2 == 0 else range(len(settings) - 1, -1, -1)
            for j in order:
                time.sleep(SETTLE_S)  # let the previous session's spinning pool threads sleep
                t0 = time.perf_counter()
                for _ in range(bursts[j]):
                    sessions[j].run(None, feeds[j])
                wall[r, j] = (time.perf_counter() - t0) / bursts[j]
    return wall, settings


def _gain(advice: Advice, wall: np.ndarray, batches: np.ndarray, j: int
          ) -> tuple[float, float]:
    """(measured gain of column j over column 0, relative half-IQR of the per-round gains)."""
    if advice.objective == "latency":
        per_round = wall[:, 0] / wall[:, j]
        measured = float(np.median(wall[:, 0]) / np.median(wall[:, j]))
    else:
        per_round = (batches[j] / wall[:, j]) / (batches[0] / wall[:, 0])
        measured = float((batches[j] / np.median(wall[:, j]))
                         / (batches[0] / np.median(wall[:, 0])))
    q25, q75 = np.percentile(per_round, [25, 75])
    return measured, float((q75 - q25) / 2 / np.median(per_round))


def verify(advice: Advice, source: Any, dims: Mapping[str, int] | None = None,
           repeats: int = 5, warmup: int = 1, seed: int = 0,
           alternatives: Sequence[Setting] = ()) -> Verification:
    """Measure the default and the recommended settings (module docstring); ``alternatives``
    are measured too (table rows with role ``alternative``, gains against the default)."""
    check_local(advice.device)
    dims = {k: v for k, v in (dims or {}).items() if k != "batch"}
    again = [] if advice.recommended == advice.default else [advice.default]
    settings = [advice.default, advice.recommended, *again, *alternatives]
    roles = ["default", "recommended", *(["default_again"] * len(again)),
             *(["alternative"] * len(alternatives))]
    load_before = os.getloadavg()[0]
    wall, measured = measure_settings(source, dims, settings, repeats, warmup, seed)
    notes = tuple(f"{s.label()} ({role}) not measured: its ONNX Runtime session would not fit "
                  "in the available memory" for role, s in
                  zip(roles[len(measured):], settings[len(measured):], strict=True))
    settings, roles = measured, roles[:len(measured)]
    load_after = os.getloadavg()[0]
    batches = np.array([s.batch for s in settings], dtype=float)
    rows = []
    for j, (role, s) in enumerate(zip(roles, settings, strict=True)):
        row = advice.row(s)
        med = float(np.median(wall[:, j]))
        gain, noise = _gain(advice, wall, batches, j)
        rows.append({
            "role": role, "setting": s.label(), "batch": s.batch,
            "predicted_ms": float(row["time_ms"]), "measured_ms": med * 1e3,
            "measured_p25_ms": float(np.percentile(wall[:, j], 25)) * 1e3,
            "measured_p75_ms": float(np.percentile(wall[:, j], 75)) * 1e3,
            "predicted_samples_per_s": float(row["throughput_samples_per_s"]),
            "measured_samples_per_s": s.batch / med,
            "predicted_gain": float(row["gain"]), "measured_gain": gain, "noise": noise,
        })
    predicted = advice.predicted_gain
    measured, noise = rows[1]["measured_gain"], rows[1]["noise"]
    aa = [r["measured_gain"] for r in rows if r["role"] == "default_again"]
    if advice.recommended == advice.default:
        aa = [measured]
    session_noise = abs(aa[0] - 1.0) if aa else math.nan
    if aa:
        noise = max(noise, session_noise)
    return Verification(table=pd.DataFrame(rows), predicted_gain=predicted,
                        measured_gain=measured, noise=noise, error=predicted / measured - 1,
                        repeats=repeats, load_before=load_before, load_after=load_after,
                        notes=notes, session_noise=session_noise)
