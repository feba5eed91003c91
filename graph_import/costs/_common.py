"""Helpers shared by the cost-rule families: byte counting, input checks, elementwise costs.

Byte convention (unfused kernel): every *distinct* input tensor is read once at its own size
(a broadcast input is read at its own, smaller, size; ``Mul(x, x)`` reads ``x`` once) and every
output is written once, at the actual dtype itemsize. ``weight_bytes`` = bytes of the inputs
listed in ``node.weight_inputs`` (initializers); it is part of ``bytes_read``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from roofcast.graph_import.types import Engine, OpCost, OpNode, TensorInfo


class CostRuleError(Exception):
    """A rule cannot cost a node (missing required input, unsupported attribute combination)."""


def tensor_bytes(t: TensorInfo | None) -> int:
    """Bytes of a tensor, 0 for an omitted optional tensor."""
    return 0 if t is None else t.nbytes


def _distinct(tensors: Iterable[TensorInfo | None]) -> list[TensorInfo]:
    seen: set[str] = set()
    out: list[TensorInfo] = []
    for t in tensors:
        if t is None or (t.name and t.name in seen):
            continue
        seen.add(t.name)
        out.append(t)
    return out


def bytes_of(tensors: Iterable[TensorInfo | None]) -> int:
    """Bytes of the distinct, present tensors (each counted once by name)."""
    return sum(t.nbytes for t in _distinct(tensors))


def inputs_bytes(node: OpNode, skip: Iterable[int] = ()) -> int:
    """Bytes of the node's distinct present inputs, except positions in ``skip``."""
    skipped = set(skip)
    return bytes_of(t for i, t in enumerate(node.inputs) if i not in skipped)


def outputs_bytes(node: OpNode) -> int:
    """Bytes of the node's present outputs."""
    return bytes_of(node.outputs)


def weight_bytes(node: OpNode, positions: Iterable[int] | None = None) -> int:
    """Bytes of inputs that are weights (names in ``node.weight_inputs``).

    ``positions`` restricts the count to those input positions (None = all inputs).
    """
    allowed = None if positions is None else set(positions)
    return bytes_of(
        t
        for i, t in enumerate(node.inputs)
        if t is not None
        and t.name in node.weight_inputs
        and (allowed is None or i in allowed)
    )


def need_input(node: OpNode, i: int, what: str) -> TensorInfo:
    """The i-th input, or CostRuleError naming the missing ``what``."""
    t = node.input(i)
    if t is None:
        raise CostRuleError(
            f"{node.op_type} node {node.name!r}: required input {i} ({what}) is missing; "
            "fix the model so the node has all inputs the ONNX spec requires"
        )
    return t


def need_output(node: OpNode, i: int = 0) -> TensorInfo:
    """The i-th output, or CostRuleError when absent."""
    t = node.outputs[i] if i < len(node.outputs) else None
    if t is None:
        raise CostRuleError(f"{node.op_type} node {node.name!r}: output {i} is missing")
    return t


def need_rank(node: OpNode, t: TensorInfo, min_rank: int, what: str) -> None:
    """CostRuleError unless ``t`` has at least ``min_rank`` dimensions."""
    if len(t.shape) < min_rank:
        raise CostRuleError(
            f"{node.op_type} node {node.name!r}: {what} {t.name!r} has shape {t.shape}, "
            f"expected rank >= {min_rank}"
        )


def const_value(node: OpNode, i: int):
    """The known constant value (numpy array) of input i, or None."""
    t = node.input(i)
    if t is None:
        return None
    return node.const_inputs.get(t.name)


def prod(dims: Iterable[int]) -> int:
    """Product of integer dims (1 for none)."""
    return math.prod(int(d) for d in dims)


def io_cost(node: OpNode, flops: float, engine: Engine) -> OpCost:
    """OpCost with ``flops`` and the standard unfused traffic: all inputs read, outputs written."""
    return OpCost(
        flops=float(flops),
        bytes_read=float(inputs_bytes(node)),
        bytes_written=float(outputs_bytes(node)),
        weight_bytes=float(weight_bytes(node)),
        engine=engine,
    )


def per_output_element(node: OpNode, flops_per_element: float, engine: Engine) -> OpCost:
    """Elementwise cost: ``flops_per_element`` × numel(output 0) plus standard traffic.

    Broadcasting is covered because output 0 has the broadcast shape while each input is read
    at its own size.
    """
    out = need_output(node, 0)
    return io_cost(node, flops_per_element * out.numel, engine)


def attr_str(node: OpNode, name: str, default: str) -> str:
    """A string attribute (bytes decoded as UTF-8), or ``default`` when unset."""
    value = node.attrs.get(name, default)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def attr_int(node: OpNode, name: str, default: int) -> int:
    """An integer attribute, or ``default`` when unset."""
    value = node.attrs.get(name)
    return default if value is None else int(value)


def attr_float(node: OpNode, name: str, default: float) -> float:
    """A float attribute, or ``default`` when unset."""
    value = node.attrs.get(name)
    return default if value is None else float(value)


def attr_ints(node: OpNode, name: str) -> tuple[int, ...] | None:
    """An ints attribute as a tuple, or None when unset."""
    value = node.attrs.get(name)
    return None if value is None else tuple(int(v) for v in value)


def partial_read_cost(
    node: OpNode, selected: dict[int, int], flops: float, engine: Engine
) -> OpCost:
    """OpCost for ops that read only part of some inputs (gathers, slices, embedding lookups).

    ``selected`` maps input position -> elements actually read from it (capped at its size);
    other distinct inputs are read whole. Weight bytes follow the same partial counts.
    """
    read = 0
    weights = 0
    seen: set[str] = set()
    for i, t in enumerate(node.inputs):
        if t is None or t.name in seen:
            continue
        seen.add(t.name)
        n = min(selected[i], t.numel) if i in selected else t.numel
        nbytes = n * t.itemsize_bytes
        read += nbytes
        if t.name in node.weight_inputs:
            weights += nbytes
    return OpCost(
        flops=float(flops),
        bytes_read=float(read),
        bytes_written=float(outputs_bytes(node)),
        weight_bytes=float(weights),
        engine=engine,
    )
