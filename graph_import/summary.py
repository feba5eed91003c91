"""Tables that describe an imported graph: per-op costs, totals by op type, overall totals.

Units in column names: ``gflop`` = 1e9 FLOPs (1 multiply-add = 2 FLOPs), ``mb`` = 1e6 bytes
(unfused reads + writes), ``intensity_flop_per_byte`` = FLOPs / bytes moved.

Each table is computed as plain rows (``op_rows``, ``op_type_rows``, ``problem_rows``: lists of
dicts, no pandas, so ``roofcast inspect`` prints without importing it); ``op_table``,
``by_op_type`` and ``problems_table`` are the same rows as DataFrames.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from roofcast.graph_import.types import Engine, Graph

if TYPE_CHECKING:
    import pandas as pd

OP_COLUMNS = ("node", "op_type", "output_shape", "gflop", "mb_moved", "mb_weights",
              "intensity_flop_per_byte", "engine")
OP_TYPE_COLUMNS = ("op_type", "count", "gflop", "mb_moved", "flop_share")
PROBLEM_COLUMNS = ("kind", "what", "detail")


def op_table(graph: Graph, include_free: bool = False) -> pd.DataFrame:
    """``op_rows`` as a DataFrame."""
    import pandas as pd

    return pd.DataFrame(op_rows(graph, include_free), columns=list(OP_COLUMNS))


def by_op_type(ops: pd.DataFrame) -> pd.DataFrame:
    """``op_type_rows`` of an ``op_table`` as a DataFrame."""
    import pandas as pd

    return pd.DataFrame(op_type_rows(ops.to_dict("records")), columns=list(OP_TYPE_COLUMNS))


def problems_table(graph: Graph, max_unresolved: int | None = None) -> pd.DataFrame:
    """``problem_rows`` as a DataFrame."""
    import pandas as pd

    return pd.DataFrame(problem_rows(graph, max_unresolved), columns=list(PROBLEM_COLUMNS))


def op_rows(graph: Graph, include_free: bool = False) -> list[dict[str, Any]]:
    """One row (``OP_COLUMNS``) per costed node in topological order (free view ops only if
    asked)."""
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
    return rows


def op_type_rows(ops: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Totals per op type (``OP_TYPE_COLUMNS``) of ``op_rows``, sorted by FLOPs then bytes (ties
    by name), with each type's share of the FLOPs: ``flop_share = gflop / sum(gflop)`` (0 when
    the model does no FLOPs)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in ops:
        groups.setdefault(row["op_type"], []).append(row)
    rows = [{"op_type": op_type, "count": len(members),
             "gflop": math.fsum(r["gflop"] for r in members),
             "mb_moved": math.fsum(r["mb_moved"] for r in members)}
            for op_type, members in sorted(groups.items())]
    total = math.fsum(r["gflop"] for r in rows)
    for r in rows:
        r["flop_share"] = r["gflop"] / total if total > 0 else 0.0
    return sorted(rows, key=lambda r: (-r["gflop"], -r["mb_moved"]))


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


def problem_rows(graph: Graph, max_unresolved: int | None = None) -> list[dict[str, Any]]:
    """What could not be costed (``PROBLEM_COLUMNS``): unsupported op types (with counts) and
    unresolved nodes (the first ``max_unresolved`` of them, then one row counting the rest)."""
    rows = [{"kind": "unsupported op type", "what": op_type, "detail": f"{n} node(s)"}
            for op_type, n in sorted(graph.unsupported.items())]
    unresolved = list(graph.unresolved.items())
    shown = unresolved if max_unresolved is None else unresolved[:max_unresolved]
    rows += [{"kind": "unresolved node", "what": node, "detail": reason}
             for node, reason in shown]
    if len(shown) < len(unresolved):
        rows.append({"kind": "unresolved node", "what": f"... {len(unresolved) - len(shown)} more",
                     "detail": "use --format csv or json for the full list"})
    return rows
