"""One-node ONNX models for the cost-rule tests, imported through ``graph_import.import_model``.

``cost("Add", inputs=[f32("a", 2, 3), f32("b", 3)], outputs=[f32("y", 2, 3)])`` builds a
one-node model (inputs that are in ``initializers`` become weights), imports it from bytes and
returns the node's OpCost. Tests write expected values as arithmetic next to the call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from roofcast.graph_import import import_model
from roofcast.graph_import.costs import cost_of
from roofcast.graph_import.types import Graph, OpCost, OpNode, TensorInfo

OPSET = 21
MS_DOMAIN = "com.microsoft"

#: Op types exercised by the tests (filled by ``cost``; the contract test compares it with
#: the registry after all test modules ran — see test_contract.py).
COVERED: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class T:
    """A tensor spec: name, ONNX element type, shape (None = let shape inference decide)."""

    name: str
    elem_type: int
    shape: tuple[int, ...] | None


def f32(name: str, *shape: int) -> T:
    return T(name, TensorProto.FLOAT, tuple(shape))


def f16(name: str, *shape: int) -> T:
    return T(name, TensorProto.FLOAT16, tuple(shape))


def i64(name: str, *shape: int) -> T:
    return T(name, TensorProto.INT64, tuple(shape))


def i32(name: str, *shape: int) -> T:
    return T(name, TensorProto.INT32, tuple(shape))


def u8(name: str, *shape: int) -> T:
    return T(name, TensorProto.UINT8, tuple(shape))


def i8(name: str, *shape: int) -> T:
    return T(name, TensorProto.INT8, tuple(shape))


def boolean(name: str, *shape: int) -> T:
    return T(name, TensorProto.BOOL, tuple(shape))


def out(name: str, elem_type: int = TensorProto.FLOAT) -> T:
    """An output whose shape shape inference must find."""
    return T(name, elem_type, None)


def one_node_model(
    op_type: str,
    inputs: Sequence[T | None],
    outputs: Sequence[T],
    attrs: Mapping[str, Any] | None = None,
    initializers: Mapping[str, np.ndarray] | None = None,
    domain: str = "",
    opset: int = OPSET,
) -> bytes:
    """Serialized model with one ``op_type`` node. ``None`` in ``inputs`` = omitted optional
    input; inputs named in ``initializers`` are initializers (weights), others graph inputs."""
    inits = dict(initializers or {})
    graph_inputs = [
        helper.make_tensor_value_info(t.name, t.elem_type, list(t.shape or ()))
        for t in inputs
        if t is not None and t.name not in inits
    ]
    graph_outputs = [
        helper.make_tensor_value_info(
            t.name, t.elem_type, None if t.shape is None else list(t.shape)
        )
        for t in outputs
    ]
    node = helper.make_node(
        op_type,
        ["" if t is None else t.name for t in inputs],
        [t.name for t in outputs],
        name="node",
        domain=domain,
        **dict(attrs or {}),
    )
    graph = helper.make_graph(
        [node],
        "one_node",
        graph_inputs,
        graph_outputs,
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model.SerializeToString()


def import_one(op_type: str, *args: Any, **kwargs: Any) -> tuple[Graph, OpNode]:
    """Import a one-node model and return (graph, its only OpNode)."""
    graph = import_model(one_node_model(op_type, *args, **kwargs))
    (node,) = list(graph.ops())
    return graph, node


def cost(op_type: str, *args: Any, **kwargs: Any) -> OpCost:
    """The OpCost of a one-node model; fails the test if the node is unresolved/unsupported."""
    graph, node = import_one(op_type, *args, **kwargs)
    assert not graph.unresolved, graph.unresolved
    assert not graph.unsupported, graph.unsupported
    assert node.cost is not None
    COVERED.add((kwargs.get("domain", ""), op_type))
    if node.constant_folded:
        # every input is a constant, so the import folded the node away (free); the rule
        # under test is what a runtime pays when the inputs are not constants
        return cost_of(node)
    return node.cost


def weights(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    """A zero-filled weight array of ``shape`` and ``dtype`` (values never matter for costs)."""
    return np.zeros(shape, dtype=dtype)


def tensor(name: str, dtype: str, *shape: int) -> TensorInfo:
    """A TensorInfo for ``direct_cost``."""
    return TensorInfo(name, tuple(shape), dtype)


def direct_node(
    op_type: str,
    inputs: Sequence[TensorInfo | None],
    outputs: Sequence[TensorInfo],
    attrs: Mapping[str, Any] | None = None,
    domain: str = "",
    weight_inputs: Sequence[str] = (),
) -> OpNode:
    """An OpNode built directly, for cases import cannot make concrete (data-dependent output
    shapes such as NonZero's) or malformed nodes that shape inference would reject first."""
    return OpNode(
        name="node",
        op_type=op_type,
        domain=domain,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        attrs=dict(attrs or {}),
        weight_inputs=frozenset(weight_inputs),
    )


def direct_cost(op_type: str, *args: Any, **kwargs: Any) -> OpCost:
    """``cost_of`` of a directly built OpNode (see ``direct_node``); must be costed."""
    result = cost_of(direct_node(op_type, *args, **kwargs))
    assert result is not None
    COVERED.add((kwargs.get("domain", ""), op_type))
    return result
