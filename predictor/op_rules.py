"""A table of per-op-type shape rules: ``rule(node) -> value | None``, one per ONNX op type.

Shared by ``predictor.gemm_dims`` (the GEMM a matrix op runs) and ``predictor.inner_dims``
(the row length / conv window): adding an op is adding a decorated function, a second rule
for an op type is refused, and a rule that trips over an incomplete node (a missing input,
a rank it did not expect) gives None — the caller then has no value, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from roofcast.graph_import.types import OpNode

T = TypeVar("T")
#: what a rule may raise on a node whose shapes do not fit it (the rule then gives no value).
SHAPE_ERRORS = (IndexError, ValueError, ZeroDivisionError, TypeError, AttributeError)


class OpRules(Generic[T]):
    """op type (domain ignored) -> rule; ``name`` labels duplicate-registration errors."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._rules: dict[str, Callable[[OpNode], T | None]] = {}

    def register(self, *op_types: str) -> Callable[[Callable[[OpNode], T | None]],
                                                    Callable[[OpNode], T | None]]:
        """Decorator: ``fn`` becomes the rule of each op type (RuntimeError on a duplicate)."""

        def deco(fn: Callable[[OpNode], T | None]) -> Callable[[OpNode], T | None]:
            for op in op_types:
                if op in self._rules:
                    raise RuntimeError(f"{self.name} rule for {op} registered twice")
                self._rules[op] = fn
            return fn

        return deco

    def ops(self) -> tuple[str, ...]:
        """Op types with a rule, sorted."""
        return tuple(sorted(self._rules))

    def apply(self, node: OpNode) -> T | None:
        """The rule's value for ``node``; None without a rule or when the rule cannot apply."""
        rule = self._rules.get(node.op_type)
        if rule is None:
            return None
        try:
            return rule(node)
        except SHAPE_ERRORS:
            return None
