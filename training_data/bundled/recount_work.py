"""Recount the work columns of the bundled zoo rows from the zoo graphs (latencies untouched).

Run: ``python training_data/bundled/recount_work.py [--check]``

A bundled row of a zoo model is a group of graph nodes one ONNX Runtime kernel ran; its work
columns (``RECOUNTED``: FLOPs, bytes, weight bytes, GEMM dims) come from roofcast's cost rules
through ``training_data.collectors.rows.group_work`` — for a fused group the members' bytes
less the tensors passed inside the kernel (``predictor.fusion.internal_traffic``). When a rule
changes (the traffic accounting, a new GEMM mapping), the measured rows must follow it: the
learned model is trained on their columns and predicts from the predictor's, so the two must
be counted alike. Two such changes were missed before this script covered every row: fused
rows through views had zero bytes, and the LSTM rows of ``lstm_lm`` had no GEMM dims (measured
before recurrent layers mapped to GEMMs; the microbenchmark LSTM rows had them), so the learned
recurrent model could not tell batch from steps there. This script re-imports each measured
(model, dims) from the zoo, recomputes the work columns of every zoo row with ``group_work``
and rewrites ``cpu_measurements.csv.gz`` (atomically; nothing else changes). ``--check``: only
print what would change, exit 1 if anything would.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from graph_import.dims import parse_dim_specs
from training_data import zoo
from training_data.collectors.ort_cpu import import_for_costs, load_named
from training_data.collectors.rows import group_work

HERE = Path(__file__).resolve().parent
ROWS = HERE / "cpu_measurements.csv.gz"
SUMMARY = HERE / "cpu_summary.csv"
RECOUNTED = ("flops", "bytes_read", "bytes_written", "weight_bytes",
             "gemm_batch", "gemm_m", "gemm_n", "gemm_k")



def recount(rows: pd.DataFrame, summary: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """(rows with recounted work columns, boolean mask of the rows whose columns changed)."""
    runs = summary[summary["kind"].isin(["zoo", "zoo-repeat"])].set_index("run_id")
    out = rows.copy()
    zoo_rows = out["run_id"].isin(runs.index)
    graphs: dict[tuple[str, str], object] = {}
    for run_id, idx in out[zoo_rows].groupby("run_id").groups.items():
        model, dims = str(runs.at[run_id, "model"]), str(runs.at[run_id, "dims"])
        key = (model, dims)
        if key not in graphs:
            proto = load_named(zoo.model_path(model))
            graphs[key] = import_for_costs(proto, parse_dim_specs(dims.split(",")), model)
        graph = graphs[key]
        g = graph.nx_graph
        for i in idx:
            nodes = [g.nodes[n]["op"] for n in str(out.at[i, "node"]).split("+")]
            work = group_work(nodes, graph)
            for c in RECOUNTED:
                out.at[i, c] = work[c]
    changed = ~np.isclose(out[list(RECOUNTED)].to_numpy(float),
                          rows[list(RECOUNTED)].to_numpy(float), rtol=1e-9, equal_nan=True)
    return out, changed.any(axis=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report only, write nothing")
    args = parser.parse_args(argv)
    rows = pd.read_csv(ROWS, keep_default_na=True)
    summary = pd.read_csv(SUMMARY)
    new, moved = recount(rows, summary)
    changed = int(moved.sum())
    print(f"{changed} of {len(rows)} rows have other work columns under the current rules")
    if changed:
        print(new.loc[moved, "op_type"].value_counts().head(15).to_string())
    if args.check or not changed:
        return 1 if (args.check and changed) else 0
    fd, tmp = tempfile.mkstemp(dir=HERE, suffix=".csv.gz")
    os.close(fd)
    try:
        new.to_csv(tmp, index=False, compression={"method": "gzip", "mtime": 0})
        os.replace(tmp, ROWS)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"rewrote {ROWS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
