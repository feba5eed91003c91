"""Per-node checks of a parsed model that ONNX shape inference (non-strict) lets through.

- Required inputs: every formal input an ONNX schema marks required (``Single``, or the first
  of a ``Variadic`` list) must be given a non-empty tensor name; a ``Cast`` with input ``""`` or
  a ``Shape`` without inputs cannot run, and its outputs would be silently untyped.
- Initializer types: an initializer read where the op's schema does not allow its element type
  (a string tensor as ``Reshape``'s shape).
- Attribute ranges (``ATTRIBUTE_RULES``): values the cost rules would otherwise misread, e.g.
  ``Conv group=0`` (costed as ``group=1``).

Each problem raises ModelImportError naming the node.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import GraphProto, NodeProto
from onnx.defs import OpSchema

from roofcast.graph_import.errors import ModelImportError

_ONNX_DOMAINS = ("", "ai.onnx")


def check_nodes(graph: GraphProto, opsets: dict[str, int]) -> None:
    """Required inputs present, initializer inputs of a type the op accepts, and attributes in
    range for every top-level node."""
    init_types = {t.name: t.data_type for t in graph.initializer}
    for index, node in enumerate(graph.node):
        domain = "" if node.domain == "ai.onnx" else node.domain
        schema = _schema(node.op_type, domain, opsets.get(domain, 1))
        if schema is not None:
            _check_required_inputs(node, index, schema)
            _check_initializer_types(node, index, schema, init_types)
        if domain in _ONNX_DOMAINS:
            rule = ATTRIBUTE_RULES.get(node.op_type)
            if rule is not None:
                rule(node, index)


def _schema(op_type: str, domain: str, version: int) -> OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except Exception:  # no schema (custom domain, unknown op): nothing to check against
        return None


def _check_required_inputs(node: NodeProto, index: int, schema: OpSchema) -> None:
    given = list(node.input)
    for position, formal in enumerate(schema.inputs):
        option = formal.option
        if option == OpSchema.FormalParameterOption.Optional:
            continue
        if option == OpSchema.FormalParameterOption.Variadic and formal.min_arity == 0:
            continue
        if position >= len(given) or not given[position]:
            raise ModelImportError(
                f"{_label(node, index)} has no tensor for its required input {position} "
                f"({formal.name!r}): the node cannot run; the file is corrupt; re-export it"
            )


def _check_initializer_types(
    node: NodeProto, index: int, schema: OpSchema, init_types: dict[str, int]
) -> None:
    """An initializer read where the schema does not allow its element type (a string tensor
    as Reshape's shape) would be typed ``undefined`` downstream, or read as numbers."""
    formals = list(schema.inputs)
    allowed_by_param = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    for position, name in enumerate(node.input):
        if name not in init_types or not formals:
            continue
        formal = formals[min(position, len(formals) - 1)]
        allowed = allowed_by_param.get(formal.type_str, {formal.type_str})
        found = f"tensor({onnx.TensorProto.DataType.Name(init_types[name]).lower()})"
        if found not in allowed:
            raise ModelImportError(
                f"{_label(node, index)} reads initializer {name!r} of type {found} as its input "
                f"{position} ({formal.name!r}), which accepts {', '.join(sorted(allowed))}: the "
                "file is corrupt; re-export it"
            )


def _label(node: NodeProto, index: int) -> str:
    return f"node {node.name or f'#{index}'!r} ({node.op_type})"


def _int_attr(node: NodeProto, name: str) -> int | None:
    for attr in node.attribute:
        if attr.name == name and attr.type == onnx.AttributeProto.INT:
            return attr.i
    return None


def _group_at_least_one(node: NodeProto, index: int) -> None:
    group = _int_attr(node, "group")
    if group is not None and group < 1:
        raise ModelImportError(
            f"{_label(node, index)} has group={group}: a convolution needs group >= 1 (1 for a "
            "plain convolution, the channel count for a depthwise one); the file is corrupt; "
            "re-export it"
        )


#: op_type -> check(node, index) raising ModelImportError
ATTRIBUTE_RULES: dict[str, Callable[[NodeProto, int], None]] = dict.fromkeys(
    ("Conv", "ConvTranspose", "ConvInteger", "QLinearConv"), _group_at_least_one
)
