"""Validation of the learned predictors: grouped cross-validation, learned vs analytical.

Run: ``/work/venv/bin/python benchmarks/learned_accuracy.py [--quick] [--format table|csv|json]``

Trains the learned predictors on the bundled CPU measurements and the public GPU kernels
exactly as ``roofcast train`` does (``predictor.learned.training``) and prints:

* ``acceptance``: the issue's targets beside the measured figures — CPU leave-one-model-out
  end-to-end median APE and per-op time-weighted median APE; GPU leave-one-device-out median
  APE per op family over the five NeuSight GPUs; 90% interval coverage (per op, end to end);
* ``per_family``: per (device kind, family) median / p90 / time-weighted median APE of the
  out-of-fold predictions, learned and analytical (``time-roofline``), chosen candidate and the
  CV error of every candidate, nested held-out interval coverage;
* ``gpu_per_device``: per family and held-out NeuSight GPU;
* ``end_to_end``: whole-model CPU runs, leave-one-model-out;
* ``per_runtime``: per family and measured runtime (eager NeuSight rows vs the CUDA-graph
  aiconfigurator rows of ``--from ...,aiconfigurator``);
* context: how much two sessions of the same model and config disagree end to end in the
  bundled data (its measurement noise floor).

``--quick``: 300 public rows per (family, device) and small ensembles (a smoke run); the full
run (1500 rows per family and device) takes several minutes on 2 cores. Nothing is saved
unless ``--output DIR``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from roofcast.app.output import add_format_arg, emit
from roofcast.predictor.learned.data import DEFAULT_CAP, load_sources
from roofcast.predictor.learned.stats import weighted_median
from roofcast.predictor.learned.training import TrainResult, ape, train, validation_tables

NEUSIGHT_GPUS = ("p4", "p100-pcie-16gb", "t4", "v100-pcie-32gb", "a100-40gb-pcie")


def gpu_per_device(res: TrainResult) -> pd.DataFrame:
    """Per family and NeuSight GPU (held out): learned vs analytical median APE."""
    X, meas = res.ts.X, res.ts.y_s
    rows = []
    for key, kr in sorted(res.keys.items()):
        if not key.startswith("gpu/"):
            continue
        dev = X["device"].to_numpy()[kr.rows]
        for d in NEUSIGHT_GPUS:
            sel = dev == d
            if sel.any():
                m = meas[kr.rows][sel]
                rows.append({"family": key, "held_out_device": d, "rows": int(sel.sum()),
                             "learned_median_ape_pct": 100 * np.median(ape(kr.oof_s[sel], m)),
                             "analytical_median_ape_pct":
                                 100 * np.median(ape(res.baseline_s[kr.rows][sel], m)),
                             "coverage_pct": 100 * kr.covered[sel].mean()})
    return pd.DataFrame(rows)


def repeat_noise_pct() -> tuple[float, int] | None:
    """Median |e2e(repeat) - e2e(first)| / e2e(first) of the bundled CPU data's repeated runs."""
    from roofcast.predictor.learned.data import BUNDLED_DIR

    path = BUNDLED_DIR / "cpu_summary.csv"
    if not path.is_file():
        return None
    s = pd.read_csv(path)
    if "repeat_of" not in s.columns:
        return None
    rep = s[s["kind"].eq("zoo-repeat") & s["repeat_of"].notna()]
    first = s.set_index("run_id")["e2e_ms"]
    rep = rep[rep["repeat_of"].isin(first.index)]
    if rep.empty:
        return None
    base = first.loc[rep["repeat_of"]].to_numpy()
    return 100 * float(np.median(np.abs(rep["e2e_ms"].to_numpy() - base) / base)), len(rep)


def acceptance(res: TrainResult, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    X, meas = res.ts.X, res.ts.y_s
    kind = X["device_kind"].to_numpy()
    rows = []

    def add(metric, target, learned, analytical, note=""):
        rows.append({"metric": metric, "target": target, "learned": learned,
                     "analytical": analytical, "note": note})

    e2e = res.e2e[res.e2e["kind"] == "cpu"] if len(res.e2e) else res.e2e
    if len(e2e):
        m = e2e["measured_s"].to_numpy()
        add("CPU e2e median APE %, leave-one-model-out", "<= 10",
            100 * np.median(ape(e2e["learned_s"], m)), 100 * np.median(ape(e2e["analytical_s"], m)),
            f"{len(e2e)} runs of {e2e['group'].nunique()} models")
        add("CPU e2e 90% interval coverage %", "85-95", 100 * e2e["covered"].mean(), np.nan)
    noise = repeat_noise_pct()
    if noise is not None:
        add("CPU e2e repeat disagreement % (same model/config, fresh session)", "context",
            noise[0], np.nan, f"median over {noise[1]} repeated runs: the measurement noise floor")
    cpu_rows = np.concatenate([kr.rows for k, kr in res.keys.items() if k.startswith("cpu/")]
                              or [np.array([], int)])
    if len(cpu_rows):
        zoo = X["_group"].to_numpy()[cpu_rows] != "model:micro"
        r = cpu_rows[zoo]
        add("CPU per-op time-weighted median APE %, leave-one-model-out", "<= 20",
            100 * weighted_median(ape(res.oof_s[r], meas[r]), meas[r]),
            100 * weighted_median(ape(res.baseline_s[r], meas[r]), meas[r]),
            f"{len(r)} zoo-model op rows (microbenchmarks excluded)")
    for key, kr in sorted(res.keys.items()):
        if not key.startswith("gpu/"):
            continue
        sel = np.isin(X["device"].to_numpy()[kr.rows], NEUSIGHT_GPUS)
        if sel.any():
            m = meas[kr.rows][sel]
            add(f"GPU {key[4:]} median APE %, leave-one-device-out", "<= 15",
                100 * np.median(ape(kr.oof_s[sel], m)),
                100 * np.median(ape(res.baseline_s[kr.rows][sel], m)),
                f"{int(sel.sum())} rows on the 5 NeuSight GPUs")
    for k in sorted(set(kind)):
        covs = [kr.covered for key, kr in res.keys.items() if key.startswith(f"{k}/")]
        if covs:
            add(f"{k.upper()} per-op 90% interval coverage % (held-out groups)", "85-95",
                100 * np.concatenate(covs).mean(), np.nan)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sample, small ensembles")
    parser.add_argument("--from", dest="sources", default="bundled,public",
                        help="comma-separated: bundled, public, aiconfigurator, store or a "
                        "measurement file")
    parser.add_argument("--cap", type=int, default=None, help="public rows per (family, device)")
    parser.add_argument("--output", default=None, help="also save the trained model here")
    add_format_arg(parser)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if args.format == "table" else None
    cap = args.cap or (DEFAULT_CAP // 5 if args.quick else DEFAULT_CAP)
    ts = load_sources([s for s in args.sources.split(",") if s], cap=cap, say=say)
    res = train(ts, quick=args.quick, progress=say)
    tables = validation_tables(res)
    per_group = tables.pop("per_group")
    out = {"acceptance": acceptance(res, tables), **tables,
           "gpu_per_device": gpu_per_device(res)}
    del per_group
    if args.output:
        from roofcast.predictor.learned.persistence import save

        save(res.model, args.output)
    extra = {"sources": args.sources, "rows": len(ts), "cap_per_family_device": cap,
             "quick": args.quick, "data_hash": ts.data_hash[:16],
             "elapsed_s": round(time.perf_counter() - t0, 1)}
    for i, n in enumerate(res.notes):
        extra[f"note {i + 1}"] = n
    emit({k: v.round(2) if len(v) else v for k, v in out.items()}, args.format, extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
