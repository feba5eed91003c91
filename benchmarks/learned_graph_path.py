"""Leave-one-model-out through the prediction path: ONNX graph -> fused workload -> learned model.

Run: ``/work/venv/bin/python benchmarks/learned_graph_path.py [--models a,b] [--format ...]``

``learned_accuracy.py`` scores the learned CPU model on the *measured* rows (ONNX Runtime's
fused groups, their work counted by the collector). A user's prediction takes another road:
``roofcast predict MODEL --estimator learned --fusion`` imports the graph, fuses it with
roofcast's own rules and featurizes those rows. When the two roads count work differently the
model is fed inputs it never saw in training (a MatMul+Add counted with its intermediate
tensor, a view group with zero bytes), and only a benchmark that goes the user's way sees it.

For every zoo model with whole-model runs in the bundled CPU data: train the learned model on
the bundled data *without* that model (``predictor.learned.training.train``, as ``roofcast
train --from bundled``), save it, and predict every measured configuration of the held-out
model through ``predict_graph`` (estimator ``learned``, fusion on, the threads of the run) on
the machine the data was measured on (its recorded calibration), end to end with the learned
end-to-end calibration (``graph_summary``) — exactly what ``roofcast predict`` prints as
``e2e_estimate_ms``. Beside it: the same model scored on the measured rows of the run (the
``learned_accuracy.py`` road) and the analytical ``time-roofline`` prediction of the graph.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from roofcast.app.output import add_format_arg, emit
from roofcast.graph_import import import_model
from roofcast.graph_import.dims import parse_dim_specs
from roofcast.predictor.config import RunConfig
from roofcast.predictor.learned.data import BUNDLED_DIR, BUNDLED_META, bundled_set, bundled_spec
from roofcast.predictor.learned.estimator import MODEL_ENV, graph_summary
from roofcast.predictor.learned.persistence import save
from roofcast.predictor.learned.training import train
from roofcast.predictor.simulate import predict_graph
from roofcast.training_data import zoo


def zoo_runs(summary: pd.DataFrame) -> pd.DataFrame:
    """First-session zoo runs at the default optimisation level, one inter-op thread."""
    s = summary[(summary["kind"] == "zoo") & (summary["opt_level"] == "all")
                & (summary["threads_inter"] == 1)]
    return s[["model", "dims", "threads_intra", "e2e_ms", "run_id"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated zoo models (default: all)")
    add_format_arg(parser)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if args.format == "table" else None
    ts = bundled_set()
    hw = bundled_spec(BUNDLED_DIR / BUNDLED_META)
    runs = zoo_runs(pd.read_csv(BUNDLED_DIR / "cpu_summary.csv"))
    models = [m for m in args.models.split(",") if m] or sorted(runs["model"].unique())
    groups = ts.X["_group"].astype(str).to_numpy()
    run_ids = ts.X["_run"].astype(str).to_numpy()
    rows = []
    for name in models:
        held = groups == f"model:{name}"
        if not held.any():
            raise SystemExit(f"learned_graph_path: no bundled rows of model {name!r}")
        res = train(ts.subset(~held))
        with tempfile.TemporaryDirectory(prefix="roofcast-lomo-") as tmp:
            save(res.model, tmp)
            os.environ[MODEL_ENV] = tmp
            graphs = {}  # dims -> graph: the runs at 1 and 2 threads share one import
            for r in runs[runs["model"] == name].itertuples():
                dims = parse_dim_specs(r.dims.split(","))
                if r.dims not in graphs:
                    graphs[r.dims] = import_model(zoo.model_path(name), dims=dims, name=name)
                graph = graphs[r.dims]
                config = RunConfig(dims=dims, threads=int(r.threads_intra), fusion=True)
                learned = predict_graph(graph, hw, config, "learned")
                summary = graph_summary(learned.per_op, hw.kind, model_dir=tmp)
                analytical = predict_graph(graph, hw, config, "time-roofline")
                sel = held & (run_ids == r.run_id)
                rows_pred = res.model.explain(ts.X[sel], mode="learned")["time_s"].sum()
                e2e = res.model.e2e["cpu"].apply(float(rows_pred))[0]
                meas = r.e2e_ms / 1e3
                rows.append({
                    "model": name, "dims": r.dims, "threads": int(r.threads_intra),
                    "measured_ms": 1e3 * meas, "graph_ms": 1e3 * summary["e2e_s"],
                    "rows_ms": 1e3 * e2e, "analytical_ms": 1e3 * analytical.total_s,
                    "graph_err_pct": 100 * abs(summary["e2e_s"] - meas) / meas,
                    "rows_err_pct": 100 * abs(e2e - meas) / meas,
                    "analytical_err_pct": 100 * abs(analytical.total_s - meas) / meas,
                    "covered": bool(summary["e2e_lower_s"] <= meas <= summary["e2e_upper_s"]),
                    "ood": bool(summary["ood"]),
                })
            os.environ.pop(MODEL_ENV, None)
        if say:
            done = [x for x in rows if x["model"] == name]
            say(f"{name}: graph {np.median([x['graph_err_pct'] for x in done]):.1f}% / rows "
                f"{np.median([x['rows_err_pct'] for x in done]):.1f}% median error "
                f"({time.perf_counter() - t0:.0f} s)")
    per_run = pd.DataFrame(rows)
    per_model = per_run.groupby("model").agg(
        runs=("graph_err_pct", "size"), graph_median_err_pct=("graph_err_pct", "median"),
        rows_median_err_pct=("rows_err_pct", "median"),
        analytical_median_err_pct=("analytical_err_pct", "median"),
        coverage_pct=("covered", lambda c: 100 * c.mean())).reset_index()
    overall = pd.DataFrame([{
        "runs": len(per_run), "models": per_run["model"].nunique(),
        "graph_median_err_pct": per_run["graph_err_pct"].median(),
        "graph_p90_err_pct": per_run["graph_err_pct"].quantile(0.9),
        "rows_median_err_pct": per_run["rows_err_pct"].median(),
        "analytical_median_err_pct": per_run["analytical_err_pct"].median(),
        "graph_interval_coverage_pct": 100 * per_run["covered"].mean(),
        "ood_runs": int(per_run["ood"].sum())}])
    emit({"overall": overall.round(2), "per_model": per_model.round(2),
          "per_run": per_run.round(2)}, args.format,
         extra={"device": hw.id, "elapsed_s": round(time.perf_counter() - t0, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
