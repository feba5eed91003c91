"""Graph queries the kernel-mapping patterns share (no pattern logic here)."""

from __future__ import annotations

from roofcast.graph_import.costs.registry import op_family
from roofcast.graph_import.types import Engine, Graph, OpNode, TensorInfo


def topo_order(graph: Graph) -> dict[str, int]:
    """Node name -> its position in the graph's topological order."""
    return {n.name: i for i, n in enumerate(graph.ops())}


def node(graph: Graph, name: str) -> OpNode:
    return graph.nx_graph.nodes[name]["op"]


def launches(n: OpNode) -> bool:
    """Whether the node is a costed kernel of the graph as written (not free, not folded)."""
    return n.cost is not None and n.cost.engine != Engine.FREE and not n.constant_folded


def readers(graph: Graph, name: str, tensor: str) -> list[OpNode]:
    """Nodes reading ``tensor`` (an output of node ``name``)."""
    return [node(graph, c) for c in graph.nx_graph.successors(name)
            if any(t is not None and t.name == tensor for t in node(graph, c).inputs)]


def consumers(graph: Graph, name: str) -> list[OpNode]:
    """Nodes reading any output of node ``name``."""
    return [node(graph, c) for c in graph.nx_graph.successors(name)]


def is_model_output(graph: Graph, n: OpNode) -> bool:
    outs = {t.name for t in graph.outputs}
    return any(t.name in outs for t in n.outputs)


def producer(graph: Graph, n: OpNode, tensor: TensorInfo | None) -> OpNode | None:
    """The node producing ``tensor`` (an input of ``n``), or None for model inputs/weights."""
    if tensor is None:
        return None
    for p in graph.nx_graph.predecessors(n.name):
        op = node(graph, p)
        if any(t.name == tensor.name for t in op.outputs):
            return op
    return None


def is_constant(graph: Graph, n: OpNode, tensor: TensorInfo | None) -> bool:
    """Whether input ``tensor`` of ``n`` is known before the run (a weight, an initializer, a
    ``Constant`` or folded shape computation)."""
    if tensor is None:
        return True
    if tensor.name in n.weight_inputs or tensor.name in n.const_inputs:
        return True
    p = producer(graph, n, tensor)
    if p is None:
        return tensor.name not in {t.name for t in graph.inputs}
    return p.constant_folded or (p.cost is not None and p.cost.engine == Engine.FREE
                                 and all(is_constant(graph, p, t) for t in p.inputs))


def activation_inputs(graph: Graph, n: OpNode) -> list[TensorInfo]:
    """The inputs of ``n`` computed at run time."""
    return [t for t in n.inputs if t is not None and not is_constant(graph, n, t)]


def through_views(graph: Graph, n: OpNode) -> list[OpNode]:
    """The nodes reading ``n``'s outputs, looking through free view nodes (Reshape, ...)."""
    out: list[OpNode] = []
    for c in consumers(graph, n.name):
        if c.cost is not None and c.cost.engine == Engine.FREE and not c.constant_folded:
            out.extend(through_views(graph, c))
        else:
            out.append(c)
    return out


def source_through_views(graph: Graph, n: OpNode, tensor: TensorInfo | None) -> OpNode | None:
    """The computing node behind input ``tensor`` of ``n``, looking back through free views."""
    p = producer(graph, n, tensor)
    while p is not None and p.cost is not None and p.cost.engine == Engine.FREE:
        p = producer(graph, p, p.input(0))
    return p


def family(n: OpNode) -> str:
    return op_family(n)
