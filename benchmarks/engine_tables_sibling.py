"""A device without engine tables read through a sibling's: held-out GPUs, three roads.

    ROOFCAST_SHARED_DATA=../shared/data python benchmarks/engine_tables_sibling.py

For each table GPU that has a sibling (``predictor.engine_tables.anchor``: same vendor, kind and
architecture; H100 <-> H200, B200 <-> GB200), its aiconfigurator GEMM and attention rows (the
``kernel_model_logo`` sample, cap 300) are predicted three ways, the learned model fitted
without that GPU's rows (as in ``kernel_model_logo.py``): ``learned`` (the model alone),
``sibling`` (the sibling's table time at the same shape, unscaled) and ``anchored`` (the
sibling's table x the model's ratio held-out / sibling, what the ``engine-tables`` road does
for a device without tables). Printed: median |predicted / measured - 1| (%) per table, dtype
and held-out GPU, then pooled. Only near-identical siblings are in the tables, so this says
how well the anchor transfers between such pairs, not to a refresh (B300 from B200).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_model_logo import prepared

from roofcast.predictor.config import RunConfig
from roofcast.predictor.engine_tables.anchor import anchor_of
from roofcast.predictor.engine_tables.estimator import runtime_versions
from roofcast.predictor.engine_tables.store import load
from roofcast.predictor.features import FEATURE_COLUMNS, featurize
from roofcast.predictor.learned.data import DEFAULT_CAP, aiconfigurator_set, combine, public_set
from roofcast.predictor.learned.features import FEATURES, learned_features, roofline_terms
from roofcast.predictor.learned.model import ROW_FLOOR, FamilyModel
from roofcast.predictor.learned.roads import primary_runtimes, runtime_column
from roofcast.predictor.learned.training import borrowing_rows, time_weights
from roofcast.predictor.runtimes import get_runtime

FAMILIES = ("matmul", "attention")
#: aiconfigurator shape column -> the LLM row's attention column the tables are keyed by.
ATTENTION = {"attn_batch": "batch_size", "attn_heads": "num_heads",
             "attn_kv_heads": "num_key_value_heads", "attn_head_dim": "head_dim",
             "attn_window": "window_size", "attn_kv_dtype": "kv_dtype"}


def on_device(rows: pd.DataFrame, hw) -> pd.DataFrame:
    """``rows`` (featurized aiconfigurator rows) featurized on ``hw``, attention keyed."""
    work = [c for c in rows.columns if c not in FEATURE_COLUMNS]
    parts = [featurize(g[work], [hw], RunConfig(runtime=get_runtime(rt)), get_runtime(rt))
             .set_index(g.index) for rt, g in rows.groupby("runtime")]
    out = pd.concat(parts).loc[rows.index]
    return out.assign(**{k: out[v] for k, v in ATTENTION.items()},
                      attn_queries=out["isl"], attn_keys=out["isl"] + out["step"].fillna(0))


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    tables = load()
    pub, aic = public_set(cap=DEFAULT_CAP), aiconfigurator_set(cap=300)
    ts = combine([pub, aic])
    is_aic = np.arange(len(ts)) >= len(pub)
    F, bound = prepared(ts)
    X, meas = ts.X, ts.y_s
    fam, dev = X["family"].astype(str).to_numpy(), X["device"].astype(str).to_numpy()
    primary = primary_runtimes(X["device_kind"].astype(str).to_numpy(),
                               runtime_column(X, "runtime"))
    ok = (bound > 0) & (meas > 0)
    out = []
    for held in tables.meta["devices"]:
        sib = anchor_of(held, [d for d in tables.meta["devices"] if d != held])
        test = is_aic & (dev == held) & np.isin(fam, FAMILIES)
        if sib is None or not test.any():
            continue
        Xs = on_device(X[test], sib)
        Fs = learned_features(Xs)
        _, Fs[ROW_FLOOR] = borrowing_rows(Xs, Xs["device_kind"].astype(str).to_numpy(),
                                          runtime_column(Xs, "runtime"), primary)
        own, other = np.full(test.sum(), np.nan), np.full(test.sum(), np.nan)
        for f in FAMILIES:
            train = ok & (fam == f) & (dev != held)
            fm = FamilyModel.fit(f"gpu/{f}", "xgboost", F[train], meas[train], bound[train],
                                 X["_group"].to_numpy()[train], None,
                                 time_weights(meas[train], 0.5), FEATURES)
            m = fam[test] == f
            own[m] = fm.predict_time(F[test][m], bound[test][m])
            other[m] = fm.predict_time(Fs[m], roofline_terms(Xs)[2][m])
        table = tables.times(Xs, runtime_versions(Xs))
        out.append(pd.DataFrame({"table": X["table"][test].to_numpy(),
                                 "dtype": X["dtype"][test].to_numpy(), "held_out": held,
                                 "sibling": sib.id, "measured": meas[test], "learned": own,
                                 "sibling_table": table, "anchored": table * own / other}))
        print(f"held out {held} (sibling {sib.id})", file=sys.stderr, flush=True)
    df = pd.concat(out).dropna(subset=["anchored"])
    roads = ("learned", "sibling_table", "anchored")
    for r in roads:
        df[r] = 100 * (df[r] / df["measured"] - 1).abs()
    pd.set_option("display.width", 140)
    print(df.groupby(["table", "dtype", "held_out", "sibling"])[list(roads)].median()
          .round(1).to_string())
    print("\npooled:\n" + df.groupby(["table", "dtype"])[list(roads)].median().round(1)
          .to_string())
    print(f"\nall {len(df)} rows: median |error| " + ", ".join(
        f"{r} {df[r].median():.1f} %" for r in roads))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
