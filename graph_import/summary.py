"""Tables that describe an imported graph: per-op costs, totals by op type, overall totals.

Units in column names: ``gflop`` = 1e9 FLOPs (1 multiply-add = 2 FLOPs), ``mb`` = 1e6 bytes
(unfused reads + writes), ``intensity_flop_per_byte`` = FLOPs / bytes moved.
"""

from __future__ import annotations

import pandas as pd

from roofcast.graph_import.types import Engine, Graph

OP_COLUMNS = ("node", "op_type", "output_shape", "gflop", "mb_moved", "mb_weights",
              "intensity_flop_per_byte", "engine")


def op_table(graph: Graph, include_free: bool = False) -> pd.DataFrame:
    """One row per costed node in topological order (free view ops only if asked)."""
    rows = []
    for op in graph.ops():
        if op.cost is None or (op.cost.engine is Engine.FREE and not include_free):
            continue
        out_shape = "x".join(map(str, op.outputs[0].shape)) if op.outputs else ""
        rows.append({
            "node": op.name,
            "op_type": op.op_type,
            "output_shape": out_shape or "scalar",
            "gflop": op.cost.flops / 1e9,
            "mb_moved": op.cost.bytes_total / 1e6,
            "mb_weights": op.cost.weight_bytes / 1e6,
            "intensity_flop_per_byte": op.cost.intensity_flop_per_byte,
            "engine": str(op.cost.engine),
        })
    return pd.DataFrame(rows, columns=list(OP_COLUMNS))


def by_op_type(ops: pd.DataFrame) -> pd.DataFrame:
    """Totals per op type, sorted by FLOPs then bytes, with each type's share of the FLOPs."""
    if ops.empty:
        return pd.DataFrame(columns=["op_type", "count", "gflop", "mb_moved", "flop_share"])
    grouped = ops.groupby("op_type", as_index=False).agg(
        count=("node", "size"), gflop=("gflop", "sum"), mb_moved=("mb_moved", "sum"))
    total = grouped["gflop"].sum()
    grouped["flop_share"] = grouped["gflop"] / total if total > 0 else 0.0
    return grouped.sort_values(["gflop", "mb_moved"], ascending=False, ignore_index=True)


def totals(graph: Graph) -> dict[str, float | int]:
    """Overall figures: FLOPs, bytes moved, params, weight and activation bytes, node counts.

    ``constant_folded_nodes``: shape computations evaluated at import (free, no kernel).
    ``activation_bytes`` = bytes of every tensor written by a costed, non-free node (each
    intermediate counted once, as produced).
    """
    flops = bytes_moved = act_bytes = 0.0
    costed = folded = 0
    for op in graph.ops():
        if op.cost is None:
            continue
        costed += 1
        folded += op.constant_folded
        flops += op.cost.flops
        bytes_moved += op.cost.bytes_total
        if op.cost.engine is not Engine.FREE:
            act_bytes += sum(t.nbytes for t in op.outputs)
    return {
        "nodes": len(graph),
        "costed_nodes": costed,
        "constant_folded_nodes": folded,
        "gflop": flops / 1e9,
        "mb_moved": bytes_moved / 1e6,
        "params": graph.params,
        "weight_mb": graph.weight_bytes / 1e6,
        "activation_mb": act_bytes / 1e6,
        "unsupported_nodes": sum(graph.unsupported.values()),
        "unresolved_nodes": len(graph.unresolved),
    }


def problems_table(graph: Graph, max_unresolved: int | None = None) -> pd.DataFrame:
    """What could not be costed: unsupported op types (with counts) and unresolved nodes
    (the first ``max_unresolved`` of them, then one row counting the rest)."""
    rows = [{"kind": "unsupported op type", "what": op_type, "detail": f"{n} node(s)"}
            for op_type, n in sorted(graph.unsupported.items())]
    unresolved = list(graph.unresolved.items())
    shown = unresolved if max_unresolved is None else unresolved[:max_unresolved]
    rows += [{"kind": "unresolved node", "what": node, "detail": reason}
             for node, reason in shown]
    if len(shown) < len(unresolved):
        rows.append({"kind": "unresolved node", "what": f"... {len(unresolved) - len(shown)} more",
                     "detail": "use --format csv or json for the full list"})
    return pd.DataFrame(rows, columns=["kind", "what", "detail"])
