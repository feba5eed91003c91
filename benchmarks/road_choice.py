"""Which kernel-time road is most accurate: one table, road x benchmark, median |error| in %.

Run: ``ROOFCAST_SHARED_DATA=../shared/data python benchmarks/road_choice.py [--quick]
[--roads time-roofline,roofline+eff,traffic,auto,learned] [--only gpu_fp32,h200,vidur,cpu,
invariants] [--cpu-measured FILE]``.
Columns (each the median |predicted / measured - 1| over its rows; nothing here is fitted):
* ``gpu_fp32``: NeuSight's whole-model PyTorch-eager latencies (GPT-3 XL / 2.7B, Switch-XL, fp32;
  ``runtime_validation.whole_model``); ``--quick``: batch <= 2.
* ``h200_fp32`` / ``h200_tc``: this project's H200 eager whole models at fp32 (TF32 off, as the
  collector ran them: runtime ``pytorch-eager-fp32-strict``) and at tensor-core precisions
  (tf32 / bf16 / fp16) (``h200_measured``).
* ``vidur_fp16``: Vidur's per-op LLM layer timings on A100 / H100 / A40 against the serving
  road's kernels (``llm_accuracy.vidur_rows``).
* ``cpu`` / ``cpu_worst``: this CPU's held-out ONNX exports (``cpu_runtime_check``, plan ``ort``,
  device ``local``: run ``roofcast hw calibrate`` first) at one thread against the process CPU
  time per run measured here (``cpu_ms``: the run without the waits for a core that other
  processes cause on a shared machine); ``--cpu-measured``: reused when it exists, else written.
* ``invariants``: the number of (zoo model, device, mode) points where a what-if copy with 2x
  bandwidth or 2x every peak predicts slower than its base (``--quick``: four models); 0 passes.
The graph road's default passes the invariants and has the lowest mean of the column medians
(``mean``); the serving road's is the best on ``vidur_fp16`` once the engine calibrations are
refitted on it (``roofcast/defaults.py``; why: docs/design/road.md).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROADS = ("time-roofline", "roofline+eff", "traffic", "auto", "learned")
PARTS = ("gpu_fp32", "h200", "vidur", "cpu", "invariants")
#: devices of the invariants column: a GPU per vendor generation, an accelerator, a CPU.
FEW = ("t4", "a100-40gb-sxm", "h100-sxm", "mi300x", "gaudi2", "xeon-8480plus")
QUICK_MODELS = ("resnet50", "bert_base", "efficientnet_b0", "gpt2")


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


def cpu(roads: list[str], quick: bool, measured_csv: Path | None = None
        ) -> dict[str, pd.Series]:
    import cpu_runtime_check as crc

    from roofcast.graph_import import import_model
    from roofcast.predictor.errors import PredictionError

    if measured_csv is not None and measured_csv.exists():
        measured = pd.read_csv(measured_csv)
    else:
        measured = crc.measure(list(crc.MODELS), [1], 3, 10)
        if measured_csv is not None:
            measured.to_csv(measured_csv, index=False)
    err: dict[str, list[float]] = {r: [] for r in roads}
    for name in crc.MODELS:
        graph = import_model(crc.DATA_DIR / f"{name}.onnx", dims=crc.MODELS[name], name=name)
        for rec in measured[(measured["model"] == name) & (measured["threads"] == 1)].itertuples():
            for r in roads:
                try:
                    ms = crc.predicted_ms(graph, 1, "ort", r)
                except PredictionError as exc:  # reported, not hidden: the road has no figure
                    print(f"cpu: {r} on {name}: {exc}", file=sys.stderr)
                    ms = np.nan
                err[r].append(100 * abs(ms / rec.cpu_ms - 1))
    return {"cpu": pd.Series({r: float(np.median(e)) for r, e in err.items()}),
            "cpu_worst": pd.Series({r: float(np.max(e)) for r, e in err.items()})}


def slower_what_ifs(road: str, models: list[str]) -> int:
    """Points (model, device, mode, batch) where a 2x-bandwidth or 2x-peak what-if copy of a
    device predicts slower than the device itself under ``road``."""
    from roofcast.app.model_ref import load_graph
    from roofcast.hw_catalog.catalog import get_device
    from roofcast.hw_catalog.derive import derive
    from roofcast.predictor.sweep import sweep
    from roofcast.training_data import zoo

    base = [get_device(d) for d in FEW]
    twins = [(d, derive(d, id=f"{d.id}+{k}2", **{f"{k}_scale": 2.0}))
             for d in base for k in ("mem_bw", "peak")]
    keys = ["batch", "precision", "mode"]
    bad = 0
    for name in models:
        dims = ["sequence=64"] if "sequence" in zoo.model_meta(name)["symbolic_dims"] else []
        df = sweep(lambda b, n=name, d=dims: load_graph(n, d, b), [*base, *(t for _, t in twins)],
                   [1, 2], estimator=road, modes=["infer", "train"])
        t = {dev: g.set_index(keys)["time_s"] for dev, g in df.groupby("device")}
        bad += sum(int((t[w.id] > t[d.id] * (1 + 1e-9)).sum()) for d, w in twins)
    return bad


def invariants(roads: list[str], quick: bool) -> dict[str, pd.Series]:
    from roofcast.training_data import zoo

    models = list(QUICK_MODELS) if quick else zoo.list_models()
    return {"invariants": pd.Series({r: float(slower_what_ifs(r, models)) for r in roads})}


def road_table(roads: list[str], parts: list[str], quick: bool,
               cpu_measured: Path | None = None) -> pd.DataFrame:
    """Road x benchmark median |error| (%) and the invariants count; rows the roads."""
    runners = {"gpu_fp32": gpu_fp32, "h200": h200, "vidur": vidur, "invariants": invariants,
               "cpu": lambda r, q: cpu(r, q, cpu_measured)}
    columns: dict[str, pd.Series] = {}
    for part in parts:
        columns.update(runners[part](roads, quick))
    return pd.DataFrame(columns).reindex(roads)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roads", default=",".join(ROADS))
    ap.add_argument("--only", default=",".join(PARTS), help=f"of {', '.join(PARTS)}")
    ap.add_argument("--quick", action="store_true", help="fewer rows per benchmark")
    ap.add_argument("--cpu-measured", type=Path, help="CSV of the cpu column's measurement: "
                    "reused when it exists, else written")
    args = ap.parse_args(argv)
    parts = [p for p in args.only.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}")
    warnings.simplefilter("ignore")
    table = road_table([r for r in args.roads.split(",") if r], parts, args.quick,
                       args.cpu_measured)
    medians = [c for c in table.columns if c not in ("invariants", "cpu_worst")]
    if medians:
        table["mean"] = table[medians].mean(axis=1)
    if "invariants" in table.columns:
        table["invariants"] = table["invariants"].map(
            lambda n: "pass" if n == 0 else f"FAIL ({n:.0f} slower)")
    with pd.option_context("display.width", 200, "display.float_format", "{:.1f}".format):
        print("median |error| % (cpu_worst: worst), road x benchmark; invariants: what-if "
              "devices with 2x bandwidth / 2x peak never slower")
        print(table.to_string())
        print("\nbest road per benchmark: " + ", ".join(
            f"{c} {table[c].idxmin()}" for c in table.columns
            if c != "invariants" and table[c].notna().any()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
