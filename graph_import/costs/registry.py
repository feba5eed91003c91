"""The per-op cost registry: one dict keyed by (domain, ONNX op_type), filled by a decorator.

A cost rule is ``rule(node: OpNode) -> OpCost``; it receives a node whose input/output shapes
are concrete. Adding an op is adding a decorated function in the family module, never an
``if/elif`` branch. Registering the same op twice is an error (caught at import time).

Pure shape/view ops that no kernel executes are listed in ``FREE_OPS`` explicitly; anything
neither registered nor free is *unsupported* and reported, never costed as zero.
"""

from __future__ import annotations

from collections.abc import Callable

from roofcast.graph_import.types import OpCost, OpNode

CostRule = Callable[[OpNode], OpCost]

ONNX_DOMAIN = ""
MS_DOMAIN = "com.microsoft"

_RULES: dict[tuple[str, str], CostRule] = {}


def _norm_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def register(*op_types: str, domain: str = ONNX_DOMAIN) -> Callable[[CostRule], CostRule]:
    """Decorator: register ``fn`` as the cost rule of each op type in ``op_types``."""

    def deco(fn: CostRule) -> CostRule:
        for op_type in op_types:
            key = (_norm_domain(domain), op_type)
            if key in _RULES:
                raise RuntimeError(
                    f"cost rule for {domain or 'ai.onnx'}::{op_type} registered twice "
                    f"({_RULES[key].__module__}.{_RULES[key].__name__} and "
                    f"{fn.__module__}.{fn.__name__})"
                )
            _RULES[key] = fn
        return fn

    return deco


def lookup(op_type: str, domain: str = ONNX_DOMAIN) -> CostRule | None:
    """The rule for an op, or None when it has none (caller reports it as unsupported)."""
    return _RULES.get((_norm_domain(domain), op_type))


def registered_ops() -> dict[tuple[str, str], CostRule]:
    """A copy of the registry (for contract tests and `roofcast inspect --ops`)."""
    return dict(_RULES)
