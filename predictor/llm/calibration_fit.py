"""Fitting the engine calibration (``calibration``) on measured serving rows.

``request_features(rows)``: per measured row, the uncalibrated model times from
``phases.request_model_times`` (static batches in waves that fit in memory; llama.cpp rows as
one request whose prompt is processed ``n_batch`` tokens per step). The request latency is

    y = f_vp a_p P + f_vd a_d D + c_p n_p + c_d n_d [+ s_p S_p + s_d S_d]

(P/D: model prefill/decode seconds, n: steps, S: sequences summed over steps, f_v: the vendor's
factors, 1 for ``BASELINE_VENDOR``). ``fit_engine`` fits the logs of a, c, f (and s with
``per_seq``) on log latency with a soft-L1 loss; ``loo`` refits without each device and predicts
it; ``fit_device_factors`` gives a measured device its own factors, shrunk toward its vendor's
by ``SHRINK_ROWS`` pseudo-rows. Derivation and evidence: ``docs/design/fitted.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

#: the vendor every engine's factor is relative to (most rows; TensorRT-LLM runs only there).
BASELINE_VENDOR = "NVIDIA"
#: the soft-L1 loss scale on log latency (0.2 ~ 22 %: rows further off weigh linearly).
LOSS_SCALE = 0.2
#: the TTFT rows' share of the fit's total weight (``fit_engine``).
TTFT_SHARE = 0.25
#: quantiles of measured / predicted (leave-one-device-out) that bound the interval.
QUANTILES = (0.1, 0.9)
#: a row whose latency is below this fraction of the uncalibrated model time is a failed run
#: (the ones seen are 100x faster than the device's bandwidth allows); counted, not fitted.
IMPLAUSIBLE_RATIO = 0.25
#: the prior of a device factor at its vendor's factor, in rows (module docstring).
SHRINK_ROWS = 10.0
FEATURES = ("prefill_s", "decode_s", "prefill_steps", "decode_steps", "prefill_seqs",
            "decode_seqs", "waves", "wave_batch", "max_batch", "vendor")


def _cfg(row, n: int, m: int):
    from roofcast.predictor.llm.types import ServingConfig

    return ServingConfig(input_tokens=int(n), output_tokens=int(m), batch=None,
                         weights=row.weights, kv_cache=row.kv_cache, runtime=row.engine)


def _features(*values) -> dict:
    return dict(zip(FEATURES, values, strict=True))


def _row_features(row, arch, hw, times: Callable) -> dict:
    """The features of one measured row (module docstring); ``times(arch, hw, cfg, batch)``
    returns ``phases.RequestModelTimes``."""
    from roofcast.predictor.memory.serving import max_batch
    from roofcast.predictor.runtimes import get_runtime

    n, b = int(row.input_tokens), int(row.batch)
    m = 1 if row.figure == "ttft" else int(row.output_tokens)
    cfg = _cfg(row, n, m)
    if row.engine == "llama.cpp":
        chunks = math.ceil(n / b)
        pre = times(arch, hw, _cfg(row, b, 1), 1).prefill_s * chunks
        dec = times(arch, hw, cfg, 1).decode_total_s if m > 1 else 0.0
        return _features(pre, dec, chunks, m - 1, chunks, m - 1, 1, 1, 1, hw.vendor)
    mb = max_batch(arch, hw, cfg, get_runtime(row.engine))
    if mb < 1:
        return dict.fromkeys(FEATURES, np.nan) | {"max_batch": 0, "vendor": hw.vendor}
    waves = math.ceil(b / mb)
    wb = math.ceil(b / waves)
    rt = times(arch, hw, cfg, wb)
    dec = rt.decode_total_s if m > 1 else 0.0
    return _features(waves * rt.prefill_s, waves * dec, waves, waves * (m - 1), waves * wb,
                     waves * (m - 1) * wb, waves, wb, mb, hw.vendor)


def request_features(rows: pd.DataFrame, times: Callable | None = None) -> pd.DataFrame:
    """``rows`` plus the ``FEATURES`` columns (``figure`` ``ttft`` rows are the Fig 22
    TTFT measurements, target ``ttft_s``; others target ``latency_s``); a row that does not fit
    in memory gets NaN features and ``max_batch`` 0."""
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.hw_catalog import get_device

    if times is None:
        from roofcast.predictor.llm.phases import request_model_times as times
    archs = {name: load_llm(name) for name in rows["model"].unique()}
    hws = {dev: get_device(dev) for dev in rows["device"].unique()}
    cache: dict[tuple, dict] = {}
    out = []
    for row in rows.itertuples(index=False):
        key = (row.figure, row.model, row.device, row.engine, row.input_tokens,
               row.output_tokens, row.batch, row.weights, row.kv_cache)
        if key not in cache:
            cache[key] = _row_features(row, archs[row.model], hws[row.device], times)
        out.append(cache[key])
    feats = pd.DataFrame(out, index=rows.index, columns=list(FEATURES))
    return pd.concat([rows, feats], axis=1)


def target(frame: pd.DataFrame) -> np.ndarray:
    """The measured seconds each row is fitted to: TTFT for ``ttft`` rows, else latency."""
    return np.where(frame["figure"] == "ttft", frame["ttft_s"], frame["latency_s"])


@dataclass(frozen=True)
class EngineFit:
    """Fitted parameters of one engine (module docstring): phase scales, overheads (s per
    step) and vendor factors per phase (baseline 1); a vendor without fitted factors gets the
    geometric mean of the phase's factors. ``prefill_device``/``decode_device``: the measured
    devices' own factors (``fit_device_factors``), used before the vendor's."""

    a_prefill: float
    a_decode: float
    c_prefill_s: float
    c_decode_s: float
    prefill_factors: dict[str, float]
    decode_factors: dict[str, float]
    prefill_device: dict[str, float] = field(default_factory=dict)
    decode_device: dict[str, float] = field(default_factory=dict)
    #: host seconds per sequence per step (``fit_engine`` with ``per_seq``; else 0).
    seq_prefill_s: float = 0.0
    seq_decode_s: float = 0.0

    def host_s(self, frame: pd.DataFrame) -> np.ndarray:
        """The rows' host seconds: per step and per sequence per step."""
        return (self.c_prefill_s * frame["prefill_steps"] + self.c_decode_s * frame["decode_steps"]
                + self.seq_prefill_s * frame["prefill_seqs"]
                + self.seq_decode_s * frame["decode_seqs"]).to_numpy(float)

    def factor(self, factors: dict[str, float], vendors: np.ndarray,
               devices: np.ndarray | None = None, device: dict[str, float] | None = None
               ) -> np.ndarray:
        """Per row: the device's factor where ``device`` has it, else the vendor's, else 1."""
        devices = [None] * len(vendors) if devices is None else devices
        device = device or {}
        return np.array([device[d] if d in device else factors.get(v, 1.0)
                         for v, d in zip(vendors, devices, strict=True)], dtype=float)

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """Modelled seconds of each row (its ``target``)."""
        v = frame["vendor"].to_numpy()
        d = frame["device"].to_numpy() if "device" in frame else None
        return (self.factor(self.prefill_factors, v, d, self.prefill_device) * self.a_prefill
                * frame["prefill_s"]
                + self.factor(self.decode_factors, v, d, self.decode_device) * self.a_decode
                * frame["decode_s"]).to_numpy(float) + self.host_s(frame)


