"""``roofcast measure MODEL`` / ``roofcast measure --micro FAMILY``: measured per-op times.

Runs the model with ONNX Runtime on random inputs (random weights in place of a weightless
model's absent data), profiler on, for every combination of ``--batch``, ``--threads`` and
``--inter-op-threads`` (batch 1 unless told, where the model has a ``batch`` dim); maps fused
kernels back to the graph nodes they cover; prints a summary per config (end-to-end median,
sum of per-op times, joined fraction) and the slowest ops; and saves the tidy rows to the
measurement store (``--store PATH``; default: the user's store) or a file
(``--output rows.csv|.csv.gz|.parquet``). ``--no-save`` only prints.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from roofcast.app.argtypes import (
    nonnegative_int,
    positive_int,
    positive_int_list,
    thread_count_list,
)
from roofcast.app.output import Table, add_format_arg, add_top_arg, emit, top_rows
from roofcast.training_data.collectors.ort_levels import OPT_LEVELS
from roofcast.training_data.errors import MeasurementError

if TYPE_CHECKING:
    import pandas as pd

DEVICES = ("cpu", "cuda")
SUMMARY_COLUMNS = ("model", "dims", "threads_intra", "threads_inter", "opt_level", "repeats",
                   "e2e_ms", "e2e_p10_ms", "e2e_p90_ms", "sum_ops_ms", "ops_over_e2e",
                   "executor_ms", "binding_ms", "unattributed_ms", "sum_op_medians_ms",
                   "joined_fraction", "rows", "groups_fused")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("measure", help="measure per-op times with ONNX Runtime's profiler",
                       description=__doc__)
    p.add_argument("model", nargs="?", help="path to an .onnx file or a zoo model name")
    p.add_argument("--micro", metavar="FAMILY[,FAMILY]",
                   help="microbenchmarks instead of a model: gemm, conv, elementwise, softmax, "
                        "layernorm, pooling, recurrent or all")
    p.add_argument("--quick", action="store_true", help="smaller microbenchmark grid")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="bind a symbolic dim: sequence=128, or INPUT:AXIS=N (repeatable)")
    p.add_argument("--batch", type=positive_int_list, default=None, metavar="B[,B...]",
                   help="batch sizes to measure, e.g. 1,8,32 (binds the dim named batch; "
                        "default 1)")
    p.add_argument("--threads", type=thread_count_list, default=[1], metavar="T[,T...]",
                   help="intra-op thread counts (default 1)")
    p.add_argument("--inter-op-threads", type=thread_count_list, default=[1], metavar="T[,T...]",
                   help="inter-op thread counts; >1 runs independent nodes in parallel")
    p.add_argument("--opt-level", choices=OPT_LEVELS, default="all",
                   help="ONNX Runtime graph optimisation level (default all)")
    p.add_argument("--repeats", type=positive_int, default=10, help="timed runs (default 10)")
    p.add_argument("--warmup", type=nonnegative_int, default=2,
                   help="untimed runs first (default 2)")
    p.add_argument("--device", choices=DEVICES, default="cpu",
                   help="cpu (ONNX Runtime CPU provider) or cuda (needs onnxruntime-gpu)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="random weights/inputs seed")
    save = p.add_mutually_exclusive_group()
    save.add_argument("--store", type=Path, metavar="PATH",
                      help="measurement store to append to (default: the user's store)")
    save.add_argument("--output", type=Path, metavar="FILE",
                      help="write the rows to FILE (.csv, .csv.gz or .parquet) instead")
    save.add_argument("--no-save", action="store_true", help="print only, save nothing")
    add_top_arg(p, "ops")
    add_format_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from roofcast.training_data.collectors.ort_cpu import MeasureConfig

    if (args.model is None) == (args.micro is None):
        raise MeasurementError(
            "give a MODEL (path or zoo name) or --micro FAMILY, not both/neither"
        )
    if args.output is not None:
        from roofcast.app.output_file import check_writable

        check_writable(args.output)  # before any work
    provider = "CPUExecutionProvider"
    if args.device == "cuda":
        from roofcast.training_data.collectors.gpu import require_cuda

        provider = require_cuda()
    configs = [MeasureConfig(threads_intra=t, threads_inter=i, opt_level=args.opt_level,
                             repeats=args.repeats, warmup=args.warmup, provider=provider,
                             seed=args.seed)
               for t, i in itertools.product(args.threads, args.inter_op_threads)]
    progress = (lambda msg: print(msg, file=sys.stderr)) if args.format == "table" else None
    if args.micro is not None:
        rows, summary = _micro(args, configs, progress)
    else:
        rows, summary = _model(args, configs, progress)
    saved = _save(args, rows)
    tables = {"summary": summary}
    if len(rows):
        tables["slowest_ops"] = Table.of(_ops_table(rows, None)).head(top_rows(args))
    runtimes = ", ".join(sorted(set(rows["runtime"]))) if len(rows) else ""
    emit(tables, args.format, extra={"rows": len(rows), "runtime": runtimes,
                                     **({"saved": saved} if saved else {})})
    if saved:
        print(f"roofcast measure: {saved}", file=sys.stderr)
    return 0


def _model(args: argparse.Namespace, configs, progress) -> tuple[pd.DataFrame, pd.DataFrame]:
    import pandas as pd

    from roofcast.app.model_ref import bind_dims, resolve_model_path
    from roofcast.graph_import.dims import check_dim_names, with_default_batch
    from roofcast.training_data.collectors.ort_cpu import measure_prepared, prepare

    path = resolve_model_path(args.model)
    name = path.stem
    batches = args.batch or [None]
    frames, summaries = [], []
    for batch in batches:
        dims = bind_dims(args.dim, batch)
        prep = prepare(path, with_default_batch(dims), name=name, seed=args.seed)
        check_dim_names(dims, prep.graph)
        for cfg in configs:
            m = _measure(prep, cfg, measure_prepared)
            frames.append(m.rows)
            summaries.append(m.summary)
            if progress:
                s = m.summary
                progress(f"{name} {s['dims']} threads={cfg.threads_intra}/{cfg.threads_inter}: "
                         f"e2e {s['e2e_ms']:.2f} ms, per-op sum {s['sum_ops_ms']:.2f} ms, "
                         f"joined {100 * s['joined_fraction']:.1f}%")
            if len(m.unattributed) and progress:
                top = m.unattributed.sort_values("latency_s").tail(3)
                progress("  kernels joined to no graph node: " + ", ".join(
                    f"{k} ({op}, {1e3 * t:.3f} ms)" for k, op, t in top.itertuples(index=False)))
    return (pd.concat(frames, ignore_index=True),
            pd.DataFrame(summaries).loc[:, list(SUMMARY_COLUMNS)])


def _measure(prep, cfg, fn):
    if cfg.provider == "CPUExecutionProvider":
        return fn(prep, cfg)
    from roofcast.training_data.collectors.gpu import measure_prepared_gpu

    return measure_prepared_gpu(prep, cfg)


def _micro(args: argparse.Namespace, configs, progress) -> tuple[pd.DataFrame, pd.DataFrame]:
    from roofcast.training_data.collectors.microbench import cases, run_cases

    if args.dim or args.batch:
        raise MeasurementError("--dim/--batch apply to a MODEL; microbenchmarks have fixed grids")
    families = [f.strip() for f in args.micro.split(",") if f.strip()]
    selected = cases(families, quick=args.quick)
    rows, summary = run_cases(selected, configs, progress=progress)
    cols = ["family", "case", "threads_intra", "threads_inter", "e2e_ms", "sum_op_medians_ms"]
    return rows, summary.loc[:, cols]


def _ops_table(rows: pd.DataFrame, top: int | None) -> pd.DataFrame:
    import pandas as pd

    ops = rows.sort_values("latency_s", ascending=False, kind="stable")
    if top:
        ops = ops.head(top)
    return pd.DataFrame({
        "model": ops["model"], "batch": ops["batch"], "threads": ops["threads_intra"],
        "op_type": ops["op_type"], "node": ops["node"],
        "latency_ms": ops["latency_s"] * 1e3, "p10_ms": ops["latency_p10_s"] * 1e3,
        "p90_ms": ops["latency_p90_s"] * 1e3, "gflop": ops["flops"] / 1e9,
        "mb_moved": (ops["bytes_read"] + ops["bytes_written"]) / 1e6,
    }).reset_index(drop=True)


def _save(args: argparse.Namespace, rows: pd.DataFrame) -> str:
    if args.no_save or rows.empty:
        return ""
    if args.output is not None:
        return write_rows(rows, args.output)
    from roofcast.training_data.store import Store

    store = Store(args.store)
    result = store.append(rows, what="measured rows")
    return f"{result.added} rows added to {store.path} ({result.duplicates} duplicates)"


def write_rows(rows: pd.DataFrame, path: Path) -> str:
    """Write rows to .csv / .csv.gz / .parquet (by suffix; ``output_file.write_file``: atomic,
    no link followed); MeasurementError for another suffix."""
    from roofcast.app.output_file import write_file

    name = path.name.lower()
    if name.endswith(".parquet"):
        write_file(path, lambda tmp: rows.to_parquet(tmp, index=False))
    elif name.endswith((".csv", ".csv.gz")):
        gzip = "gzip" if name.endswith(".gz") else None
        write_file(path, lambda tmp: rows.to_csv(tmp, index=False, compression=gzip))
    else:
        raise MeasurementError(
            f"--output {path}: unknown file type; use a .csv, .csv.gz or .parquet name")
    return f"{len(rows)} rows written to {path}"
