"""The op registry: one :class:`OpSpec` per (domain, ONNX op_type), filled by a decorator.

An entry holds everything roofcast knows about an op type: ``cost`` (``rule(node) -> OpCost``),
``family`` (``workload_schema.FAMILIES``), ``backward`` kind (``BACKWARD_KINDS``, priced by
``predictor.training``), ``gemm_dims`` (``rule(node) -> (batch, M, N, K)``), ``inner_elems``
(elements per row or conv window) and ``non_trainable_inputs``. Adding an op is adding a
decorated cost function in its family module, never an ``if/elif`` branch; registering an op
twice, or a family / backward kind outside the vocabularies, fails at import. Pure view ops are
listed in ``FREE_OPS``; anything neither registered nor free is *unsupported* and reported,
never costed as zero.

Rationale: ``docs/design/module-notes.md`` (roofcast.graph_import.costs.registry).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from roofcast.graph_import.types import OpCost, OpNode
from roofcast.graph_import.workload_schema import FAMILIES

CostRule = Callable[[OpNode], OpCost]
GemmDims = tuple[float, float, float, float]
GemmRule = Callable[[OpNode], GemmDims | None]
InnerRule = Callable[[OpNode], float | None]
T = TypeVar("T")

ONNX_DOMAIN = ""
MS_DOMAIN = "com.microsoft"

#: backward kind -> what its derivative kernels are (functions: ``predictor.training``).
BACKWARD_KINDS: dict[str, str] = {
    "gemm": "one GEMM per operand at inputs 0 and 1 (dX = dY·Wᵀ, dW = Xᵀ·dY), a reduction "
            "per bias",
    "gemm_every_input": "as gemm, every input an operand (Einsum)",
    "whole_layer": "one kernel at 2x the forward FLOPs, re-reading the forward (BPTT, fused "
                   "attention)",
    "elementwise": "one kernel at the forward FLOPs, reading the saved inputs",
    "elementwise_gout_only": "one kernel at the forward FLOPs reading only the output "
                             "gradient (linear ops: Add, Sub, Neg, Sum, Mean)",
    "normalization": "one kernel at 2x the forward FLOPs (two row reductions)",
    "softmax": "dx = y ⊙ (dy − Σ dy ⊙ y): 4 FLOPs per element",
    "reduction": "the gradient broadcast back to the input shape",
    "reduction_saved": "as reduction, also reading input and output (argmax-like masks)",
    "pooling": "the gradient scattered over each window",
    "pooling_saved": "as pooling, also reading x and y (max-pool masks)",
    "data_movement": "the inverse movement, 0 FLOPs on the data engine",
    "data_movement_accumulates": "the inverse movement adding repeated indices (scatter-add)",
    "straight_through": "straight-through estimator: the clip mask",
    "generic": "as elementwise, reading the forward's inputs (ops without a known derivative)",
}
#: what a shape rule (``gemm_dims``, ``inner_elems``) may raise on a node whose shapes do not
#: fit it: the rule then gives no value, never a guess.
SHAPE_ERRORS = (IndexError, ValueError, ZeroDivisionError, TypeError, AttributeError)


@dataclass(frozen=True)
class OpSpec:
    """Everything roofcast knows about one op type (see the module docstring)."""

    op_type: str
    domain: str
    family: str
    cost: CostRule
    backward: str
    gemm_dims: GemmRule | None = None
    inner_elems: InnerRule | None = None
    non_trainable_inputs: tuple[int, ...] = ()


_SPECS: dict[tuple[str, str], OpSpec] = {}


def _norm_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def register(
    *op_types: str,
    family: str,
    backward: str | Callable[[str], str],
    domain: str = ONNX_DOMAIN,
    gemm_dims: GemmRule | None = None,
    inner_elems: InnerRule | None = None,
    non_trainable_inputs: tuple[int, ...] = (),
) -> Callable[[CostRule], CostRule]:
    """Decorator: register ``fn`` as the cost rule of each op type in ``op_types``, with the
    op's family, backward kind (a kind, or ``op_type -> kind`` when they differ within the
    call) and shape rules. RuntimeError on a duplicate, ValueError on an unknown vocabulary."""
    if family not in FAMILIES or family == "other":
        raise ValueError(f"unknown op family {family!r}; use one of {FAMILIES[:-1]}")

    def deco(fn: CostRule) -> CostRule:
        for op_type in op_types:
            key = (_norm_domain(domain), op_type)
            if key in _SPECS:
                old = _SPECS[key].cost
                raise RuntimeError(
                    f"op {domain or 'ai.onnx'}::{op_type} registered twice "
                    f"({old.__module__}.{old.__name__} and {fn.__module__}.{fn.__name__})"
                )
            kind = backward if isinstance(backward, str) else backward(op_type)
            if kind not in BACKWARD_KINDS:
                raise ValueError(f"{op_type}: unknown backward kind {kind!r}; use one of "
                                 f"{tuple(BACKWARD_KINDS)}")
            _SPECS[key] = OpSpec(op_type, key[0], family, fn, kind, gemm_dims, inner_elems,
                                 non_trainable_inputs)
        return fn

    return deco


def spec(op_type: str, domain: str = ONNX_DOMAIN) -> OpSpec | None:
    """The entry of an op, or None when it has none (caller reports it as unsupported)."""
    return _SPECS.get((_norm_domain(domain), op_type))


def spec_of(node: OpNode) -> OpSpec | None:
    """The entry of ``node``'s op type in its domain, or None."""
    return spec(node.op_type, node.domain)


def lookup(op_type: str, domain: str = ONNX_DOMAIN) -> CostRule | None:
    """The cost rule of an op, or None when it has none."""
    entry = spec(op_type, domain)
    return None if entry is None else entry.cost


def op_family(node: OpNode) -> str:
    """The registered family of ``node``'s op type; ``other`` for an op without an entry."""
    entry = spec_of(node)
    return "other" if entry is None else entry.family


def backward_kind(node: OpNode) -> str:
    """The registered backward kind of ``node``'s op type; ``generic`` without an entry."""
    entry = spec_of(node)
    return "generic" if entry is None else entry.backward


def apply_shape_rule(rule: Callable[[OpNode], T | None] | None, node: OpNode) -> T | None:
    """``rule(node)``; None without a rule or when the node's shapes do not fit it
    (``SHAPE_ERRORS``)."""
    if rule is None:
        return None
    try:
        return rule(node)
    except SHAPE_ERRORS:
        return None


def registered_ops() -> dict[tuple[str, str], OpSpec]:
    """A copy of the registry (for contract tests and `roofcast inspect --ops`)."""
    return dict(_SPECS)
