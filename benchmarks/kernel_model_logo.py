"""Leave-one-GPU-out accuracy of the kernel-time model inside the aiconfigurator tables.

Run: ``.venv/bin/python benchmarks/kernel_model_logo.py [--quick] [--format table|csv|json]
[--save-rows FILE]``

For each catalog GPU of ``../shared/data/aiconfigurator`` (A100-SXM, H100-SXM, H200, B200,
GB200, L40S): fits the learned per-family model (gpu/matmul, gpu/attention, gpu/moe; XGBoost,
the features and target of ``predictor.learned.training``) on the public NeuSight/DeepBench GPU
kernels and the aiconfigurator rows of the *other* GPUs (every row of the held-out GPU left
out), predicts the held-out GPU's GEMM, attention and MoE-module rows, and prints per
(table, dtype, held-out GPU): rows, median and p90 APE and median predicted/measured for the
learned model and the analytical roads ``time-roofline`` and ``roofline+eff`` on the same rows;
``summary``: the same pooled over GPUs per (table, dtype) (the issue's target: median <= 10 %).
``--cap``: aiconfigurator rows per (device, table, dtypes, runtime), default 300 (``--quick``:
100, with 300 public rows per (family, device) and 60 trees). ``--save-rows``: write the
held-out feature rows (parquet) for comparing another model on them. ``--attention-shapes``
(experiment): the attention model also gets the rows' shapes (``ATTENTION_SHAPES``: batch,
queries, keys, heads, GQA ratio, head_dim, window, KV bits), which the tables and the LLM
road's attention rows carry but graph rows do not yet (docs/design/road.md): what they buy.
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
from roofcast.predictor.estimators.roofline import RooflineEff, TimeRoofline
from roofcast.predictor.learned.data import (
    DEFAULT_CAP,
    TrainingSet,
    aiconfigurator_set,
    combine,
    public_set,
)
from roofcast.predictor.learned.features import FEATURES, learned_features, roofline_terms
from roofcast.predictor.learned.model import ROW_FLOOR, FamilyModel
from roofcast.predictor.learned.roads import primary_runtimes, runtime_column
from roofcast.predictor.learned.training import QUICK_XGB, borrowing_rows, time_weights

FAMILIES = ("matmul", "attention", "moe")
ATTENTION_SHAPES = ("lg_attn_batch", "lg_attn_queries", "lg_attn_keys", "lg_attn_heads",
                    "lg_attn_gqa", "lg_attn_head_dim", "lg_attn_window", "attn_kv_bits")


def attention_shapes(X: pd.DataFrame) -> pd.DataFrame:
    """``ATTENTION_SHAPES`` of the aiconfigurator rows (NaN for rows without a shape)."""
    from roofcast.dtypes import DTYPES
    from roofcast.predictor.learned.features import lg

    def col(c: str) -> np.ndarray:
        return pd.to_numeric(X.get(c, pd.Series(np.nan, index=X.index)),
                             errors="coerce").to_numpy(float)

    heads, kv = col("num_heads"), col("num_key_value_heads")
    kv_dtype = X.get("kv_dtype", pd.Series("", index=X.index)).astype(str)
    return pd.DataFrame({
        "lg_attn_batch": lg(col("batch_size")), "lg_attn_queries": lg(col("isl")),
        "lg_attn_keys": lg(col("isl") + col("step")), "lg_attn_heads": lg(heads),
        "lg_attn_gqa": lg(heads / kv), "lg_attn_head_dim": lg(col("head_dim")),
        "lg_attn_window": lg(col("window_size") + 1.0),
        "attn_kv_bits": kv_dtype.map(lambda d: DTYPES[d].bits if d in DTYPES else np.nan)
        .to_numpy(float)}, index=X.index)


def prepared(ts: TrainingSet) -> tuple[pd.DataFrame, np.ndarray]:
    """(learned features with the row floors of ``training``, physical bound) of a set."""
    X = ts.X
    F = learned_features(X)
    kinds = X["device_kind"].astype(str).to_numpy()
    rt = runtime_column(X, "runtime")
    _, F[ROW_FLOOR] = borrowing_rows(X, kinds, rt, primary_runtimes(kinds, rt))
    return F, roofline_terms(X)[2]


def held_out_predictions(ts: TrainingSet, aic: np.ndarray, quick: bool,
                         shapes: bool = False) -> pd.DataFrame:
    """Per aiconfigurator row: learned (fitted without its GPU) and analytical seconds;
    ``shapes``: the attention model also takes ``ATTENTION_SHAPES``."""
    F, bound = prepared(ts)
    if shapes:
        F = pd.concat([F, attention_shapes(ts.X)], axis=1)
    X, meas = ts.X, ts.y_s
    fam, dev = X["family"].astype(str).to_numpy(), X["device"].astype(str).to_numpy()
    ok = (bound > 0) & (meas > 0)
    out = pd.DataFrame({"table": X["table"], "dtype": X["dtype"], "device": dev,
                        "measured_s": meas, "learned_s": np.nan})[aic].copy()
    for d in sorted(set(dev[aic])):
        for f in FAMILIES:
            train = ok & (fam == f) & (dev != d)
            test = aic & (fam == f) & (dev == d)
            if not test.any():
                continue
            extra = ATTENTION_SHAPES if shapes and f == "attention" else ()
            fm = FamilyModel.fit(f"gpu/{f}", "xgboost", F[train], meas[train], bound[train],
                                 X["_group"].to_numpy()[train], QUICK_XGB if quick else None,
                                 time_weights(meas[train], 0.5), (*FEATURES, *extra))
            out.loc[np.flatnonzero(test), "learned_s"] = fm.predict_time(F[test], bound[test])
        print(f"held out {d}", file=sys.stderr, flush=True)
    Xa = X[aic]
    out["time-roofline_s"] = TimeRoofline().predict(Xa)
    out["roofline+eff_s"] = RooflineEff().predict(Xa)
    return out


def _stats(g: pd.DataFrame) -> dict:
    row = {"rows": len(g)}
    for road in ("learned", "time-roofline", "roofline+eff"):
        r = g[f"{road}_s"].to_numpy() / g["measured_s"].to_numpy()
        e = np.abs(r - 1.0)
        row.update({f"{road}_median_ape_pct": 100 * np.median(e),
                    f"{road}_p90_ape_pct": 100 * np.quantile(e, 0.9),
                    f"{road}_median_pred_over_meas": np.median(r)})
    return row


def tables(pred: pd.DataFrame) -> dict[str, pd.DataFrame]:
    per = [{"table": t, "dtype": dt, "held_out": d, **_stats(g)}
           for (t, dt, d), g in pred.groupby(["table", "dtype", "device"])]
    summ = [{"table": t, "dtype": dt, "gpus": g["device"].nunique(), **_stats(g)}
            for (t, dt), g in pred.groupby(["table", "dtype"])]
    return {"summary": pd.DataFrame(summ), "per_gpu": pd.DataFrame(per)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sample, small ensembles")
    parser.add_argument("--cap", type=int, default=300, help="aiconfigurator rows per group")
    parser.add_argument("--save-rows", default=None, help="write the held-out rows (parquet)")
    parser.add_argument("--attention-shapes", action="store_true",
                        help="experiment: attention shape features (module docstring)")
    add_format_arg(parser)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    aic = aiconfigurator_set(cap=100 if args.quick else args.cap)
    pub = public_set(cap=DEFAULT_CAP // 5 if args.quick else DEFAULT_CAP)
    ts = combine([pub, aic])
    is_aic = np.arange(len(ts)) >= len(pub)
    pred = held_out_predictions(ts, is_aic, args.quick, args.attention_shapes)
    if args.save_rows:
        ts.X[is_aic].assign(measured_s=ts.y_s[is_aic]).to_parquet(args.save_rows)
    out = {k: v.round(2) for k, v in tables(pred).items()}
    emit(out, args.format, extra={"rows": int(is_aic.sum()), "public_rows": len(pub),
                                  "cap": 100 if args.quick else args.cap,
                                  "quick": args.quick,
                                  "elapsed_s": round(time.perf_counter() - t0, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
