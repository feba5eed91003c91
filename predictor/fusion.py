"""Pricing of the kernels a runtime launches: ``apply_plan`` turns a profile's ``KernelPlan``
(``predictor.runtimes.patterns``: groups, free nodes, replacing and extra kernels) into workload
rows. Which nodes form a group is the patterns' business (``predictor.runtimes.rules_*``).

A fused group is one kernel (one launch): FLOPs = the members' sum (at the head's engine);
bytes = external inputs + external outputs (the members' bytes less one write and one read of
every tensor passed inside the group, ``internal_traffic``, and repeated reads of one external
tensor); engine, dtype and GEMM dims of the head; ``op_type`` / ``fused_nodes`` the '+'-joined
members. So a fused prediction is never slower than the unfused one. Backward rows stay unfused.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.fusion).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from roofcast.graph_import.fused_traffic import internal_traffic
from roofcast.graph_import.types import Engine, Graph, OpNode
from roofcast.predictor.precision import rescale_bytes
from roofcast.predictor.runtimes.patterns import ExtraKernel, Kernel, KernelPlan
from roofcast.predictor.workload_rows import COLUMNS, GEMM_COLUMNS, frame


def apply_plan(graph: Graph, rows: pd.DataFrame, plan: KernelPlan, precision: str) -> pd.DataFrame:
    """Forward rows as the runtime launches them (``predictor.runtimes.patterns.KernelPlan``):

    * rows of ``plan.free`` nodes are dropped (they launch no kernel);
    * each group becomes one row at its head's position, priced as above (members' flops; their
      bytes minus the internal traffic and minus repeated reads of one external tensor, which a
      fused kernel reads once), or with the group's ``replace`` kernel (op type, family,
      engine, flops, bytes, GEMM dims of that kernel);
    * each ``extra`` kernel is a row right after the row of its ``after`` node (or of the group
      holding it), keyed ``forward:<label>:<node>``.
    """
    if not (plan.groups or plan.free or plan.extra):
        return rows
    member_of = {m: head for head, ms in plan.groups.items() for m in ms[1:]}
    extras: dict[str, list[dict]] = {}
    records = _records(rows)
    by_node: Mapping[str, dict] = {r["node"]: r for r in records}
    for e in plan.extra:
        if e.after in by_node:
            anchor = member_of.get(e.after, e.after)
            extras.setdefault(anchor, []).append(_extra_row(by_node[e.after], e, precision))
    out: dict[str, list] = {c: [] for c in COLUMNS}
    for rec in records:
        name = rec["node"]
        if name in member_of or name in plan.free:
            continue
        if name in plan.groups:
            members = list(plan.groups[name])
            rec = _merge(graph, [by_node[m] for m in members if m in by_node], members, precision)
            if name in plan.replace:
                rec = _replaced(rec, plan.replace[name], precision)
        for r in (rec, *extras.get(name, ())):
            for c in COLUMNS:
                out[c].append(r[c])
    return frame(out)


def _records(rows: pd.DataFrame) -> list[dict]:
    """``rows.to_dict("records")`` (the same Python values), column by column: ``tolist`` of
    a column is far cheaper than pandas' per-cell boxing. Each record is its own dict."""
    names = list(rows.columns)
    return [dict(zip(names, values, strict=True))
            for values in zip(*(rows[c].tolist() for c in names), strict=True)]


def _replaced(rec: dict, kernel: Kernel, precision: str) -> dict:
    """A group row carrying ``kernel``'s work instead of the members' sum."""
    gemm = kernel.gemm or (float("nan"),) * 4
    return {**rec, "op_type": kernel.op_type, "family": kernel.family, "engine": kernel.engine,
            "flops": float(kernel.flops),
            "bytes_read": rescale_bytes(kernel.bytes_read, kernel.dtype, precision),
            "bytes_written": rescale_bytes(kernel.bytes_written, kernel.dtype, precision),
            "weight_bytes": 0.0, "inner_elems": float("nan"),
            **dict(zip(GEMM_COLUMNS, (float(g) for g in gemm), strict=True))}


def _extra_row(anchor: dict, extra: ExtraKernel, precision: str) -> dict:
    """The row of a kernel the runtime adds after ``anchor``'s node."""
    k = extra.kernel
    return {**anchor, "op_type": k.op_type, "family": k.family, "engine": k.engine,
            "flops": float(k.flops),
            "bytes_read": rescale_bytes(k.bytes_read, k.dtype, precision),
            "bytes_written": rescale_bytes(k.bytes_written, k.dtype, precision),
            "weight_bytes": 0.0, "inner_elems": float("nan"),
            **dict.fromkeys(GEMM_COLUMNS, float("nan")),
            "fused_nodes": anchor["node"], "key": f"forward:{extra.label}:{anchor['node']}"}


def _repeated_reads(graph: Graph, members: list[str], tensor_bytes) -> float:
    """Bytes of external tensors read by more than one vector/data member, beyond their first
    read: a fused elementwise kernel loads ``x`` once for ``x * erf(x / sqrt 2)``. Reads by a
    matrix member (a GEMM/conv tiles its operand its own way) are left as they are, so a conv
    epilogue still reads its skip tensor on its own."""
    g = graph.nx_graph
    produced = {t.name for m in members for t in g.nodes[m]["op"].outputs}
    reads: dict[str, tuple[int, float]] = {}
    for m in members:
        op: OpNode = g.nodes[m]["op"]
        if op.cost is None or op.cost.engine in (Engine.FREE, Engine.MATRIX):
            continue
        for t in {t.name: t for t in op.inputs if t is not None}.values():
            if t.name in produced or t.name in op.weight_inputs or not t.is_concrete:
                continue
            n, _ = reads.get(t.name, (0, 0.0))
            reads[t.name] = (n + 1, tensor_bytes(t))
    return sum((n - 1) * size for n, size in reads.values() if n > 1)


def _merge(graph: Graph, recs: list[dict], members: list[str], precision: str) -> dict:
    head = dict(recs[0])

    def at_precision(t):
        return rescale_bytes(t.nbytes, t.dtype, precision)

    read_saved, write_saved = internal_traffic(graph, members, at_precision)
    read_saved += _repeated_reads(graph, members, at_precision)
    head["flops"] = sum(r["flops"] for r in recs)
    head["bytes_read"] = max(sum(r["bytes_read"] for r in recs) - read_saved, 0.0)
    head["bytes_written"] = max(sum(r["bytes_written"] for r in recs) - write_saved, 0.0)
    head["weight_bytes"] = sum(r["weight_bytes"] for r in recs)
    head["op_type"] = "+".join(r["op_type"] for r in recs)
    head["fused_nodes"] = "+".join(r["node"] for r in recs)
    return head
