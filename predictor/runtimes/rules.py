"""The registered kernel-mapping patterns (``patterns.register_pattern``); see each docstring."""

from __future__ import annotations

from roofcast.graph_import.types import Graph
from roofcast.predictor.runtimes.patterns import KernelPlan, register_pattern


@register_pattern("epilogue")
def epilogue(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Elementwise / activation / bias / normalisation chains merged into their producer
    (``predictor.fusion.fusion_groups``: the rule and its measured basis are documented there)."""
    from roofcast.predictor.fusion import fusion_groups

    groups = {h: tuple(ms) for h, ms in fusion_groups(graph).items()}
    return KernelPlan(groups={**plan.groups, **groups}, free=plan.free)
