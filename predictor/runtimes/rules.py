"""The registered kernel-mapping patterns (``patterns.register_pattern``). Importing this module
registers them all; each lives in its own module with its rule and sources:

* ``views-free`` (``rules_views``), ``bias-into-gemm`` (``rules_gemm``), ``gelu-erf``
  (``rules_gelu``), ``attention-score-passes`` and ``fused-attention`` (``rules_attention``),
  ``inductor-chains`` / ``pointwise-chains`` (``rules_inductor``), ``epilogue``
  (``rules_epilogue``).

``build_plan(graph, profile, fusion)`` runs a profile's patterns in order; it lives here, above
the pattern modules, so that the registry (``patterns``) imports none of them.
"""

from __future__ import annotations

# imported for their @register_pattern side effects (module imports, not the package's names,
# so the runtimes package __init__ is not re-entered)
import roofcast.predictor.runtimes.rules_attention
import roofcast.predictor.runtimes.rules_epilogue
import roofcast.predictor.runtimes.rules_gelu
import roofcast.predictor.runtimes.rules_gemm
import roofcast.predictor.runtimes.rules_inductor
import roofcast.predictor.runtimes.rules_views  # noqa: F401
from roofcast.graph_import.types import Graph
from roofcast.predictor.runtimes.patterns import PATTERNS, KernelPlan
from roofcast.predictor.runtimes.profile import ExecutionProfile


def known_patterns() -> frozenset[str]:
    """Names of every registered pattern."""
    return frozenset(PATTERNS)


def build_plan(graph: Graph, profile: ExecutionProfile, fusion: bool | None) -> KernelPlan:
    """The kernel plan of ``graph`` under ``profile``: its ``patterns`` then, when ``fusion``
    (None: the profile's ``fusion_default``), its ``fusion_patterns``, in order."""
    plan = KernelPlan(attention_score_passes=profile.attention_score_passes)
    for name in profile.patterns_for(fusion):
        plan = PATTERNS[name](graph, plan)
    return plan
