"""Hand-built Graph objects for the graph-level tests (costs given explicitly, so expected values
are plain arithmetic independent of the cost rules)."""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from graph_import.types import Engine, Graph, OpCost, OpNode, TensorInfo


def t(name: str, *shape: int, dtype: str = "float") -> TensorInfo:
    return TensorInfo(name, tuple(shape), dtype)


def op(name: str, op_type: str, inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo],
       flops: float = 0.0, engine: Engine = Engine.VECTOR, weights: Sequence[str] = (),
       cost: OpCost | None = None) -> OpNode:
    """An OpNode whose cost is: ``flops``, all distinct inputs read, all outputs written."""
    if cost is None:
        ins = {x.name: x for x in inputs}
        read = float(sum(x.nbytes for x in ins.values()))
        wb = float(sum(x.nbytes for x in ins.values() if x.name in weights))
        cost = OpCost(float(flops), read, float(sum(x.nbytes for x in outputs)), wb, engine)
    return OpNode(name=name, op_type=op_type, domain="", inputs=tuple(inputs),
                  outputs=tuple(outputs), cost=cost, weight_inputs=frozenset(weights))


def graph(nodes: Sequence[OpNode], inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo],
          name: str = "g", dims: dict[str, int] | None = None) -> Graph:
    g = nx.DiGraph()
    producer = {}
    for n in nodes:
        g.add_node(n.name, op=n)
        for o in n.outputs:
            producer[o.name] = n.name
    for n in nodes:
        for x in n.inputs:
            if x is not None and x.name in producer:
                g.add_edge(producer[x.name], n.name, tensor=x)
    weights = {w for n in nodes for w in n.weight_inputs}
    wts = {x.name: x for n in nodes for x in n.inputs if x is not None and x.name in weights}
    return Graph(name=name, nx_graph=g, inputs=tuple(inputs), outputs=tuple(outputs),
                 params=sum(x.numel for x in wts.values()),
                 weight_bytes=sum(x.nbytes for x in wts.values()), opset=17, dims=dims or {})
