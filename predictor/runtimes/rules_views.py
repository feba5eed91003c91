"""``views-free``: data-movement nodes PyTorch runs as views launch no kernel.

Free: a ``Transpose`` read only by matmuls (cuBLAS takes the operand transposed) or moving only
size-1 dims, ``Split``, ``Slice`` with positive steps, ``Expand``, and a ``Cast`` to the dtype
it already has. A ``Transpose`` read by anything else (``permute().contiguous()``) and a
negative-step slice stay copies. Calibrated on NeuSight's per-op PyTorch-eager traces of
GPT-2-style models, where views read 6-10 µs of host dispatch and copies 90-210 µs.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.runtimes.rules_views).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from roofcast.graph_import.types import Graph, OpNode
from roofcast.predictor.runtimes.patterns import KernelPlan, register_pattern
from roofcast.predictor.runtimes.rules_graph import consumers, family, launches

ViewRule = Callable[[Graph, OpNode], bool]
VIEW_RULES: dict[str, ViewRule] = {}


def view_rule(op_type: str) -> Callable[[ViewRule], ViewRule]:
    """Register the rule deciding whether a node of ``op_type`` is a view."""
    def deco(fn: ViewRule) -> ViewRule:
        VIEW_RULES[op_type] = fn
        return fn
    return deco


@view_rule("Transpose")
def _transpose(graph: Graph, n: OpNode) -> bool:
    readers = consumers(graph, n.name)
    if readers and all(family(r) == "matmul" for r in readers):
        return True
    src = n.input(0)
    perm = n.attrs.get("perm")
    if src is None or perm is None:
        return False
    moved = [p for p in perm if src.shape[p] != 1]
    return moved == sorted(moved)


@view_rule("Split")
def _split(graph: Graph, n: OpNode) -> bool:
    return True


@view_rule("Slice")
def _slice(graph: Graph, n: OpNode) -> bool:
    steps = n.input(4)
    if steps is None:
        return True
    value = n.const_inputs.get(steps.name)
    return value is not None and bool(np.all(np.asarray(value) > 0))


@view_rule("Expand")
def _expand(graph: Graph, n: OpNode) -> bool:
    return True


@view_rule("Cast")
def _cast(graph: Graph, n: OpNode) -> bool:
    src = n.input(0)
    return src is not None and bool(n.outputs) and src.dtype == n.outputs[0].dtype


@register_pattern("views-free")
def views_free(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Mark as free the nodes PyTorch runs as views (module docstring)."""
    locked = plan.locked()
    names = [n.name for n in graph.ops()
             if n.op_type in VIEW_RULES and launches(n) and n.name not in locked
             and plan.group_of(n.name) is None and VIEW_RULES[n.op_type](graph, n)]
    if not names:
        return plan
    return plan.with_free(names).with_note(f"{len(names)} data-movement nodes run as views "
                                           "(no kernel)")