def _weights(frame: pd.DataFrame, share: float) -> np.ndarray:
    """Row weights giving the TTFT rows ``share`` of the total (1 each without TTFT rows)."""
    is_ttft = (frame["figure"] == "ttft").to_numpy()
    w = np.ones(len(frame))
    if is_ttft.any() and (~is_ttft).any() and share > 0:
        w[is_ttft] = share / (1 - share) * (~is_ttft).sum() / is_ttft.sum()
    return w


def fit_engine(frame: pd.DataFrame, *, vendor_factors: bool = True,
               ttft_share: float | None = None, per_seq: bool = False) -> EngineFit:
    """Fit one engine's rows (module docstring); ``vendor_factors`` False: one factor for all
    devices (every vendor 1); ``per_seq``: also the host seconds per sequence per step
    ``s_p``, ``s_d`` (``+ s_p S_p + s_d S_d``, ``S``: the summed sequences of the steps),
    non-negative like ``c`` (fitted in log). ``ttft_share``: the TTFT rows' share of the total
    weight (default ``TTFT_SHARE``; they are the only direct prefill measurements, a few dozen
    beside hundreds of request rows, and would otherwise leave the prefill scale to the request
    rows, where prefill is a small part)."""
    from scipy.optimize import least_squares

    present = sorted(set(frame["vendor"]))
    base = BASELINE_VENDOR if BASELINE_VENDOR in present else present[0]
    vendors = [v for v in present if v != base] if vendor_factors else []
    k = len(vendors)
    which = np.array([vendors.index(v) if v in vendors else -1 for v in frame["vendor"]])
    cols = [frame[c].to_numpy(float) for c in ("prefill_s", "decode_s", "prefill_steps",
                                                 "decode_steps", "prefill_seqs", "decode_seqs")]
    j = 4 + 2 * k  # the per-sequence parameters, after the vendor factors
    y = np.log(target(frame).astype(float))
    sw = np.sqrt(_weights(frame, TTFT_SHARE if ttft_share is None else ttft_share))

    def model(th: np.ndarray) -> np.ndarray:
        ap, ad, cp, cd = np.exp(th[:4])
        fp = np.exp(np.append(th[4:4 + k], 0.0)[which])  # which = -1 -> the appended 0
        fd = np.exp(np.append(th[4 + k:j], 0.0)[which])
        t = fp * ap * cols[0] + fd * ad * cols[1] + cp * cols[2] + cd * cols[3]
        return t + (np.exp(th[j]) * cols[4] + np.exp(th[j + 1]) * cols[5] if per_seq else 0.0)

    th0 = np.array([0.0, 0.0, np.log(1e-3), np.log(1e-3)] + [0.0] * (2 * k)
                   + [np.log(1e-5)] * (2 if per_seq else 0))
    th = least_squares(lambda t: sw * (np.log(model(t)) - y), th0, loss="soft_l1",
                       f_scale=LOSS_SCALE,
                       bounds=(np.full(len(th0), -25.0), np.full(len(th0), 8.0))).x
    pre = {base: 1.0} | {v: float(np.exp(th[4 + i])) for i, v in enumerate(vendors)}
    dec = {base: 1.0} | {v: float(np.exp(th[4 + k + i])) for i, v in enumerate(vendors)}
    if not vendor_factors:
        pre = dec = dict.fromkeys(present, 1.0)
    seq = [float(v) for v in np.exp(th[j:j + 2])] if per_seq else [0.0, 0.0]
    return EngineFit(*(float(v) for v in np.exp(th[:4])), prefill_factors=pre,
                     decode_factors=dec, seq_prefill_s=seq[0], seq_decode_s=seq[1])


