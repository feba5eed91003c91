"""Recount the work columns of the bundled rows from the graphs they measured (latencies untouched).

Run: ``python training_data/bundled/recount_work.py [--check]``

The learned model trains on the rows' work columns (``RECOUNTED``: FLOPs, bytes, weight bytes,
GEMM dims) and predicts from the predictor's, so both must be counted by the same cost rules
(``training_data.collectors.rows.group_work``). When a rule changes, this re-imports each
measured zoo model and microbenchmark case, recounts every row and rewrites
``cpu_measurements.csv.gz`` atomically; ``--check`` only reports and exits 1 on a change.

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.bundled.recount_work).
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

from roofcast.graph_import.dims import parse_dim_specs
from roofcast.training_data import zoo
from roofcast.training_data.collectors.ort_cpu import import_for_costs, load_named
from roofcast.training_data.collectors.rows import group_work

HERE = Path(__file__).resolve().parent
ROWS = HERE / "cpu_measurements.csv.gz"
SUMMARY = HERE / "cpu_summary.csv"
RECOUNTED = ("flops", "bytes_read", "bytes_written", "weight_bytes",
             "gemm_batch", "gemm_m", "gemm_n", "gemm_k")


def write_atomically(path: Path, write) -> None:
    """``write(tmp)`` to a temporary file beside ``path``, then rename it over ``path``: an
    interrupted run leaves the previous file whole (an append that replaces grids would
    otherwise lose the dataset mid-write)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _graph_source(run: pd.Series, micro: dict[tuple[str, str], object]) -> tuple[object, str, str]:
    """(model source, dims spec, name) of a measured run: its zoo model, or its microbenchmark
    case rebuilt from the current grids (``microbench.GRIDS``)."""
    if run["kind"] == "micro":
        key = (str(run["family"]), str(run["case"]))
        if key not in micro:
            raise SystemExit(f"microbenchmark {key[0]} '{key[1]}' is no longer in "
                             "training_data/collectors/microbench.py: re-measure its grid "
                             "(build_dataset --append --replace-micro)")
        return micro[key].model.SerializeToString(), "", ""
    return zoo.model_path(str(run["model"])), str(run["dims"]), str(run["model"])


def recount(rows: pd.DataFrame, summary: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """(rows with recounted work columns, boolean mask of the rows whose columns changed), for
    the rows of every zoo and microbenchmark run in ``summary``."""
    from roofcast.training_data.collectors.microbench import cases

    runs = summary[summary["kind"].isin(["zoo", "zoo-repeat", "micro"])].set_index("run_id")
    micro = {(c.family, c.label): c for c in cases("all")}
    out = rows.copy()
    graphs: dict[tuple, object] = {}
    for run_id, idx in out[out["run_id"].isin(runs.index)].groupby("run_id").groups.items():
        source, dims, name = _graph_source(runs.loc[run_id], micro)
        key = (source, dims)
        if key not in graphs:
            graphs[key] = import_for_costs(load_named(source),
                                           parse_dim_specs(dims.split(",")) if dims else {}, name)
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


def recountable(rows: pd.DataFrame, summary: pd.DataFrame) -> np.ndarray:
    """Boolean per row: it belongs to a zoo or microbenchmark run ``recount`` covers."""
    runs = summary[summary["kind"].isin(["zoo", "zoo-repeat", "micro"])]["run_id"]
    return rows["run_id"].isin(runs).to_numpy()


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
    write_atomically(ROWS, lambda f: new.to_csv(
        f, index=False, compression={"method": "gzip", "compresslevel": 9, "mtime": 0}))
    print(f"rewrote {ROWS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
