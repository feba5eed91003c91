"""Map the nodes of an ONNX Runtime-optimised graph back to the original graph nodes they cover.

ORT's optimiser fuses (Conv+Relu -> FusedConv, MatMul+Add -> Gemm, LayerNorm / Gelu / attention
subgraphs -> one contrib op), folds constants, removes no-ops and, at level ``all``, rewrites
convolutions into the NCHWc layout with ``ReorderInput`` / ``ReorderOutput`` nodes between
layouts. Measured kernel times are per *optimised* node; roofcast's costs are per *original*
node. The mapping works on tensors, not on name conventions alone:

1. **Anchors.** Each optimised tensor gets an *anchor*: the original tensor holding the same
   values. Names shared by both graphs anchor to themselves (graph inputs, outputs, and every
   tensor a fused node writes under its original name: a fused node's outputs are the outputs of
   the last original node it covers).
2. **Optimised node without a shared output name** (NCHWc convolutions write fresh tensors):
   its name is tried as a hint — ORT names an NCHWc node ``<original output tensor>_nchwc``,
   other generated nodes ``<original node name>...`` — then, failing that, a one-data-input node
   passes its input's anchor through (layout changes such as ReorderInput keep the values).
3. **Extension.** A node that reads a data input whose anchor is *not* upstream of its anchor
   has absorbed a later original node (the NCHWc Conv's ``Sum`` input is the residual Add): the
   anchor moves forward through the single consumer until every data input is upstream. A node
   whose ``activation`` attribute names an op that has not yet been covered absorbs that
   consumer too.
4. **Covered set.** Walk back from the anchor's producer through the original graph, stopping
   at the anchors of the node's data inputs, at constant tensors (initializers, Constant and
   Shape outputs and what is computed from them only: folded at load time), at graph inputs and
   at nodes another optimised node already covers. The walk collects the original nodes the
   kernel computes.
5. **Kernels without a group of their own** (a node whose anchor another node already covers,
   a ReorderOutput writing the conv's tensor back in NCHW, a ReorderInput feeding a conv) join
   the group of the node that covers their anchor, else of their first consumer's group; one
   with neither stays unattributed, and is reported.

Original nodes no kernel covers are constant-folded or eliminated (Identity, Dropout, ...);
they are listed in ``Mapping.uncovered``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from onnx import ModelProto, NodeProto

STATIC_SOURCE_OPS = frozenset({"Constant", "Shape", "Size", "ConstantOfShape"})
NAME_HINT_SUFFIXES = ("_nchwc",)


@dataclass(frozen=True)
class Group:
    """Original nodes (topological order) computed by one or more optimised kernels."""

    nodes: tuple[str, ...]
    kernels: tuple[str, ...]

    @property
    def name(self) -> str:
        return "+".join(self.nodes)


@dataclass
class Mapping:
    """``group_of``: optimised node name -> index into ``groups`` (absent: unattributed).
    ``uncovered``: original nodes no kernel computes. ``unattributed``: optimised node names."""

    groups: list[Group]
    group_of: dict[str, int]
    uncovered: list[str]
    unattributed: list[str] = field(default_factory=list)


class _Original:
    """Indexes of the original graph."""

    def __init__(self, model: ModelProto) -> None:
        g = model.graph
        self.order = {n.name: i for i, n in enumerate(g.node)}
        self.nodes = {n.name: n for n in g.node}
        self.producer: dict[str, str] = {}
        self.consumers: dict[str, list[str]] = {}
        for n in g.node:
            for t in n.output:
                if t:
                    self.producer[t] = n.name
            for t in n.input:
                if t:
                    self.consumers.setdefault(t, []).append(n.name)
        self.graph_inputs = {vi.name for vi in g.input}
        self.tensors = set(self.producer) | self.graph_inputs | {t.name for t in g.initializer}
        self.static = self._static_tensors(g)

    def _static_tensors(self, g) -> set[str]:
        static = {t.name for t in g.initializer}  # overridable ones too: ORT folds them
        for n in g.node:  # nodes are topologically sorted (load_model guarantees it)
            data = [t for t in n.input if t]
            if n.op_type in STATIC_SOURCE_OPS or all(t in static for t in data):
                static.update(t for t in n.output if t)
        return static

    def upstream(self, tensor: str, limit: set[str]) -> set[str]:
        """Tensors upstream of ``tensor`` (inclusive), not crossing ``limit`` tensors."""
        seen, stack = {tensor}, [tensor]
        while stack:
            t = stack.pop()
            if t in limit and t != tensor:
                continue
            prod = self.producer.get(t)
            if prod is None:
                continue
            for i in self.nodes[prod].input:
                if i and i not in seen:
                    seen.add(i)
                    stack.append(i)
        return seen


def _topological(nodes: Iterable[NodeProto]) -> list[NodeProto]:
    nodes = list(nodes)
    produced = {t for n in nodes for t in n.output if t}
    ready: set[str] = set()
    done: list[NodeProto] = []
    pending = nodes
    while pending:
        rest = []
        for n in pending:
            if all((not t) or t not in produced or t in ready for t in n.input):
                done.append(n)
                ready.update(t for t in n.output if t)
            else:
                rest.append(n)
        if len(rest) == len(pending):  # a cycle cannot happen in ORT output; keep order
            done.extend(rest)
            break
        pending = rest
    return done


def _attr_str(node: NodeProto, name: str) -> str | None:
    for a in node.attribute:
        if a.name == name and a.s:
            return a.s.decode("utf-8", "replace")
    return None


def map_optimized(original: ModelProto, optimized: ModelProto) -> Mapping:
    """Map every node of ``optimized`` (ORT's saved optimised graph) to original nodes.

    ``original`` must be the model ORT was given (same tensor and node names)."""
    orig = _Original(original)
    opt_inits = {t.name for t in optimized.graph.initializer}
    anchor: dict[str, str] = {vi.name: vi.name for vi in optimized.graph.input}
    claimed: dict[str, int] = {}  # original node -> group index
    groups_nodes: list[list[str]] = []
    groups_kernels: list[list[str]] = []
    group_of: dict[str, int] = {}
    deferred: list[NodeProto] = []

    for node in _topological(optimized.graph.node):
        data_inputs = [t for t in node.input
                       if t and t not in opt_inits and anchor.get(t) not in orig.static]
        in_anchors = {anchor[t] for t in data_inputs if t in anchor}
        outs = [o for o in node.output if o]
        matched = [o for o in outs if o in orig.tensors]
        targets = matched or _hint(node, orig)
        if not targets and len(in_anchors) == 1:
            targets = [next(iter(in_anchors))]  # layout change: same values
        if not targets:
            deferred.append(node)
            continue
        if not matched:
            targets = _extend(node, targets, in_anchors, orig)
        for o in outs:
            anchor.setdefault(o, o if o in orig.tensors else targets[0])
        cover = _cover(targets, in_anchors, orig, claimed)
        if cover:
            gi = len(groups_nodes)
            groups_nodes.append(cover)
            groups_kernels.append([node.name])
            for n in cover:
                claimed[n] = gi
            group_of[node.name] = gi
        else:
            owner = next((claimed[orig.producer[t]] for t in targets
                          if orig.producer.get(t) in claimed), None)
            if owner is None:
                deferred.append(node)
            else:
                group_of[node.name] = owner
                groups_kernels[owner].append(node.name)

    unattributed = []
    consumers: dict[str, list[NodeProto]] = {}
    for n in optimized.graph.node:
        for t in n.input:
            consumers.setdefault(t, []).append(n)
    for node in deferred:  # e.g. ReorderInput on a graph input: joins its consumer's group
        owner = next((group_of[c.name] for o in node.output for c in consumers.get(o, [])
                      if c.name in group_of), None)
        if owner is None:
            unattributed.append(node.name)
        else:
            group_of[node.name] = owner
            groups_kernels[owner].append(node.name)

    groups = [Group(tuple(sorted(nodes, key=orig.order.__getitem__)), tuple(kernels))
              for nodes, kernels in zip(groups_nodes, groups_kernels, strict=True)]
    uncovered = [n.name for n in original.graph.node if n.name not in claimed]
    return Mapping(groups, group_of, uncovered, unattributed)


def _hint(node: NodeProto, orig: _Original) -> list[str]:
    """Original tensor named by an optimised node's name (``<tensor>_nchwc``, ``<node>``)."""
    name = node.name
    for suffix in NAME_HINT_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in orig.producer:
            return [name[: -len(suffix)]]
    if name in orig.nodes:
        return [t for t in orig.nodes[name].output if t][:1]
    return []


def _extend(node: NodeProto, targets: list[str], in_anchors: set[str],
            orig: _Original) -> list[str]:
    """Move a single anchor forward over absorbed consumers (module docstring, step 3)."""
    if len(targets) != 1:
        return targets
    t = targets[0]
    for _ in range(8):
        up = orig.upstream(t, in_anchors)
        if in_anchors <= up:
            break
        nxt = _single_consumer(t, orig)
        if nxt is None:
            break
        t = nxt
    activation = _attr_str(node, "activation")
    producer = orig.nodes.get(orig.producer.get(t, ""))
    if activation is not None and producer is not None and producer.op_type != activation:
        cons = orig.consumers.get(t, [])
        if len(cons) == 1 and orig.nodes[cons[0]].op_type == activation:
            t = orig.nodes[cons[0]].output[0]
    return [t]


def _single_consumer(tensor: str, orig: _Original) -> str | None:
    cons = orig.consumers.get(tensor, [])
    if len(cons) != 1:
        return None
    outs = [o for o in orig.nodes[cons[0]].output if o]
    return outs[0] if len(outs) == 1 else None


def _cover(targets: list[str], stop: set[str], orig: _Original, claimed: dict[str, int]
           ) -> list[str]:
    """Original nodes computed between ``stop`` tensors and ``targets`` (step 4)."""
    cover: list[str] = []
    seen: set[str] = set()
    stack = [orig.producer[t] for t in targets if t in orig.producer]
    while stack:
        name = stack.pop()
        if name in seen or name in claimed:
            continue
        seen.add(name)
        cover.append(name)
        for t in orig.nodes[name].input:
            if not t or t in stop or t in orig.static or t in orig.graph_inputs:
                continue
            prod = orig.producer.get(t)
            if prod is not None:
                stack.append(prod)
    return cover
