"""A ``Graph`` as a JSON-ready dict and back, exactly (the on-disk form of ``graph_cache``).

Each distinct tensor (name, shape, dtype) once, referred to by index; nodes in their order
with their ``OpNode``; edges listed per target node in the order of its
predecessors, which is the order the import added them (``build``), so the rebuilt graph has
the same node, successor and predecessor orders. Values of attributes and constant inputs:
JSON numbers, strings, booleans, null and lists as themselves; a numpy array as
``{"nd": dtype, "shape": [...], "b64": its bytes}``, a numpy scalar as ``{"np": dtype, "v": x}``
(booleans, integers and floats only). ``encode`` returns None for a graph holding anything else
(a subgraph, a complex or object array). ``same_graph`` compares two graphs field by field,
arrays by dtype, shape and values.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np

from roofcast.graph_import.types import Engine, Graph, OpCost, OpNode, TensorInfo

FORMAT = 1
_KINDS = "biuf"  # numpy dtype kinds stored: bool, int, unsigned, float


class UnencodableError(ValueError):
    """A value the cache does not store."""


def encode(graph: Graph) -> dict[str, Any] | None:
    """``graph`` as a JSON-ready dict, or None when it holds a value the codec does not store."""
    g = graph.nx_graph
    tensors: dict[tuple, int] = {}
    ref = _tensor_table(tensors)
    try:
        nodes = [_op(g.nodes[n]["op"], ref) for n in g.nodes]
        edges = [[u, v, ref(d["tensor"]), [ref(t) for t in d["tensors"]]]
                 for v in g.nodes for u, d in ((u, g.edges[u, v]) for u in g.pred[v])]
        inputs, outputs = [ref(t) for t in graph.inputs], [ref(t) for t in graph.outputs]
    except UnencodableError:
        return None
    if any(set(g.nodes[n]) != {"op"} for n in g.nodes) or any(
            set(d) != {"tensor", "tensors"} for _, _, d in g.edges(data=True)):
        return None
    return {
        "format": FORMAT, "name": graph.name, "tensors": [list(t) for t in tensors],
        "nodes": nodes, "edges": edges, "inputs": inputs, "outputs": outputs,
        "params": graph.params, "weight_bytes": graph.weight_bytes, "opset": graph.opset,
        "unsupported": graph.unsupported, "unresolved": graph.unresolved,
        "unbound_dims": list(graph.unbound_dims), "dims": dict(graph.dims),
        "skeleton": base64.b64encode(graph.skeleton).decode("ascii"),
    }


def decode(doc: dict[str, Any]) -> Graph:
    """The ``Graph`` of an ``encode`` dict; raises ValueError/KeyError/TypeError on a bad one."""
    if doc["format"] != FORMAT:
        raise ValueError(f"cache format {doc['format']!r}, not {FORMAT}")
    table = [_tensor_back(t) for t in doc["tensors"]]

    def tensor(i: int | None) -> TensorInfo | None:
        return None if i is None else table[_index(i)]

    g = nx.DiGraph()
    for fields in doc["nodes"]:
        op = _op_back(fields, tensor)
        if op.name in g:
            raise ValueError(f"node {op.name!r} twice")
        g.add_node(op.name, op=op)
    for u, v, t, ts in doc["edges"]:
        if u not in g or v not in g:
            raise ValueError(f"edge {u!r} -> {v!r} names no node")
        g.add_edge(u, v, tensor=tensor(t), tensors=tuple(tensor(x) for x in ts))
    nx.freeze(g)
    return Graph(
        name=_str(doc["name"]), nx_graph=g,
        inputs=tuple(tensor(t) for t in doc["inputs"]),
        outputs=tuple(tensor(t) for t in doc["outputs"]),
        params=int(doc["params"]), weight_bytes=int(doc["weight_bytes"]),
        opset=int(doc["opset"]),
        unsupported={_str(k): int(v) for k, v in doc["unsupported"].items()},
        unresolved={_str(k): _str(v) for k, v in doc["unresolved"].items()},
        unbound_dims=tuple(_str(d) for d in doc["unbound_dims"]),
        dims={_str(k): int(v) for k, v in doc["dims"].items()},
        skeleton=base64.b64decode(doc["skeleton"], validate=True),
    )


def same_graph(a: Graph, b: Graph, text_b: str | None = None) -> bool:
    """Whether two graphs are equal in every field, value type, node, edge and order: the same
    successor and predecessor orders and the same encoded text (which tells an int from a
    float, and an array's dtype, shape and bytes). ``text_b``: ``encoded_text(b)`` if known."""
    ga, gb = a.nx_graph, b.nx_graph
    if list(ga) != list(gb) or any(list(ga.succ[n]) != list(gb.succ[n])
                                   or list(ga.pred[n]) != list(gb.pred[n]) for n in ga):
        return False
    text_a = encoded_text(a)
    return text_a is not None and text_a == (encoded_text(b) if text_b is None else text_b)


def encoded_text(graph: Graph) -> str | None:
    """``encode(graph)`` as JSON text, or None when it does not encode."""
    doc = encode(graph)
    if doc is None:
        return None
    try:
        return json.dumps(doc, allow_nan=True)
    except (TypeError, ValueError):  # a value json does not write (a numpy integer)
        return None


def _tensor_table(table: dict[tuple, int]) -> Callable[[TensorInfo | None], int | None]:
    """A function giving each distinct TensorInfo its index in ``table`` (None for None)."""
    def ref(t: TensorInfo | None) -> int | None:
        if t is None:
            return None
        entry = (t.name, t.shape, t.dtype)
        found = table.get(entry)
        if found is None:
            if not all(type(d) is int or type(d) is str for d in t.shape):
                raise UnencodableError(f"dim of {t.name!r}")
            found = table[entry] = len(table)
        return found
    return ref


def _tensor_back(t: list[Any]) -> TensorInfo:
    name, shape, dtype = t
    dims = tuple(shape)
    if not all(type(d) is int or type(d) is str for d in dims):
        raise ValueError(f"bad dims {shape!r} in a cached graph")
    return TensorInfo(_str(name), dims, _str(dtype))


def _index(i: Any) -> int:
    return i if type(i) is int else _bad(i)


def _op(op: OpNode, ref: Callable[[TensorInfo | None], int | None]) -> dict[str, Any]:
    cost = op.cost
    return {
        "name": op.name, "op_type": op.op_type, "domain": op.domain,
        "inputs": [ref(t) for t in op.inputs], "outputs": [ref(t) for t in op.outputs],
        "attrs": {k: _value(v) for k, v in op.attrs.items()},
        "cost": None if cost is None else [_value(x) for x in (
            cost.flops, cost.bytes_read, cost.bytes_written, cost.weight_bytes)]
        + [cost.engine.value],
        "weight_inputs": sorted(op.weight_inputs),
        "const_inputs": {k: _value(v) for k, v in op.const_inputs.items()},
        "constant_folded": op.constant_folded,
    }


def _op_back(d: dict[str, Any], tensor: Callable[[Any], TensorInfo | None]) -> OpNode:
    cost = d["cost"]
    return OpNode(
        name=_str(d["name"]), op_type=_str(d["op_type"]), domain=_str(d["domain"]),
        inputs=tuple(tensor(t) for t in d["inputs"]),
        outputs=tuple(tensor(t) for t in d["outputs"]),
        attrs={_str(k): _value_back(v) for k, v in d["attrs"].items()},
        cost=None if cost is None else OpCost(*(_number(x) for x in cost[:4]), Engine(cost[4])),
        weight_inputs=frozenset(_str(w) for w in d["weight_inputs"]),
        const_inputs={_str(k): _value_back(v) for k, v in d["const_inputs"].items()},
        constant_folded=bool(d["constant_folded"]),
    )


def _value(v: Any) -> Any:
    """An attribute or constant value in JSON form (module docstring)."""
    if isinstance(v, np.ndarray | np.generic):
        if v.dtype.kind not in _KINDS:
            raise UnencodableError(f"dtype {v.dtype}")
        if isinstance(v, np.generic):
            return {"np": v.dtype.str, "v": v.item()}
        data = np.ascontiguousarray(v).tobytes()
        return {"nd": v.dtype.str, "shape": list(v.shape), "b64": base64.b64encode(data).decode()}
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list):
        return [_value(x) for x in v]
    raise UnencodableError(type(v).__name__)


def _value_back(v: Any) -> Any:
    if isinstance(v, list):
        return [_value_back(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "nd" in v:
        dtype = np.dtype(v["nd"])
        if dtype.kind not in _KINDS:
            raise ValueError(f"dtype {dtype}")
        data = base64.b64decode(v["b64"], validate=True)
        return np.frombuffer(data, dtype=dtype).reshape([int(s) for s in v["shape"]]).copy()
    dtype = np.dtype(v["np"])
    if dtype.kind not in _KINDS:
        raise ValueError(f"dtype {dtype}")
    return dtype.type(v["v"])


def _number(x: Any) -> Any:
    v = _value_back(x)
    return v if isinstance(v, int | float | np.number) and not isinstance(v, bool) else _bad(v)


def _str(x: Any) -> str:
    return x if isinstance(x, str) else _bad(x)


def _bad(x: Any) -> Any:
    raise ValueError(f"unexpected value {x!r} in a cached graph")
