"""Which kernel-time road is most accurate: one table, road x benchmark, median |error| in %.

Run: ``ROOFCAST_SHARED_DATA=../shared/data python benchmarks/road_choice.py [--quick]
[--roads time-roofline,roofline+eff,traffic,auto,learned] [--only gpu_fp32,h200,vidur]``.
Columns (each the median |predicted / measured - 1| over its rows; nothing here is fitted):
* ``gpu_fp32``: NeuSight's whole-model PyTorch-eager latencies (GPT-3 XL / 2.7B, Switch-XL, fp32;
  ``runtime_validation.whole_model``); ``--quick``: batch <= 2.
* ``h200_fp32`` / ``h200_tc``: this project's H200 eager whole models at fp32 and at tensor-core
  precisions (tf32 / bf16 / fp16) (``h200_measured``).
* ``vidur_fp16``: Vidur's per-op LLM layer timings on A100 / H100 / A40 against the serving
  road's kernels (``llm_accuracy.vidur_rows``).
The graph road's default is the best road over the graph columns, the serving road's the best on
``vidur_fp16`` (``roofcast/defaults.py``; why: docs/design/road.md).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROADS = ("time-roofline", "roofline+eff", "traffic", "auto", "learned")
PARTS = ("gpu_fp32", "h200", "vidur")


def gpu_fp32(roads: list[str], quick: bool) -> dict[str, pd.Series]:
    import runtime_validation as rv

    from roofcast.training_data.public_kernels import shared_data_dir

    latency, _ = rv._load(shared_data_dir(None))
    if quick:
        latency = latency[latency["batch"] <= 2]
    _, summary, _ = rv.whole_model(latency, roads, "pytorch-eager", lambda m: None)
    return {"gpu_fp32": summary.set_index("estimator")["median_ape_pct"]}


def h200(roads: list[str], quick: bool) -> dict[str, pd.Series]:
    import h200_measured as hm

    df = hm.measured()
    if quick:
        df = df[df["batch"] <= 8]
    df = hm.predict(df, roads)
    out = {}
    for name, precisions in (("h200_fp32", ("fp32",)), ("h200_tc", ("tf32", "bf16", "fp16"))):
        part = df[df["precision"].isin(precisions)]
        out[name] = pd.Series({r: 100 * (part[f"{r}_ms"] / part["eager_ms"] - 1).abs().median()
                               for r in roads})
    return out


def vidur(roads: list[str], quick: bool) -> dict[str, pd.Series]:
    import llm_accuracy as la

    return {"vidur_fp16": pd.Series({r: float(la.vidur_rows(quick, r)["err"].median())
                                     for r in roads})}


def road_table(roads: list[str], parts: list[str], quick: bool) -> pd.DataFrame:
    """Road x benchmark median |error| (%); rows the roads, columns the benchmarks."""
    runners = {"gpu_fp32": gpu_fp32, "h200": h200, "vidur": vidur}
    columns: dict[str, pd.Series] = {}
    for part in parts:
        columns.update(runners[part](roads, quick))
    return pd.DataFrame(columns).reindex(roads)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roads", default=",".join(ROADS))
    ap.add_argument("--only", default=",".join(PARTS), help=f"of {', '.join(PARTS)}")
    ap.add_argument("--quick", action="store_true", help="fewer rows per benchmark")
    args = ap.parse_args(argv)
    parts = [p for p in args.only.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}")
    warnings.simplefilter("ignore")
    table = road_table([r for r in args.roads.split(",") if r], parts, args.quick)
    with pd.option_context("display.width", 200, "display.float_format", "{:.1f}".format):
        print("median |error| %, road x benchmark")
        print(table.to_string())
        print("\nbest road per benchmark: " + ", ".join(
            f"{c} {table[c].idxmin()}" for c in table.columns if table[c].notna().any()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
