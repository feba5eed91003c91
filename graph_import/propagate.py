"""Node-by-node shape propagation past what whole-graph ONNX inference cannot type.

- ``propagate_pass``: ops without an ONNX schema (onnxruntime contrib ops) get output types from
  ``contrib_shapes.SHAPE_RULES``; ONNX ops downstream of a tensor typed this way are re-inferred
  at once, node by node (``onnx.shape_inference.infer_node_outputs``), so a chain of contrib ops
  resolves in one sweep rather than one whole-graph round each.
- ``explain_failure``: why ONNX inference gives a node with concrete inputs no concrete outputs.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import GraphProto, TensorProto, numpy_helper

from roofcast.graph_import.contrib_shapes import SHAPE_RULES, ContribShapeError
from roofcast.graph_import.fold import attribute_values
from roofcast.graph_import.shape_types import (
    LazyShapes,
    ShapeResult,
    TensorShape,
    elem_type,
    onnx_knows,
    value_info_shape,
)


def propagate_pass(
    graph: GraphProto, tensors: LazyShapes, values: dict[str, np.ndarray], opsets: dict[str, int]
) -> set[str]:
    """One forward sweep past the ops ONNX inference cannot type.

    Ops without an ONNX schema get their outputs from ``contrib_shapes.SHAPE_RULES``; ONNX ops
    downstream of a tensor typed in this sweep are re-inferred at once, node by node
    (``onnx.shape_inference.infer_node_outputs``), so a chain of N contrib ops resolves in one
    sweep rather than N whole-graph rounds. New types are written to the graph's value_info
    (or its outputs); returns the newly typed tensor names.
    """
    typed: dict[str, TensorShape] = {}

    def shape_of(name: str) -> TensorShape | None:
        return typed.get(name) or tensors.get(name)

    for node in graph.node:
        domain = "" if node.domain == "ai.onnx" else node.domain
        rule = SHAPE_RULES.get((domain, node.op_type))
        if rule is None and not (typed and any(i in typed for i in node.input)):
            continue  # whole-graph inference already had every chance at this node
        outs = [o for o in node.output if o]
        if not outs or all((t := shape_of(o)) is not None and t.is_concrete for o in outs):
            continue
        ins = [shape_of(i) if i else None for i in node.input]
        if any(
            i and (t is None or not t.is_concrete) for i, t in zip(node.input, ins, strict=True)
        ):
            continue
        if rule is not None:
            result = _apply_rule(rule, node, ins)
        elif onnx_knows(node.op_type, domain):
            result = _infer_node(node, domain, ins, values, opsets)
        else:
            continue
        for name, shape in result.items():
            known = shape_of(name)
            if shape is not None and shape.is_concrete and not (known and known.is_concrete):
                typed[name] = shape
    if typed:
        _write_types(graph, typed)
    return set(typed)


def _apply_rule(
    rule, node: onnx.NodeProto, ins: list[TensorShape | None]
) -> dict[str, TensorShape]:
    in_dims = [t.dims if t is not None else None for t in ins]
    try:
        specs = rule(attribute_values(node), in_dims)
    except (ContribShapeError, KeyError, IndexError, ValueError, TypeError, ZeroDivisionError):
        return {}
    first = ins[0].dtype if ins and ins[0] is not None else "undefined"
    out: dict[str, TensorShape] = {}
    for name, spec in zip(node.output, specs, strict=False):
        if name and spec is not None:
            dims, dtype = spec
            if (dtype or first) != "undefined":
                out[name] = TensorShape(dtype or first, tuple(int(d) for d in dims))
    return out


def _infer_node(
    node: onnx.NodeProto,
    domain: str,
    ins: list[TensorShape | None],
    values: dict[str, np.ndarray],
    opsets: dict[str, int],
) -> dict[str, TensorShape]:
    if any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute
    ):
        return {}  # If/Loop/Scan bodies need the whole-graph inference context
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, node, _input_types(node, ins), input_data=_input_data(node, values),
            opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in opsets.items()],
        )
    except Exception:  # onnx raises InferenceError, SchemaError, RuntimeError...
        return {}
    out: dict[str, TensorShape] = {}
    for name, type_proto in inferred.items():
        vi = onnx.helper.make_value_info(name, type_proto)
        shape = value_info_shape(vi)
        if shape is not None:
            out[name] = shape
    return out


def _write_types(graph: GraphProto, typed: dict[str, TensorShape]) -> None:
    """Set value_info (graph outputs carry their own declared types) for each typed tensor."""
    where = {v.name: ("v", i) for i, v in enumerate(graph.value_info)}
    where.update({v.name: ("o", i) for i, v in enumerate(graph.output)})
    for name, shape in typed.items():
        vi = onnx.helper.make_tensor_value_info(name, elem_type(shape.dtype), list(shape.dims))
        kind, index = where.get(name, ("new", -1))
        if kind == "o":
            graph.output[index].CopyFrom(vi)
        elif kind == "v":
            graph.value_info[index].CopyFrom(vi)
        else:
            graph.value_info.append(vi)


def explain_failure(node: onnx.NodeProto, result: ShapeResult) -> str | None:
    """Why ONNX inference gives a node with concrete inputs no concrete outputs, when it says
    (e.g. ``Incompatible dimensions`` when the bound dims exceed a position table)."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    if not onnx_knows(node.op_type, domain):
        return None
    ins = [result.tensors.get(i) if i else None for i in node.input]
    if any(i and (t is None or not t.is_concrete) for i, t in zip(node.input, ins, strict=True)):
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, result.opsets.get(domain, 1), domain)
        onnx.shape_inference.infer_node_outputs(
            schema, node, _input_types(node, ins), input_data=_input_data(node, result.values),
            opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in result.opsets.items()],
        )
    except Exception as exc:  # the error is the explanation
        return str(exc).strip().splitlines()[0][:200]
    return None


def _input_types(node: onnx.NodeProto, ins: list[TensorShape | None]) -> dict[str, onnx.TypeProto]:
    return {
        name: onnx.helper.make_tensor_type_proto(elem_type(t.dtype), list(t.dims))
        for name, t in zip(node.input, ins, strict=True)
        if name and t is not None
    }


def _input_data(node: onnx.NodeProto, values: dict[str, np.ndarray]) -> dict[str, TensorProto]:
    return {
        name: numpy_helper.from_array(values[name], name) for name in node.input if name in values
    }
