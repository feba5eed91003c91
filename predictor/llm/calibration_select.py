"""Choose and fit each engine's calibration on measured serving rows (``EngineCalibrations.fit``).

``fit_all(rows)``: per engine (rows of ``calibration_fit.request_features`` with ``figure``,
``engine``, ``device``, ``vendor``, ``model``), the plain fit (one factor for every device) and
the fit with vendor factors are scored leave-one-device-out and the lower ``_score`` kept; the
per-sequence host term is kept only where its held-out score is lower and the rows measured
steps of different sequence counts. Intervals: 10/90 % quantiles of measured / held-out
predicted per phase (prefill from TTFT rows when an engine has ``MIN_PHASE_ROWS``), overall and
per vendor; every measured device gets its own shrunk factors (``fit_device_factors``) and
in-sample quantiles. The result is the ``engines`` table of ``llm_engines.json``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.hw_catalog import get_device
from roofcast.predictor.llm.calibration_fit import (
    QUANTILES,
    SHRINK_ROWS,
    abs_pct,
    fit_device_factors,
    fit_engine,
    loo,
    target,
)

MIN_PHASE_ROWS = 6


def _quantiles(ratio: np.ndarray) -> list[float]:
    ratio = ratio[np.isfinite(ratio)]
    return [float(np.quantile(ratio, q)) for q in QUANTILES]


def _clamp(q: list[float]) -> list[float]:
    """An interval that contains the prediction itself (a biased LOO still brackets t)."""
    return [min(q[0], 1.0), max(q[1], 1.0)]


def _phase(scale: float, overhead_s: float, q: list[float], factors: dict[str, float],
           vendor_q: dict[str, list[float]], device_f: dict[str, float],
           device_q: dict[str, list[float]]) -> dict:
    lo, hi = _clamp(q)
    return {"scale": scale, "overhead_s": overhead_s, "ratio_lo": lo, "ratio_hi": hi,
            "vendor_ratios": vendor_q, "vendor_factors": factors,
            "device_factors": device_f, "device_ratios": device_q}


def _device_ratios(g: pd.DataFrame, ratio: np.ndarray) -> tuple[dict, dict]:
    """Per device and phase, (q_lo, q_hi) of measured / in-sample predicted (device level):
    prefill from the device's TTFT rows where it has ``MIN_PHASE_ROWS``, else from its request
    rows; a device with fewer request rows gets the engine's in-distribution quantiles."""
    req = (g["figure"] != "ttft").to_numpy()
    engine_q = _clamp(_quantiles(ratio[req]))
    pre, dec = {}, {}
    for dev in sorted(set(g["device"])):
        mine = (g["device"] == dev).to_numpy()
        dec[dev] = (_clamp(_quantiles(ratio[req & mine])) if (req & mine).sum() >= MIN_PHASE_ROWS
                    else engine_q)
        tt = ~req & mine
        pre[dev] = _clamp(_quantiles(ratio[tt])) if tt.sum() >= MIN_PHASE_ROWS else dec[dev]
    return pre, dec


def _score(pred: np.ndarray, g: pd.DataFrame) -> float:
    """The variant choice: LOO median error of the request rows, averaged with that of the
    TTFT rows where the engine has some (a variant must not win on latency by wrecking TTFT)."""
    e = abs_pct(pred, target(g).astype(float))
    ttft = (g["figure"] == "ttft").to_numpy()
    parts = [np.median(e[~ttft])] + ([np.median(e[ttft])] if ttft.any() else [])
    return float(np.mean(parts))


def _seq_choice(g: pd.DataFrame, use_vf: bool, without: np.ndarray | None
                ) -> tuple[dict[str, float], np.ndarray]:
    """``_score`` of the held-out predictions without (``without``, the chosen variant's LOO;
    None: one device) and with the per-sequence host term (kept only where it scores lower,
    as the vendor factors), and the held-out predictions with it: leave-one-device-out, or
    leave-one-model-out for a one-device engine (in-sample would always favour the term)."""
    by = "device" if without is not None else "model"
    if without is None:
        without = loo(g, vendor_factors=use_vf, by=by).to_numpy()
    pred = loo(g, vendor_factors=use_vf, per_seq=True, by=by).to_numpy()
    return {"without": _score(without, g), "with": _score(pred, g)}, pred


