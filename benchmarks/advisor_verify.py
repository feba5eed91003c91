"""Advisor acceptance over the model zoo on this machine: is the throughput recommendation at
least as fast as ONNX Runtime's defaults, and is its predicted gain within 15 % of the measured?

For every zoo model (or ``--models``):

1. ``advise(..., "local", objective="throughput", batch=1)``; the largest batch tried is
   ``--max-batch``, lowered for heavy models so that one run of the largest batch is predicted
   to take at most ``--max-run-s`` (bounded time; the prediction decides, no per-model list).
2. ``verify``: the default (intra-op = cores, sequential, opt level all, batch 1) and the
   recommended settings run interleaved with ONNX Runtime, ``--repeats`` timed runs each after
   ``--warmup``; latency = median wall time, throughput = batch / latency.
3. Row: predicted and measured gain, ``error`` = |predicted − measured| / measured, ``noise``
   = the larger of the relative half-IQR of the per-round gains and the session noise
   (``session_noise``: two independent sessions of the default, ``predictor.advisor_verify``),
   ``as_fast`` = measured gain ≥ 1 − noise,
   ``within_15pct`` = error ≤ 0.15. When the recommendation is the default itself, its
   "gain" is an A/A comparison of two identical sessions (the noise floor); the best-ranked
   other setting (``alternative``) is measured in the same rounds so that a predicted gain
   of a real change is checked too, and so is the best inter-op parallel setting when neither
   of those is one (``inter``; ``--no-alternative`` skips both).

Transformers are bound at ``--sequence`` tokens (default 32; small so the run stays bounded).
A model ONNX Runtime cannot run here is a row with the reason, never dropped. The load average
before and after and the top CPU users are printed: other processes on a 2-core machine inflate
both the noise and the error, so run it on a quiet machine.

    python benchmarks/advisor_verify.py [--models resnet50,gpt2] [--repeats 5] [--format csv]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from roofcast.app.output import emit
from roofcast.graph_import.errors import ModelImportError
from roofcast.hw_catalog.catalog import get_device
from roofcast.models import load_model
from roofcast.predictor.advisor import advise
from roofcast.predictor.advisor_verify import verify
from roofcast.predictor.errors import PredictionError
from roofcast.training_data import zoo
from roofcast.training_data.errors import MeasurementError

TOLERANCE = 0.15


def model_dims(name: str, sequence: int) -> dict[str, int]:
    """The zoo model's export dims other than batch, with sequence-like dims set to
    ``sequence``."""
    dims = {k: int(v) for k, v in zoo.model_meta(name).get("export_dims", {}).items()
            if k != "batch"}
    return {k: (sequence if "seq" in k else v) for k, v in dims.items()}


def batch_limit(name: str, dims: dict[str, int], hw, max_batch: int, max_run_s: float,
                estimator: str) -> int:
    """Largest power of two <= max_batch whose predicted default run takes <= max_run_s."""
    model = load_model(name, dims)
    one = advise(model.graph_at, hw, "latency", batch=1,
                 estimator=estimator, fusions=(True,))
    t1 = float(one.row(one.default)["time_ms"]) / 1e3
    b = 1
    while b * 2 <= max_batch and (b * 2) * t1 <= max_run_s:
        b *= 2
    return b


def one_model(name: str, args: argparse.Namespace, hw) -> dict:
    dims = model_dims(name, args.sequence)
    row = {"model": name, "dims": ",".join(f"{k}={v}" for k, v in dims.items())}
    t0 = time.perf_counter()
    try:
        mb = batch_limit(name, dims, hw, args.max_batch, args.max_run_s, args.estimator)
        advice = advise(load_model(name, dims).graph_at, hw, "throughput", batch=1,
                        max_batch=mb, estimator=args.estimator)
        row.update({"max_batch": mb, "recommended": advice.recommended.label(),
                    "default": advice.default.label(),
                    "predicted_gain": advice.predicted_gain})
        alt = alternatives(advice) if args.alternative else []
        v = verify(advice, zoo.model_path(name), dims, repeats=args.repeats,
                   warmup=args.warmup, alternatives=alt)
    except (PredictionError, MeasurementError, ModelImportError, MemoryError) as exc:
        row.update({"status": f"not measured: {str(exc)[:160]}",
                    "seconds": time.perf_counter() - t0})
        return row
    dft = v.table.set_index("role")
    error = abs(v.predicted_gain - v.measured_gain) / v.measured_gain
    row.update({
        "measured_gain": v.measured_gain, "noise": v.noise,
        "session_noise": v.session_noise, "error": error,
        "as_fast": bool(v.at_least_as_fast), "within_15pct": bool(error <= TOLERANCE),
        "default_pred_ms": dft.loc["default", "predicted_ms"],
        "default_meas_ms": dft.loc["default", "measured_ms"],
        "rec_pred_ms": dft.loc["recommended", "predicted_ms"],
        "rec_meas_ms": dft.loc["recommended", "measured_ms"],
        "rec_is_default": advice.recommended == advice.default,
        "verify_notes": "; ".join(v.notes),
        "status": "ok", "seconds": time.perf_counter() - t0,
    })
    for prefix, (_, a) in zip(("alt", "inter"), v.table[v.table["role"] == "alternative"]
                              .iterrows(), strict=False):
        row.update({f"{prefix}_setting": a["setting"], f"{prefix}_pred_gain": a["predicted_gain"],
                    f"{prefix}_meas_gain": a["measured_gain"], f"{prefix}_noise": a["noise"],
                    f"{prefix}_error": abs(a["predicted_gain"] - a["measured_gain"])
                    / a["measured_gain"]})
    return row


def alternatives(advice) -> list:
    """Settings measured beside the recommendation: the best-ranked other fitting setting
    (``alt``), and the best inter-op parallel one (``inter``) when it is neither of those, so
    that the inter-op predictions are checked by measurement too."""
    t = advice.table[advice.table["fits"] & ~advice.table["is_default"]
                     & ~advice.table["recommended"]]
    out = [t["_setting"].iloc[0]] if len(t) else []
    inter = t[t["inter_op"]]
    if out and len(inter) and not (out[0].inter_op or advice.recommended.inter_op):
        out.append(inter["_setting"].iloc[0])
    return out


def top_cpu(n: int = 5) -> str:
    try:
        out = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True,
                             text=True, timeout=10).stdout.splitlines()[1:n + 1]
    except (OSError, subprocess.SubprocessError):
        return "n/a"
    return "; ".join(" ".join(line.split()) for line in out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=None, help="comma-separated zoo names (default: all)")
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--max-run-s", type=float, default=1.5,
                   help="predicted seconds of one run at the largest batch tried")
    p.add_argument("--sequence", type=int, default=32)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--estimator", default="auto")
    p.add_argument("--no-alternative", dest="alternative", action="store_false",
                   help="do not also measure the best-ranked setting other than the default "
                        "and the recommendation, and the best inter-op parallel one")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    args = p.parse_args(argv)
    hw = get_device("local")
    names = args.models.split(",") if args.models else zoo.list_models()
    load0, top0 = os.getloadavg()[0], top_cpu()
    rows = []
    for name in names:
        print(f"[advisor_verify] {name}…", file=sys.stderr, flush=True)
        rows.append(one_model(name, args, hw))
        r = rows[-1]
        print(f"[advisor_verify]   {r.get('status')}  pred {r.get('predicted_gain', math.nan):.3f}"
              f"  meas {r.get('measured_gain', math.nan):.3f}  ({r['seconds']:.0f} s)",
              file=sys.stderr, flush=True)
    table = pd.DataFrame(rows)
    ok = table[table["status"] == "ok"] if "status" in table else table.iloc[0:0]
    extra = {
        "device": f"local ({hw.name}, {hw.units} cores; calibrated "
                  f"{hw.calibration.get('date', '?')})",
        "settings": f"max batch {args.max_batch} (capped at {args.max_run_s} s predicted per "
                    f"run), sequence {args.sequence}, {args.repeats} repeats after "
                    f"{args.warmup} warm-up, estimator {args.estimator}",
        "load_average": f"{load0:.2f} before, {os.getloadavg()[0]:.2f} after",
        "top_cpu_before": top0,
        "as_fast_as_default": f"{int(ok['as_fast'].sum()) if len(ok) else 0}/{len(ok)} measured",
        "gain_within_15pct": f"{int(ok['within_15pct'].sum()) if len(ok) else 0}/{len(ok)}",
        "median_error": float(ok["error"].median()) if len(ok) else math.nan,
        "median_noise": float(ok["noise"].median()) if len(ok) else math.nan,
        "recommendation_is_default": f"{int(ok['rec_is_default'].sum()) if len(ok) else 0}/"
                                     f"{len(ok)}",
    }
    for prefix, what in (("alt", "alternative"), ("inter", "inter_op")):
        if f"{prefix}_error" in ok:
            alts = ok.dropna(subset=[f"{prefix}_error"])
            extra[f"{what}_gain_within_15pct"] = (
                f"{int((alts[f'{prefix}_error'] <= TOLERANCE).sum())}/{len(alts)}")
    emit({"advisor_verify": table}, args.format, extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
