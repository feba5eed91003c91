"""Kernel-mapping patterns: registered functions that say which ONNX nodes a runtime runs as one
kernel, which launch none, and which kernels it adds.

A pattern is ``fn(graph, plan) -> plan``: it reads the imported ``Graph`` and the ``KernelPlan``
built by the patterns before it, and returns a new plan. Profiles name patterns in their TOML
(``patterns``, ``fusion_patterns``); ``register_pattern("name")`` adds one. A new runtime
behaviour is a new registered function, never a branch in an existing one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from roofcast.graph_import.types import Graph


@dataclass(frozen=True)
class KernelPlan:
    """What the runtime launches for a graph, relative to one kernel per costed node.

    ``groups``: head node name -> member node names (head first): one kernel each.
    ``free``: node names that launch no kernel (views, folded pads).
    """

    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    free: frozenset[str] = frozenset()


Pattern = Callable[[Graph, KernelPlan], KernelPlan]
PATTERNS: dict[str, Pattern] = {}


def register_pattern(name: str) -> Callable[[Pattern], Pattern]:
    """Decorator: register ``fn`` as the kernel-mapping pattern ``name``."""
    def deco(fn: Pattern) -> Pattern:
        if name in PATTERNS:
            raise ValueError(f"pattern {name!r} registered twice")
        PATTERNS[name] = fn
        return fn
    return deco


def known_patterns() -> frozenset[str]:
    """Names of every registered pattern."""
    return frozenset(PATTERNS)
