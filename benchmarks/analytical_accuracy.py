"""Accuracy of the analytical estimators on public GPU kernel timings.

Run: ``/work/venv/bin/python benchmarks/analytical_accuracy.py [--sample N] [--split all|train|test]
[--format table|csv|json]``.

For every modelled kernel row of ``../shared/data/gpu_kernels`` (see
``training_data.public_kernels``) the workload row is featurized for its catalog device and each
analytical estimator predicts its time. Reported:

* per estimator and op family (and per device): median and 90th-percentile absolute percentage
  error ``|pred - meas| / meas``, and the median ratio ``pred / meas`` (bias: < 1 = optimistic);
* speedup ratios: for every pair of devices that measured the same shape (same dataset, op,
  shape, precision, direction), the predicted ratio ``t_a / t_b`` against the measured one, with
  the same error statistics.

Two harness models (``--harness``):

* ``graph`` (default): the estimators as graph prediction uses them — the catalog's launch
  overhead as a floor ``max(T, L)``, only activations L2-resident.
* ``isolated``: how these kernels were timed — one op at a time between two CUDA events in a
  repeat loop. The host dispatch latency precedes each kernel (``T + L``) and the loop keeps the
  operands warm in L2 (``warm_l2="all"``). For NeuSight rows (PyTorch eager) ``L`` is the
  per-device dispatch floor measured on the NeuSight *train* split (1st percentile of the
  elementwise-op latencies, ``host_floor_s``); DeepBench rows (vendor libraries, no framework)
  keep the catalog overhead. Use ``--split test`` for figures untouched by that choice.

Measured times are PyTorch/cuDNN/vendor-library kernel times; the catalog's launch overhead is a
device-side floor, not PyTorch's eager dispatch cost (NeuSight's floors are ~25-32 us).
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
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.estimator_registry import ESTIMATORS, make_estimator
from roofcast.predictor.features import featurize
from roofcast.training_data.public_kernels import kernel_workload, load_kernels

SHAPE_KEY = ("dataset", "workload", "direction", "precision", "storage_bytes", "B", "M", "N", "K",
             "trans_a", "trans_b", "conv_n", "conv_c", "conv_h", "conv_w", "conv_k", "conv_r",
             "conv_s", "stride_h", "stride_w", "pad_h", "pad_w", "vec_b", "vec_h")
MIN_PAIR_ROWS = 50


def featurize_all(kernels: pd.DataFrame, workload: pd.DataFrame) -> pd.DataFrame:
    """Featurize each device's rows on its catalog spec and stack them (index kept)."""
    parts = []
    config = RunConfig()
    for dev, idx in kernels.groupby("device").groups.items():
        parts.append(featurize(workload.loc[idx], get_device(str(dev)), config))
    return pd.concat(parts).loc[kernels.index]


HOST_FLOOR_QUANTILE = 0.01
HARNESS_PARAMS = {"graph": {}, "isolated": {"overhead": "additive", "warm_l2": "all"}}


def host_floor_s(kernels: pd.DataFrame) -> pd.Series:
    """Per-device PyTorch dispatch floor.

    The 1st percentile of NeuSight *train* elementwise latencies.
    """
    train = kernels[kernels["split"].eq("train") & kernels["family"].eq("elementwise")]
    return train.groupby("device")["latency_s"].quantile(HOST_FLOOR_QUANTILE)


def apply_harness(X: pd.DataFrame, kernels: pd.DataFrame, floors: pd.Series) -> pd.DataFrame:
    """Isolated harness: NeuSight rows get their device's host floor as launch overhead."""
    X = X.copy()
    neusight = kernels["dataset"].str.startswith("neusight").to_numpy()
    floor = kernels["device"].map(floors).to_numpy(float)
    use = neusight & ~np.isnan(floor)
    X.loc[use, "launch_overhead_s"] = floor[use]
    return X


def _params(name: str, harness: str) -> dict:
    accepted = make_estimator(name).get_params()
    return {k: v for k, v in HARNESS_PARAMS[harness].items() if k in accepted}


def _stats(err: pd.Series, ratio: pd.Series) -> dict[str, float]:
    return {"n": int(err.size), "median_ape_pct": 100 * float(np.median(err)),
            "p90_ape_pct": 100 * float(np.quantile(err, 0.9)),
            "median_pred_over_meas": float(np.median(ratio))}


