"""``inductor-chains`` (alias ``pointwise-chains``): torch.compile's Inductor fuses chains of
pointwise, reduction and normalisation ops into one generated (Triton) kernel.

Rule (Inductor's vertical fusion, default mode, simplified): a fusible node (elementwise,
normalization, softmax, reduction or data movement, not a matmul/conv) joins the groups of its
fusible producers when every input of the merged group is produced before the group's first
member (a kernel cannot start before its inputs exist); a group holds at most one
reduction-class node; nothing fuses into a cuBLAS GEMM or convolution (extern kernels without
``max_autotune``). A group's bytes are its external inputs and outputs.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.runtimes.rules_inductor).
"""

from __future__ import annotations

from roofcast.graph_import.types import Engine, Graph, OpNode
from roofcast.predictor.runtimes.patterns import KernelPlan, register_pattern
from roofcast.predictor.runtimes.rules_graph import (
    family,
    launches,
    node,
    source_through_views,
    topo_order,
)

FUSIBLE_FAMILIES: frozenset[str] = frozenset(
    {"elementwise", "normalization", "softmax", "reduction", "data_movement"})
REDUCTION_FAMILIES: frozenset[str] = frozenset({"normalization", "softmax", "reduction"})


def fusible(n: OpNode) -> bool:
    return (launches(n) and n.cost.engine in (Engine.VECTOR, Engine.DATA)
            and family(n) in FUSIBLE_FAMILIES)


def _reductions(graph: Graph, names: set[str]) -> int:
    return sum(1 for m in names if family(node(graph, m)) in REDUCTION_FAMILIES)


@register_pattern("inductor-chains")
def inductor_chains(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Fuse pointwise/reduction chains as Inductor does (module docstring)."""
    order = topo_order(graph)
    locked = plan.locked()
    before = len(_kernels(graph, plan))
    for n in graph.ops():
        if not fusible(n) or n.name in locked or n.name in plan.free:
            continue
        group = _members(plan, n.name)
        if not all(fusible(node(graph, m)) for m in group):
            continue
        candidates = _producer_groups(graph, plan, locked, n, group)
        group = _grown(graph, order, group, candidates)
        if len(group) > 1:
            plan = plan.merged(group, order)
    fused = before - len(_kernels(graph, plan))
    return plan.with_note(f"{fused} pointwise/reduction kernels fused into chains") \
        if fused else plan


def _members(plan: KernelPlan, name: str) -> set[str]:
    """The nodes of ``name``'s kernel group in ``plan`` (itself alone when ungrouped)."""
    head = plan.group_of(name)
    return set(plan.groups[head]) if head else {name}


def _ready(graph: Graph, order: dict[str, int], group: set[str]) -> bool:
    """Every input of the group comes from a node before its first member (no cycle)."""
    first = min(order[m] for m in group)
    for m in group:
        op = node(graph, m)
        for t in op.inputs:
            q = source_through_views(graph, op, t)
            if q is not None and q.name not in group and order[q.name] > first:
                return False
    return True


def _producer_groups(graph: Graph, plan: KernelPlan, locked, n: OpNode,
                     group: set[str]) -> list[set[str]]:
    """The fusible groups producing ``n``'s inputs (through views), each once."""
    candidates: list[set[str]] = []
    for t in n.inputs:
        p = source_through_views(graph, n, t)
        if p is None or p.name in locked or p.name in plan.free or p.name in group:
            continue
        theirs = _members(plan, p.name)
        if all(fusible(node(graph, m)) for m in theirs) and theirs not in candidates:
            candidates.append(theirs)
    return candidates


def _grown(graph: Graph, order: dict[str, int], group: set[str],
           candidates: list[set[str]]) -> set[str]:
    """``group`` with all its producer groups if that keeps one reduction and no cycle, else
    with each producer group that does, one at a time."""
    union = group.union(*candidates)
    if candidates and _reductions(graph, union) <= 1 and _ready(graph, order, union):
        return union
    for theirs in candidates:
        trial = group | theirs
        if _reductions(graph, trial) <= 1 and _ready(graph, order, trial):
            group = trial
    return group


#: TensorRT's Myelin backend fuses pointwise and normalisation chains by the same rule.
register_pattern("pointwise-chains")(inductor_chains)


def _kernels(graph: Graph, plan: KernelPlan) -> set[str]:
    """Kernel identities (group heads or lone nodes) of the plan."""
    return {plan.group_of(n.name) or n.name for n in graph.ops()
            if launches(n) and n.name not in plan.free}