def _soft_l1(r: np.ndarray) -> np.ndarray:
    """Residuals whose squares sum to the soft-L1 loss (scale ``LOSS_SCALE``) of ``r``: the
    data term robust as in ``fit_engine``, the prior term beside it stays quadratic."""
    z = (r / LOSS_SCALE) ** 2
    return np.sign(r) * LOSS_SCALE * np.sqrt(2.0 * (np.sqrt(1.0 + z) - 1.0))


def fit_device_factors(frame: pd.DataFrame, fit: EngineFit, *,
                       shrink_rows: float = SHRINK_ROWS,
                       ttft_share: float = TTFT_SHARE) -> EngineFit:
    """``fit`` with every device of ``frame`` given its own per-phase factors, fitted on its
    rows and shrunk toward its vendor's (module docstring: ``SHRINK_ROWS`` pseudo-rows)."""
    from scipy.optimize import least_squares

    pre, dec = {}, {}
    for dev, g in frame.groupby("device"):
        vendor = g["vendor"].to_numpy()[:1]
        fvp = float(fit.factor(fit.prefill_factors, vendor)[0])
        fvd = float(fit.factor(fit.decode_factors, vendor)[0])
        p = fit.a_prefill * fvp * g["prefill_s"].to_numpy(float)
        d = fit.a_decode * fvd * g["decode_s"].to_numpy(float)
        c = fit.host_s(g)
        y = np.log(target(g).astype(float))
        sw = np.sqrt(_weights(g, ttft_share))
        prior = math.sqrt(shrink_rows)

        def res(gg: np.ndarray, p=p, d=d, c=c, y=y, sw=sw, prior=prior) -> np.ndarray:
            t = np.exp(gg[0]) * p + np.exp(gg[1]) * d + c
            return np.append(_soft_l1(sw * (np.log(t) - y)), prior * gg)

        gg = least_squares(res, np.zeros(2), bounds=(-5.0, 5.0)).x
        pre[str(dev)], dec[str(dev)] = fvp * float(np.exp(gg[0])), fvd * float(np.exp(gg[1]))
    return replace(fit, prefill_device=pre, decode_device=dec)


