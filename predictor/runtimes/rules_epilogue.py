"""``epilogue``: elementwise / activation / bias / normalisation chains merged into their
producer (ONNX Runtime's and TensorRT's epilogue fusions).

Rule (what ONNX Runtime's and TensorRT's epilogue fusions do, simplified to one rule):
a node ``c`` is merged into the group of its producer ``p`` when

* ``c``'s family is in ``FUSIBLE_CONSUMER_FAMILIES`` (elementwise incl. activations and bias
  adds, normalisation) and it runs on the vector engine;
* ``c`` has exactly one *computing* producer node (``computing_producers``: other inputs are
  weights, model inputs, ``Constant`` nodes or shape computations folded at import — a Clip's
  min/max from ``Constant`` nodes does not stop Conv+Clip from fusing), or — a *residual
  epilogue* — two, of which the one fused into heads a group of a family in
  ``RESIDUAL_PRODUCER_FAMILIES`` (convolution: ONNX Runtime's CPU NCHWc ``Conv`` with sum,
  cuDNN/TensorRT conv+add+activation); the other tensor is then an extra input of the fused
  kernel. A residual ``Add`` after a MatMul is not fused;
* ``p``'s family is in ``FUSION_PRODUCER_FAMILIES`` and is not a free (view) op;
* every output of ``p`` is consumed by ``c`` only and none is a model output — or, when the
  group's head is a convolution, the other consumers of ``p`` also read ``c``'s output or are
  in the group already: the diamond ``x · sigmoid(x)`` (SiLU/Swish) after a conv is one
  epilogue, the conv output read inside the group only (``internal_traffic``, in
  ``graph_import.fused_traffic``). This is a pricing choice, not ONNX Runtime's kernel
  structure: its CPU provider runs the SiLU as a separate ``QuickGelu`` kernel, and its
  profiler rows (``attrs.ort_kernels`` of the bundled efficientnet_b0 rows) put that kernel
  in one group with the *next* conv or pool. Pricing the diamond as its own elementwise group
  measured worse (``benchmarks/learned_graph_path.py``,
  efficientnet_b0 held out: 18.5 % median end to end, 21.6 % with its input read once, against
  16.2 % as the conv epilogue; batch 1 better, batch 4/16 over-predicted by 15-45 %).

Chains grow transitively: Conv -> BatchNormalization -> Relu is one group headed by the Conv.

How a group is priced (one launch, summed flops, external bytes only): ``predictor.fusion``.
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
