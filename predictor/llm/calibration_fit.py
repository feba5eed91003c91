"""Fitting the engine calibration (``calibration``) on measured serving rows.

``request_features(rows)``: per measured row (``training_data.public.llm_serving`` columns), the
uncalibrated model times the calibration multiplies, from ``phases.request_model_times``:

* static batching (vLLM, TensorRT-LLM, DeepSpeed-MII rows): ``batch`` requests of ``N`` in and
  ``M`` out; when they do not all fit in memory (``memory.max_batch``) they run in
  ``waves = ceil(batch / max_batch)`` waves of ``ceil(batch / waves)`` (Argonne's large-batch
  A100 rows are KV-capacity-limited); per wave one prefill and ``M - 1`` decode steps:
  ``prefill_s``/``decode_s`` = waves x the wave's model times, ``prefill_steps`` = waves,
  ``decode_steps`` = waves x (M - 1);
* llama.cpp rows: Argonne's "batch" is llama.cpp's prompt batch (``n_batch``), not concurrent
  requests: the latency falls as it grows (1 -> 16: about 1.8x on every device) and stays flat
  from 16 to 64, as one request whose prompt is processed ``n_batch`` tokens per step would.
  One request; prefill = ``ceil(N / n_batch)`` steps of ``n_batch`` tokens (the model times one
  chunk at its own length: the attention over the earlier chunks is left out, < 3 % of a 7B
  layer at 2048 tokens), then ``M - 1`` decode steps.

The measured request latency is then modelled as

    y = f_v (a_p P + a_d D) + c_p n_p + c_d n_d

(``P``/``D``: the summed model prefill/decode seconds, ``n_p``/``n_d``: the steps); a Fig 22
TTFT row (one output token) is ``f_v a_p P + c_p n_p``. ``fit_engine`` fits ``log a_p, log a_d,
log c_p, log c_d`` and the non-baseline vendors' ``log f_v`` on log latency with a soft-L1 loss
(scipy ``least_squares``; a few broken rows must not steer it); ``loo`` refits without each
device in turn and predicts it (a vendor not left in the training rows gets the geometric mean
of the fitted vendor factors, as ``unseen_vendor_factor`` does at prediction time).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: the vendor every engine's factor is relative to (most rows; TensorRT-LLM runs only there).
BASELINE_VENDOR = "NVIDIA"
#: the soft-L1 loss scale on log latency (0.2 ~ 22 %: rows further off weigh linearly).
LOSS_SCALE = 0.2
#: quantiles of measured / predicted (leave-one-device-out) that bound the interval.
QUANTILES = (0.1, 0.9)
#: a row whose latency is below this fraction of the uncalibrated model time is a failed run
#: (the ones seen are 100x faster than the device's bandwidth allows); counted, not fitted.
IMPLAUSIBLE_RATIO = 0.25
FEATURES = ("prefill_s", "decode_s", "prefill_steps", "decode_steps", "waves", "wave_batch",
            "max_batch", "vendor")


def _cfg(row, n: int, m: int):
    from roofcast.predictor.llm.types import ServingConfig

    return ServingConfig(input_tokens=int(n), output_tokens=int(m), batch=None,
                         weights=row.weights, kv_cache=row.kv_cache, runtime=row.engine)


def _row_features(row, arch, hw, times: Callable) -> dict:
    """The features of one measured row (module docstring); ``times(arch, hw, cfg, batch)``
    returns ``phases.RequestModelTimes``."""
    from roofcast.predictor.llm.memory import max_batch
    from roofcast.predictor.runtimes import get_runtime

    n, b = int(row.input_tokens), int(row.batch)
    m = 1 if row.figure == "ttft" else int(row.output_tokens)
    cfg = _cfg(row, n, m)
    if row.engine == "llama.cpp":
        chunks = math.ceil(n / b)
        pre = times(arch, hw, _cfg(row, b, 1), 1).prefill_s * chunks
        dec = times(arch, hw, cfg, 1).decode_total_s if m > 1 else 0.0
        return dict(prefill_s=pre, decode_s=dec, prefill_steps=chunks, decode_steps=m - 1,
                    waves=1, wave_batch=1, max_batch=1, vendor=hw.vendor)
    mb = max_batch(arch, hw, cfg, get_runtime(row.engine))
    if mb < 1:
        return dict.fromkeys(FEATURES, np.nan) | {"max_batch": 0, "vendor": hw.vendor}
    waves = math.ceil(b / mb)
    wb = math.ceil(b / waves)
    rt = times(arch, hw, cfg, wb)
    dec = rt.decode_total_s if m > 1 else 0.0
    return dict(prefill_s=waves * rt.prefill_s, decode_s=waves * dec, prefill_steps=waves,
                decode_steps=waves * (m - 1), waves=waves, wave_batch=wb, max_batch=mb,
                vendor=hw.vendor)


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
    """Fitted parameters of one engine (module docstring): phase scales and overheads (s per
    step), vendor factors (baseline 1), the unseen-vendor factor."""

    a_prefill: float
    a_decode: float
    c_prefill_s: float
    c_decode_s: float
    vendor_factors: dict[str, float]

    @property
    def unseen_vendor_factor(self) -> float:
        return float(np.exp(np.mean(np.log(list(self.vendor_factors.values())))))

    def factor(self, vendors: np.ndarray) -> np.ndarray:
        return np.array([self.vendor_factors.get(v, self.unseen_vendor_factor) for v in vendors])

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """Modelled seconds of each row (its ``target``)."""
        f = self.factor(frame["vendor"].to_numpy())
        return (f * (self.a_prefill * frame["prefill_s"] + self.a_decode * frame["decode_s"])
                + self.c_prefill_s * frame["prefill_steps"]
                + self.c_decode_s * frame["decode_steps"]).to_numpy(float)


def fit_engine(frame: pd.DataFrame, *, vendor_factors: bool = True) -> EngineFit:
    """Fit one engine's rows (module docstring); ``vendor_factors`` False: one factor for all."""
    from scipy.optimize import least_squares

    vendors = sorted(set(frame["vendor"]) - {BASELINE_VENDOR}) if vendor_factors else []
    base = BASELINE_VENDOR if BASELINE_VENDOR in set(frame["vendor"]) or not vendor_factors \
        else None
    if base is None:  # no baseline rows: the first vendor is the reference
        base, vendors = vendors[0], vendors[1:]
    idx = {v: i for i, v in enumerate(vendors)}
    vcol = frame["vendor"].to_numpy()
    which = np.array([idx.get(v, -1) for v in vcol])
    cols = {k: frame[k].to_numpy(float) for k in ("prefill_s", "decode_s", "prefill_steps",
                                                    "decode_steps")}
    y = np.log(target(frame).astype(float))

    def model(th: np.ndarray) -> np.ndarray:
        ap, ad, cp, cd = np.exp(th[:4])
        f = np.where(which >= 0, np.exp(np.append(th[4:], 0.0)[which]), 1.0)
        return (f * (ap * cols["prefill_s"] + ad * cols["decode_s"]) + cp * cols["prefill_steps"]
                + cd * cols["decode_steps"])

    th0 = np.array([0.0, 0.0, np.log(1e-3), np.log(1e-3)] + [0.0] * len(vendors))
    res = least_squares(lambda th: np.log(model(th)) - y, th0, loss="soft_l1",
                        f_scale=LOSS_SCALE, bounds=(np.full(len(th0), -25.0),
                                                    np.full(len(th0), 8.0)))
    th = res.x
    factors = {base: 1.0} | ({v: float(np.exp(th[4 + i])) for v, i in idx.items()}
                             if vendor_factors else {})
    if not vendor_factors:
        factors = {v: 1.0 for v in sorted(set(vcol))}
    return EngineFit(*(float(v) for v in np.exp(th[:4])), vendor_factors=factors)


def abs_pct(pred: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """|pred / measured - 1| x 100."""
    return np.abs(np.asarray(pred, float) / np.asarray(measured, float) - 1.0) * 100.0


def loo(frame: pd.DataFrame, *, vendor_factors: bool = True) -> pd.Series:
    """Leave-one-device-out predictions of every row (NaN where the engine has one device)."""
    pred = pd.Series(np.nan, index=frame.index)
    devices = sorted(set(frame["device"]))
    if len(devices) < 2:
        return pred
    for dev in devices:
        held = frame["device"] == dev
        fit = fit_engine(frame[~held], vendor_factors=vendor_factors)
        pred[held] = fit.predict(frame[held])
    return pred
