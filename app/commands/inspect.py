"""``roofcast inspect MODEL``: the per-operator account of the work a model does.

Batch 1 unless told (``--batch N``) where the model has a ``batch`` dim; other symbolic dims are
bound with ``--dim NAME=N``. The per-op table lists the 15 largest ops by default (``--top N``;
``--top 0``: all).
"""

from __future__ import annotations

import argparse
import math
import sys

from roofcast.app.commands.predict import add_model_args
from roofcast.app.output import Table, add_format_arg, add_top_arg, emit, top_rows

SORT_KEYS = {"order": None, "flops": "gflop", "bytes": "mb_moved", "intensity":
             "intensity_flop_per_byte"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="per-op FLOPs, bytes and intensity of an ONNX model",
                       description=__doc__)
    add_model_args(p)
    add_top_arg(p, "ops (in --sort order)")
    p.add_argument("--sort", choices=tuple(SORT_KEYS), default="flops",
                   help="order of the per-op table (default: flops)")
    add_format_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from roofcast.app.commands.predict import user_dim_specs
    from roofcast.app.model_ref import load_graph
    from roofcast.graph_import import summary

    graph = load_graph(args.model, user_dim_specs(args))
    all_ops = summary.op_rows(graph)
    ops = all_ops
    key = SORT_KEYS[args.sort]
    if key is not None:
        ops = sorted(ops, key=lambda r: _descending(r[key]))
    tables = {
        "ops": Table.from_records(ops, summary.OP_COLUMNS).head(top_rows(args)),
        "by_op_type": Table.from_records(summary.op_type_rows(all_ops), summary.OP_TYPE_COLUMNS),
    }
    problems = summary.problem_rows(graph, max_unresolved=10 if args.format == "table" else None)
    if problems:
        tables["problems"] = Table.from_records(problems, summary.PROBLEM_COLUMNS)
    extra = {"model": graph.name, "dims": dict(graph.dims), **summary.totals(graph)}
    if graph.unbound_dims:
        extra["unbound_dims"] = list(graph.unbound_dims)
    emit(tables, args.format, extra=extra)
    if graph.unbound_dims:
        hint = " ".join(f"--dim {d}=N" for d in graph.unbound_dims)
        print(f"roofcast inspect: note: symbolic dims not bound: {', '.join(graph.unbound_dims)}; "
              f"their nodes are unresolved. Bind them, e.g. {hint}", file=sys.stderr)
    return 0


def _descending(value: float) -> tuple[bool, float]:
    """Sort key: largest first, NaN last (as pandas' sort_values)."""
    return (math.isnan(value), -value if not math.isnan(value) else 0.0)