def _errors(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    e = abs_pct(pred, meas)
    e = e[np.isfinite(e)]
    return {"n": len(e), "median_abs_pct": float(np.median(e)),
            "mean_abs_pct": float(np.mean(e)), "p90_abs_pct": float(np.quantile(e, 0.9))}


def fit_all(rows: pd.DataFrame) -> dict:
    """Per engine: the chosen fit, its LOO and in-distribution errors, intervals.

    Long because: one pass per engine builds the record written to the file, each field beside
    the figures it comes from (moved as it was from benchmarks/fit_llm_engines.py)."""
    out = {}
    for engine, g in rows.groupby("engine"):
        meas = target(g).astype(float)
        variants = {}
        for vf in (False, True):
            pred = loo(g, vendor_factors=vf).to_numpy()
            variants[vf] = (pred, _errors(pred, meas) if np.isfinite(pred).any() else None)
        has_loo = variants[False][1] is not None
        use_vf = has_loo and _score(variants[True][0], g) < _score(variants[False][0], g)
        seq_score, seq_pred = _seq_choice(g, use_vf, variants[use_vf][0] if has_loo else None)
        # identifiable only where steps of one and of several sequences were measured (all
        # llama.cpp rows are one request: s would be c under another name)
        varied = g["wave_batch"].nunique() > 1
        use_seq = varied and seq_score["with"] < seq_score["without"]
        if use_seq and has_loo:
            variants[use_vf] = (seq_pred, None)
        fit = fit_engine(g, vendor_factors=use_vf, per_seq=use_seq)
        dfit = fit_device_factors(g, fit)
        vendor_ins = fit.predict(g)
        ins = dfit.predict(g)
        dev_pre_q, dev_dec_q = _device_ratios(g, meas / ins)
        held = variants[use_vf][0] if has_loo else vendor_ins
        ratio = meas / held
        req = (g["figure"] != "ttft").to_numpy()
        ttft = ~req
        pre_q = _quantiles(ratio[ttft]) if ttft.sum() >= MIN_PHASE_ROWS else _quantiles(ratio[req])
        dec_q = _quantiles(ratio[req])
        vendor = g["vendor"].to_numpy()
        pre_v, dec_v = {}, {}
        for v in sorted(set(vendor)) if has_loo else []:
            mine = vendor == v
            if (ttft & mine).sum() >= MIN_PHASE_ROWS:
                pre_v[v] = _clamp(_quantiles(ratio[ttft & mine]))
            if (req & mine).sum() >= MIN_PHASE_ROWS:
                dec_v[v] = _clamp(_quantiles(ratio[req & mine]))
                pre_v.setdefault(v, dec_v[v])
        out[engine] = {
            "fitted": True,
            "variant": "vendor factors" if use_vf else "one factor for all devices",
            "prefill": _phase(fit.a_prefill, fit.c_prefill_s, pre_q,
                              fit.prefill_factors if use_vf else {}, pre_v,
                              dfit.prefill_device, dev_pre_q) | {
                "seq_overhead_s": fit.seq_prefill_s},
            "decode": _phase(fit.a_decode, fit.c_decode_s, dec_q,
                             fit.decode_factors if use_vf else {}, dec_v,
                             dfit.decode_device, dev_dec_q) | {
                "seq_overhead_s": fit.seq_decode_s},
            "per_sequence_term": {
                "kept": bool(use_seq), "identifiable": bool(varied),
                "held_out": "leave-one-device-out" if has_loo else "leave-one-model-out "
                            "(one device)",
                "score_with": seq_score["with"], "score_without": seq_score["without"]},
            "device_kinds": sorted({get_device(d).kind for d in set(g["device"])}),
            "interval_basis": "leave-one-device-out" if has_loo else "in-sample (one device)",
            "rows_per_device": {d: int(n) for d, n in g.groupby("device").size().items()},
            "in_distribution": _errors(ins[req], meas[req]),
            "in_distribution_vendor_level": _errors(vendor_ins[req], meas[req]),
            "shrink_rows": SHRINK_ROWS,
        }
        if has_loo:
            pred = variants[use_vf][0]
            out[engine]["loo"] = _errors(pred[req], meas[req]) | {
                "per_device": {d: _errors(pred[req & (g["device"] == d).to_numpy()],
                                          meas[req & (g["device"] == d).to_numpy()])
                               ["median_abs_pct"] for d in sorted(set(g["device"]))},
                "plain_median_abs_pct": _errors(variants[False][0][req], meas[req])
                ["median_abs_pct"],
                "vendor_median_abs_pct": _errors(variants[True][0][req], meas[req])
                ["median_abs_pct"]}
            if ttft.any():
                out[engine]["loo_ttft"] = _errors(pred[ttft], meas[ttft])
    return out