def abs_pct(pred: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """|pred / measured - 1| x 100."""
    return np.abs(np.asarray(pred, float) / np.asarray(measured, float) - 1.0) * 100.0


def loo(frame: pd.DataFrame, *, vendor_factors: bool = True, per_seq: bool = False,
        by: str = "device") -> pd.Series:
    """Leave-one-device-out predictions of every row (NaN where the engine has one device);
    ``by="model"``: leave one model out instead (the per-sequence choice of a one-device
    engine)."""
    pred = pd.Series(np.nan, index=frame.index)
    devices = sorted(set(frame[by]))
    if len(devices) < 2:
        return pred
    for dev in devices:
        held = frame[by] == dev
        fit = fit_engine(frame[~held], vendor_factors=vendor_factors, per_seq=per_seq)
        pred[held] = fit.predict(frame[held])
    return pred


def predict_calibrated(cal, frame: pd.DataFrame, hws: dict) -> tuple[np.ndarray, ...]:
    """(t, lo, hi) of each row under a shipped ``EngineCalibration`` ``cal``: the summed
    features through ``cal``'s phases (the same formula and level as ``apply`` per step, with
    the overheads counted per step and per sequence of each step); ``hws``: device id ->
    ``HardwareSpec``."""
    out = []
    for p_col, n_col, s_col, phase in (("prefill_s", "prefill_steps", "prefill_seqs", "prefill"),
                                       ("decode_s", "decode_steps", "decode_seqs", "decode")):
        ph = cal.phases[phase]
        levels = {d: cal.level(phase, hws[d]) for d in set(frame["device"])}
        f = np.array([levels[d][1] for d in frame["device"]])
        q = np.array([levels[d][2:] for d in frame["device"]])
        t = (f * ph.scale * frame[p_col].to_numpy(float)
             + ph.overhead_s * frame[n_col].to_numpy(float)
             + ph.seq_overhead_s * frame[s_col].to_numpy(float))
        out.append((t, np.minimum(t, q[:, 0] * t), np.maximum(t, q[:, 1] * t)))
    return tuple(out[0][i] + out[1][i] for i in range(3))


#: rows whose model times the calibration file records (``reference_times``), so that a change
#: of the kernel model without a refit is caught (tests/predictor/llm/test_calibration.py).
REFERENCE_ROWS: tuple[dict, ...] = (
    {"engine": "vllm-2024", "device": "h100-sxm", "model": "llama-2-7b", "batch": 16,
     "input_tokens": 1024, "output_tokens": 1024},
    {"engine": "tensorrt-llm-2024", "device": "a100-40gb-sxm", "model": "llama-3-8b", "batch": 64,
     "input_tokens": 512, "output_tokens": 512},
    {"engine": "llama.cpp", "device": "mi300x", "model": "mistral-7b", "batch": 16,
     "input_tokens": 256, "output_tokens": 256},
    {"engine": "vllm-2024", "device": "mi300x", "model": "mixtral-8x7b", "batch": 64,
     "input_tokens": 128, "output_tokens": 128},
)


def reference_times() -> list[dict]:
    """``REFERENCE_ROWS`` with their model ``prefill_s`` and ``decode_s`` (fp16)."""
    rows = pd.DataFrame([r | {"figure": "all", "weights": "fp16", "kv_cache": "fp16"}
                         for r in REFERENCE_ROWS])
    f = request_features(rows)
    return [r | {"prefill_s": float(p), "decode_s": float(d)}
            for r, p, d in zip(REFERENCE_ROWS, f["prefill_s"], f["decode_s"], strict=True)]
