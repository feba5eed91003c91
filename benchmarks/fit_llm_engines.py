"""Fit the per-engine serving calibration on Argonne's LLM-Inference-Bench rows and write it.

    ROOFCAST_SHARED_DATA=../shared/data .venv/bin/python benchmarks/fit_llm_engines.py [--dry-run]

Rows: single-device fp16 rows of ``All_results`` (request latency) and Fig 22's TTFT rows
(``training_data.public.llm_serving``; every exclusion is printed with its count). The fit and
the choice between its variants is ``predictor.llm.calibration_select.fit_all``; the result is
saved as a fitted correction (``predictor/data/llm_engines/``: ``llm_engines.json`` +
``metadata.json``, ``calibration.EngineCalibrations``). Never fitted to vendor, MLPerf or
Lambda figures: only the Argonne files are read. History: ``docs/design/fitted.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

import pandas as pd

from roofcast.predictor.fitted import FittedMetadata, library_versions
from roofcast.predictor.llm.calibration import DATA_DIR, EngineCalibrations
from roofcast.predictor.llm.calibration_fit import (
    IMPLAUSIBLE_RATIO,
    QUANTILES,
    reference_times,
    request_features,
    target,
)
from roofcast.predictor.llm.calibration_select import fit_all
from roofcast.predictor.runtimes import get_runtime, runtime_names
from roofcast.training_data.public.llm_serving import load_serving

FIT_FIGURES = ("all", "ttft")


def fit_rows(table) -> tuple[pd.DataFrame, dict[str, int]]:
    """The rows the calibration is fitted on, with their features, and what was left out."""
    engines = {n for n in runtime_names() if get_runtime(n).serving is not None}
    rows = table.rows
    excluded: dict[str, int] = {}

    def drop(mask, why):
        reasons = why(rows[mask])
        if isinstance(reasons, str):
            reasons = pd.Series(reasons, index=rows.index[mask])
        for key, n in rows[mask].groupby(reasons).size().items():
            excluded[str(key)] = excluded.get(str(key), 0) + int(n)
        return rows[~mask]

    rows = drop(~rows["figure"].isin(FIT_FIGURES),
                lambda r: r["figure"] + " rows: benchmarked, not fitted "
                "(duplicates or dtype study)")
    rows = drop(~rows["engine"].isin(engines),
                lambda r: "engine " + r["engine"] + " has no profile")
    rows = drop((rows["weights"] != "fp16") | (rows["kv_cache"] != "fp16"),
                lambda r: "quantised rows: benchmarked, not fitted")
    rows = rows.reset_index(drop=True)
    feats = request_features(rows)
    rows = feats
    rows = drop(rows["max_batch"] < 1, lambda r: "does not fit in one device's memory (" +
                r["model"] + " on " + r["device"] + ")")
    model = rows["prefill_s"] + rows["decode_s"]
    rows = drop(target(rows) < IMPLAUSIBLE_RATIO * model,
                lambda r: "implausible: faster than 1/4 of the kernel model (" + r["engine"]
                + " on " + r["device"] + ")")
    return rows.reset_index(drop=True), excluded


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print, do not write the JSON")
    ap.add_argument("--out", type=Path, default=DATA_DIR, help="folder to save the correction in")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    table = load_serving()
    print(table.summary())
    rows, excluded = fit_rows(table)
    print(f"fit rows {len(rows)}; left out of the fit:")
    for why, n in sorted(excluded.items(), key=lambda kv: -kv[1]):
        print(f"  {n:5d}  {why}")
    engines = fit_all(rows)
    for e, d in engines.items():
        loo_txt = (f"LOO median {d['loo']['median_abs_pct']:.1f} % (plain "
                   f"{d['loo']['plain_median_abs_pct']:.1f}, vendor "
                   f"{d['loo']['vendor_median_abs_pct']:.1f})" if "loo" in d else "no LOO")
        seq = d["per_sequence_term"]
        print(f"{e:14s} per-sequence term {'kept' if seq['kept'] else 'not kept'} (held-out "
              f"score {seq['score_with']:.2f} with, {seq['score_without']:.2f} without"
              f"{'' if seq['identifiable'] else ', one sequence per step in every row'}); "
              f"s_decode {d['decode']['seq_overhead_s'] * 1e6:.1f} us/seq")
        print(f"{e:14s} {d['variant']:28s} in-dist median "
              f"{d['in_distribution']['median_abs_pct']:.1f} % (vendor level "
              f"{d['in_distribution_vendor_level']['median_abs_pct']:.1f})  {loo_txt}")
    doc = {
        "about": "Per-engine corrections of roofcast's uncalibrated LLM step times "
                 "(predictor/llm/calibration.py); written by benchmarks/fit_llm_engines.py",
        "source": "argonne-lcf/LLM-Inference-Bench Plots/*.csv (BSD-3-Clause), "
                  "$ROOFCAST_SHARED_DATA/llm/argonne",
        "data_hash": table.data_hash,
        "model_times": "roofcast.predictor.llm.phases.request_model_times (roofline+eff)",
        "quantiles": list(QUANTILES),
        "reference_times": reference_times(),
        "excluded_from_fit": excluded,
        "engines": engines,
    }
    print(f"fitted in {time.perf_counter() - t0:.0f} s")
    if not args.dry_run:
        meta = FittedMetadata(EngineCalibrations.kind, (), (doc["source"],), library_versions(),
                              dt.date.today().isoformat(), table.data_hash,
                              {e: d.get("loo", d["in_distribution"]) for e, d in engines.items()})
        print(f"wrote {EngineCalibrations(doc, meta).save(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
