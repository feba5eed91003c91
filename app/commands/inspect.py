"""``roofcast inspect MODEL``: the per-operator account of the work a model does."""

from __future__ import annotations

import argparse
import sys

from roofcast.app.argtypes import positive_int
from roofcast.app.model_ref import load_graph
from roofcast.app.output import add_format_arg, emit
from roofcast.graph_import import summary

SORT_KEYS = {"order": None, "flops": "gflop", "bytes": "mb_moved", "intensity":
             "intensity_flop_per_byte"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="per-op FLOPs, bytes and intensity of an ONNX model",
                       description=__doc__)
    p.add_argument("model", help="path to an .onnx file or a zoo model name (e.g. resnet50)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="bind a symbolic dim: batch=8, or INPUT:AXIS=N (repeatable)")
    p.add_argument("--batch", type=positive_int, help="shorthand for --dim batch=N")
    p.add_argument("--top", type=positive_int, metavar="N", help="show only the N largest ops")
    p.add_argument("--sort", choices=tuple(SORT_KEYS), default="flops",
                   help="order of the per-op table (default: flops)")
    add_format_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    graph = load_graph(args.model, args.dim, args.batch)
    all_ops = summary.op_table(graph)
    ops = all_ops
    key = SORT_KEYS[args.sort]
    if key is not None:
        ops = ops.sort_values(key, ascending=False, kind="stable", ignore_index=True)
    if args.top:
        ops = ops.head(args.top)
    tables = {"ops": ops, "by_op_type": summary.by_op_type(all_ops)}
    problems = summary.problems_table(
        graph, max_unresolved=10 if args.format == "table" else None)
    if not problems.empty:
        tables["problems"] = problems
    extra = {"model": graph.name, "dims": dict(graph.dims), **summary.totals(graph)}
    if graph.unbound_dims:
        extra["unbound_dims"] = list(graph.unbound_dims)
    emit(tables, args.format, extra=extra)
    if graph.unbound_dims:
        hint = " ".join(f"--dim {d}=N" for d in graph.unbound_dims)
        print(f"roofcast inspect: note: symbolic dims not bound: {', '.join(graph.unbound_dims)}; "
              f"their nodes are unresolved. Bind them, e.g. {hint}", file=sys.stderr)
    return 0