def error_tables(kernels: pd.DataFrame, preds: dict[str, np.ndarray]) -> dict[str, pd.DataFrame]:
    meas = kernels["latency_s"].to_numpy(float)
    by_fam, by_dev = [], []
    for name, pred in preds.items():
        df = pd.DataFrame({"family": kernels["family"], "device": kernels["device"],
                           "err": np.abs(pred - meas) / meas, "ratio": pred / meas})
        by_fam.append({"estimator": name, "family": "ALL", **_stats(df.err, df.ratio)})
        for fam, g in df.groupby("family"):
            by_fam.append({"estimator": name, "family": fam, **_stats(g.err, g.ratio)})
        for (fam, dev), g in df.groupby(["family", "device"]):
            by_dev.append(
                {"estimator": name, "family": fam, "device": dev, **_stats(g.err, g.ratio)}
            )
    return {"error_by_family": pd.DataFrame(by_fam), "error_by_family_device": pd.DataFrame(by_dev)}


def speedup_tables(kernels: pd.DataFrame, preds: dict[str, np.ndarray]) -> dict[str, pd.DataFrame]:
    base = kernels[list(SHAPE_KEY)].copy()
    key = base.groupby(list(SHAPE_KEY), dropna=False, sort=False).ngroup()
    cols = {"key": key, "device": kernels["device"], "family": kernels["family"],
            "meas": kernels["latency_s"]}
    cols.update({f"p:{n}": p for n, p in preds.items()})
    per = pd.DataFrame(cols).groupby(["key", "device", "family"], as_index=False).median()
    pairs = per.merge(per, on=["key", "family"], suffixes=("_a", "_b"))
    pairs = pairs[pairs["device_a"] < pairs["device_b"]]
    meas_ratio = pairs["meas_a"] / pairs["meas_b"]
    pooled, per_pair = [], []
    for name in preds:
        pr = pairs[f"p:{name}_a"] / pairs[f"p:{name}_b"]
        df = pd.DataFrame(
            {
                "family": pairs["family"],
                "a": pairs["device_a"],
                "b": pairs["device_b"],
                "err": (pr - meas_ratio).abs() / meas_ratio,
                "ratio": pr / meas_ratio,
            }
        )
        pooled.append({"estimator": name, "family": "ALL", **_stats(df.err, df.ratio)})
        for fam, g in df.groupby("family"):
            pooled.append({"estimator": name, "family": fam, **_stats(g.err, g.ratio)})
        for (fam, a, b), g in df.groupby(["family", "a", "b"]):
            if len(g) >= MIN_PAIR_ROWS:
                per_pair.append({"estimator": name, "family": fam, "pair": f"{a}/{b}",
                                 **_stats(g.err, g.ratio)})
    return {"speedup_error_by_family": pd.DataFrame(pooled),
            "speedup_error_by_pair": pd.DataFrame(per_pair)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=None, help="random sample of N kernel rows")
    parser.add_argument("--split", choices=("all", "train", "test"), default="all",
                        help="NeuSight split (DeepBench rows have none and count as 'test')")
    parser.add_argument("--estimators", default=",".join(ESTIMATORS),
                        help=f"comma-separated subset of {', '.join(ESTIMATORS)}")
    parser.add_argument("--data-dir", default=None, help="folder holding gpu_kernels/")
    parser.add_argument("--summary-only", action="store_true", help="skip per-device/pair tables")
    parser.add_argument("--harness", choices=tuple(HARNESS_PARAMS), default="graph",
                        help="how kernels are assumed to be timed (see module docstring)")
    add_format_arg(parser)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    table = load_kernels(args.data_dir)
    kernels = table.kernels
    floors = host_floor_s(kernels)
    if args.split == "train":
        kernels = kernels[kernels["split"].eq("train")]
    elif args.split == "test":
        kernels = kernels[~kernels["split"].eq("train")]
    if args.sample and args.sample < len(kernels):
        kernels = kernels.sample(args.sample, random_state=0)
    workload = kernel_workload(kernels)
    X = featurize_all(kernels, workload)
    if args.harness == "isolated":
        X = apply_harness(X, kernels, floors)
    preds = {}
    for name in args.estimators.split(","):
        preds[name] = make_estimator(name, **_params(name, args.harness)).fit(X).predict(X)
    tables = {**error_tables(kernels, preds), **speedup_tables(kernels, preds)}
    if args.summary_only:
        tables = {k: v for k, v in tables.items() if k.endswith("by_family")}
    extra = {
        "rows": len(kernels),
        "split": args.split,
        "harness": args.harness,
        "host_floor_us": {d: round(v * 1e6, 1) for d, v in floors.items()}
        if args.harness == "isolated"
        else "catalog launch overhead",
        "devices": kernels["device"].nunique(),
        "skipped": table.skipped,
        "unmapped_hardware": table.unmapped,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    emit(tables, args.format, extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
