"""The registered kernel-mapping patterns (``patterns.register_pattern``). Importing this module
registers them all; each lives in its own module with its rule and sources:

* ``views-free`` (``rules_views``), ``bias-into-gemm`` (``rules_gemm``), ``gelu-erf``
  (``rules_gelu``), ``attention-score-passes`` and ``fused-attention`` (``rules_attention``),
  ``inductor-chains`` (``rules_inductor``), ``epilogue`` (below).
"""

from __future__ import annotations

from roofcast.graph_import.types import Graph
from roofcast.predictor.runtimes import (  # noqa: F401  (imported for their registrations)
    rules_attention,
    rules_gelu,
    rules_gemm,
    rules_inductor,
    rules_views,
)
from roofcast.predictor.runtimes.patterns import KernelPlan, register_pattern
from roofcast.predictor.runtimes.rules_graph import topo_order


@register_pattern("epilogue")
def epilogue(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Elementwise / activation / bias / normalisation chains merged into their producer
    (``predictor.fusion.fusion_groups``: the rule and its measured basis are documented there).
    Members already in a locked group (fused attention) are left out."""
    from roofcast.predictor.fusion import fusion_groups

    order = topo_order(graph)
    locked = plan.locked()
    count = 0
    for members in fusion_groups(graph).values():
        if members[0] in locked:
            continue
        kept = [m for m in members if m not in locked and m not in plan.free]
        if len(kept) > 1:
            plan = plan.merged(kept, order)
            count += len(kept) - 1
    return plan.with_note(f"{count} epilogue nodes fused into their producers") if count else plan
