"""``epilogue``: elementwise / activation / bias / normalisation chains merged into their
producer (ONNX Runtime's and TensorRT's epilogue fusions).

A node ``c`` joins the group of its producer ``p`` when ``c`` is a vector-engine op of a
``FUSIBLE_CONSUMER_FAMILIES`` family, has one computing producer (weights, inputs, constants and
folded shape maths do not count) — or two when the fused-into group is headed by a
``RESIDUAL_PRODUCER_FAMILIES`` op (conv + residual add) —, ``p`` is a non-view op of a
``FUSION_PRODUCER_FAMILIES`` family, and ``p``'s outputs are read only by ``c`` (or, under a conv
head, by nodes inside the group: the SiLU diamond). Chains grow transitively (Conv -> BN ->
Relu is one group). Pricing (one launch, summed FLOPs, external bytes): ``predictor.fusion``.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.runtimes.rules_epilogue).
"""

from __future__ import annotations

from roofcast.graph_import.costs.registry import op_family
from roofcast.graph_import.types import Engine, Graph, OpNode
from roofcast.predictor.runtimes.patterns import KernelPlan, register_pattern
from roofcast.predictor.runtimes.rules_graph import topo_order

FUSIBLE_CONSUMER_FAMILIES: frozenset[str] = frozenset({"elementwise", "normalization"})
FUSION_PRODUCER_FAMILIES: frozenset[str] = frozenset(
    {"matmul", "conv", "elementwise", "normalization", "attention"}
)
#: group heads that also take a second computed tensor into their epilogue (residual add).
RESIDUAL_PRODUCER_FAMILIES: frozenset[str] = frozenset({"conv"})


def fusion_groups(graph: Graph) -> dict[str, list[str]]:
    """Group head -> member node names (head first, topological order), groups of >= 2 only."""
    g = graph.nx_graph
    model_outputs = {t.name for t in graph.outputs}
    head_of: dict[str, str] = {}
    groups: dict[str, list[str]] = {}
    for node in graph.ops():
        preds = computing_producers(graph, node.name)
        if not _fusible_consumer(node) or not 1 <= len(preds) <= 2:
            continue
        for pred in preds:
            producer: OpNode = g.nodes[pred]["op"]
            head = head_of.get(producer.name, producer.name)
            residual_head = op_family(g.nodes[head]["op"]) in RESIDUAL_PRODUCER_FAMILIES
            if len(preds) == 2 and not residual_head:
                continue
            if not _fusible_producer(producer):
                continue
            others = set(g.successors(producer.name)) - {node.name}
            if others and not (residual_head
                               and _closes_diamond(g, node.name, others, head, head_of)):
                continue
            if any(t.name in model_outputs for t in producer.outputs):
                continue
            head_of[node.name] = head
            groups.setdefault(head, [head]).append(node.name)
            break
    return groups


def _closes_diamond(g, name: str, others: set[str], head: str, head_of: dict[str, str]) -> bool:
    """True when every other consumer of the producer also reads ``name``'s output, or is
    itself already in ``head``'s group: ``x * sigmoid(x)`` (SiLU/Swish) after a conv, where the
    conv output feeds the Sigmoid and the Mul, and the Mul closes the diamond."""
    readers_of_name = set(g.successors(name))
    return all(o in readers_of_name or head_of.get(o) == head for o in others)


def computing_producers(graph: Graph, name: str) -> list[str]:
    """Producers of node ``name`` that run at inference time: not ``Constant``-like free nodes
    and not shape computations folded at import (``OpNode.constant_folded``)."""
    g = graph.nx_graph
    out = []
    for p in g.predecessors(name):
        op: OpNode = g.nodes[p]["op"]
        if op.constant_folded or (op.cost is not None and op.cost.engine == Engine.FREE
                                  and not op.inputs):
            continue
        out.append(p)
    return out


def _fusible_consumer(node: OpNode) -> bool:
    return (
        node.cost is not None
        and node.cost.engine == Engine.VECTOR
        and op_family(node) in FUSIBLE_CONSUMER_FAMILIES
    )


def _fusible_producer(node: OpNode) -> bool:
    return (
        node.cost is not None
        and node.cost.engine != Engine.FREE
        and op_family(node) in FUSION_PRODUCER_FAMILIES
    )


@register_pattern("epilogue")
def epilogue(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """Merge each epilogue chain (``fusion_groups``) into its producer's group; a chain stops
    at the first member already in a locked group (fused attention)."""
    order = topo_order(graph)
    locked = plan.locked()
    count = 0
    for members in fusion_groups(graph).values():
        kept = []
        for m in members:
            if m in locked:
                break
            if m not in plan.free:
                kept.append(m)
        if len(kept) > 1:
            plan = plan.merged(kept, order)
            count += len(kept) - 1
    return plan.with_note(f"{count} epilogue nodes fused into their producers") if count else plan
