"""Map the nodes of an ONNX Runtime-optimised graph back to the original graph nodes they cover.

Measured kernel times are per *optimised* node (ORT fuses, folds constants, adds NCHWc
reorders); roofcast's costs are per *original* node. The mapping works on tensors: each
optimised tensor is *anchored* to the original tensor holding the same values (shared names,
``<name>_nchwc``, layout kernels pass their input's anchor on), anchors move forward over nodes
a kernel absorbed, kernels joined by unanchored tensors form one region, and a region covers the
original nodes between its input and output anchors (stopping at constants and other regions):
one group, one row. Layout kernels without a group join their anchor's or consumer's group; a
kernel with neither is reported unattributed, original nodes no kernel covers are listed in
``Mapping.uncovered``.

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.collectors.node_mapping).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from onnx import ModelProto, NodeProto

STATIC_SOURCE_OPS = frozenset({"Constant", "Shape", "Size", "ConstantOfShape"})
# kernels that only change layout: their output holds the input's values (ORT inserts them)
LAYOUT_KERNELS = frozenset({"ReorderInput", "ReorderOutput", "Reshape", "Squeeze", "Unsqueeze",
                            "Flatten", "Identity", "Transpose"})
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
    ``uncovered``: original nodes no kernel computes; ``folded`` those of them that compute
    constants (folded at load time), the rest were eliminated or absorbed without a trace.
    ``unattributed``: optimised node names."""

    groups: list[Group]
    group_of: dict[str, int]
    uncovered: list[str]
    unattributed: list[str] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)


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
    topo = _topological(optimized.graph.node)
    anchor: dict[str, str] = {vi.name: vi.name for vi in optimized.graph.input}
    passthrough = _anchor_outputs(topo, orig, opt_inits, anchor)
    regions = _regions(topo, anchor)  # kernels joined by tensors without an anchor
    built = _Groups()
    deferred = [r for r in regions
                if not _assign_region(r, built, orig, opt_inits, anchor, passthrough)]
    unattributed = _assign_deferred(deferred, built, topo, orig, anchor)
    groups = [Group(tuple(sorted(nodes, key=orig.order.__getitem__)), tuple(kernels))
              for nodes, kernels in zip(built.nodes, built.kernels, strict=True)]
    uncovered = [n.name for n in original.graph.node if n.name not in built.claimed]
    folded = [n for n in uncovered
              if all(o in orig.static for o in orig.nodes[n].output if o)]
    return Mapping(groups, built.group_of, uncovered, unattributed, folded)


@dataclass
class _Groups:
    """Groups under construction: original nodes and kernels of each, and who claimed what."""

    claimed: dict[str, int] = field(default_factory=dict)  # original node -> group
    nodes: list[list[str]] = field(default_factory=list)
    kernels: list[list[str]] = field(default_factory=list)
    group_of: dict[str, int] = field(default_factory=dict)  # kernel -> group

    def add(self, cover: list[str], region: list[NodeProto]) -> None:
        gi = len(self.nodes)
        self.nodes.append(cover)
        self.kernels.append([n.name for n in region])
        for name in cover:
            self.claimed[name] = gi
        for n in region:
            self.group_of[n.name] = gi

    def attach(self, owner: int, region: list[NodeProto]) -> None:
        self.kernels[owner].extend(n.name for n in region)
        for n in region:
            self.group_of[n.name] = owner


def _data_inputs(node: NodeProto, opt_inits: set[str], anchor: dict[str, str],
                 orig: _Original) -> list[str]:
    return [t for t in node.input if t and t not in opt_inits
            and anchor.get(t) not in orig.static]


def _anchor_outputs(topo: list[NodeProto], orig: _Original, opt_inits: set[str],
                    anchor: dict[str, str]) -> set[str]:
    """Steps 1-3: anchor optimised tensors to original ones (in ``anchor``); returns the
    layout kernels that pass their one anchored input through."""
    passthrough: set[str] = set()
    for node in topo:
        outs = [o for o in node.output if o]
        for o in outs:
            if o in orig.tensors:
                anchor[o] = o
        if len(outs) != 1 or outs[0] in anchor:
            continue
        in_anchors = {anchor[t] for t in _data_inputs(node, opt_inits, anchor, orig)
                      if t in anchor}
        hint = _hint(node, orig)
        if hint:
            anchor[outs[0]] = _extend(node, hint, in_anchors, orig)[0]
        elif node.op_type in LAYOUT_KERNELS and len(in_anchors) == 1:
            anchor[outs[0]] = next(iter(in_anchors))
            passthrough.add(node.name)
    return passthrough


def _assign_region(region: list[NodeProto], built: _Groups, orig: _Original,
                   opt_inits: set[str], anchor: dict[str, str], passthrough: set[str]) -> bool:
    """Step 4: a region covering original nodes becomes a group; one writing a tensor of a
    claimed node joins that group. False when neither (the region is deferred)."""
    inside = {o for n in region for o in n.output if o}
    ins = {anchor[t] for n in region for t in _data_inputs(n, opt_inits, anchor, orig)
           if t in anchor and t not in inside}
    outs = {anchor[o] for n in region for o in n.output if o in anchor}
    cover = _cover(sorted(outs - ins), ins, orig, built.claimed)
    if cover:
        built.add(cover, region)
        return True
    owner = None
    if not all(n.name in passthrough for n in region):
        owner = next((built.claimed[orig.producer[t]] for t in sorted(outs)
                      if orig.producer.get(t) in built.claimed), None)
    if owner is None:
        return False
    built.attach(owner, region)
    return True


def _assign_deferred(deferred: list[list[NodeProto]], built: _Groups, topo: list[NodeProto],
                     orig: _Original, anchor: dict[str, str]) -> list[str]:
    """Step 5: a deferred region joins the group of a consumer, else of a producer; returns
    the kernels of regions that join none."""
    position = {n.name: i for i, n in enumerate(topo)}
    consumers: dict[str, list[NodeProto]] = {}
    for n in topo:
        for t in n.input:
            consumers.setdefault(t, []).append(n)
    unattributed = []
    # latest first so chains of such kernels follow their consumers
    for region in sorted(deferred, key=lambda r: -position[r[-1].name]):
        owner = next((built.group_of[c.name] for n in region for o in n.output
                      for c in consumers.get(o, []) if c.name in built.group_of), None)
        if owner is None:
            owner = next((built.claimed[orig.producer[anchor[t]]] for n in region
                          for t in n.input
                          if t in anchor and orig.producer.get(anchor[t]) in built.claimed),
                         None)
        if owner is None:
            unattributed.extend(n.name for n in region)
            continue
        built.attach(owner, region)
    return unattributed


def _regions(topo: list[NodeProto], anchor: dict[str, str]) -> list[list[NodeProto]]:
    """Kernels connected through tensors that have no anchor (one fused computation that ORT
    split, e.g. Reshape -> Gemm -> Reshape), in topological order of their first kernel."""
    parent = list(range(len(topo)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    producer = {o: i for i, n in enumerate(topo) for o in n.output if o}
    for i, n in enumerate(topo):
        for t in n.input:
            if t and t not in anchor and t in producer:
                parent[find(i)] = find(producer[t])
    members: dict[int, list[NodeProto]] = {}
    for i, n in enumerate(topo):
        members.setdefault(find(i), []).append(n)
    return sorted(members.values(), key=lambda r: topo.index(r[0]))


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
