"""Megatron tensor sharding of any ONNX graph, inferred from the graph (Shoeybi et al. 2019).

``shard_layout(graph, sequence_parallel=False)`` walks the graph in topological order and
decides for every tensor whether the ``tp`` ranks each hold all of it or a slice of one axis,
and for every node whether its work is split, by one rule per op family (``SHARD_RULES``,
``@shard_rule``): weight GEMMs column- or row-parallel (row: an all-reduce, or with sequence
parallelism a reduce-scatter); attention GEMMs split on the heads; elementwise, norms,
softmax, reductions and pooling split unless they reduce over the split axis; views map the
axis through the shape; the largest embedding Gather is vocab-parallel; anything else is
gathered. The layout does not depend on ``tp``: a rank holds ``sharding.split_length`` of a
split axis. Rule details: docs/design/decoder.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from roofcast.graph_import.costs.registry import op_family
from roofcast.graph_import.types import Engine, Graph, OpNode, TensorInfo
from roofcast.predictor.sharding import split_length

#: a tensor's layout: the split axis, or None when every rank holds all of it
Axis = int | None


def split_fraction(length: int, tp: int) -> float:
    """Share of an axis of ``length`` one of ``tp`` ranks holds: ``ceil(length / tp) / length``."""
    if length <= 0:
        return 1.0
    return split_length(length, tp) / length


@dataclass(frozen=True)
class NodeShard:
    """How one node runs on a tensor rank.

    split_len: length of the axis its work is split over (0: replicated work); the work per
        rank is ``split_fraction(split_len, tp)`` of the node's.
    gemm_role: which forward GEMM dim the split divides (``b``, ``m``, ``n``, ``k``), None for
        non-GEMMs or replicated GEMMs.
    rule: what decided (``column``, ``row``, ``split``, ``vocab``, ``replicated``,
        ``gathered``).
    """

    split_len: int = 0
    gemm_role: str | None = None
    rule: str = "replicated"


@dataclass(frozen=True)
class LayoutComm:
    """A collective the layout needs: ``tensor`` (full size, as NCCL counts it) on ``node``."""

    collective: str
    tensor: TensorInfo
    phase: str
    node: str


@dataclass(frozen=True)
class ShardLayout:
    """The tp-independent layout of a graph (see module docstring).

    axis: tensor name -> split axis (replicated tensors absent); nodes: node -> NodeShard;
    comms: collectives per node (forward, and backward for tensors that require grad);
    split_weights: weight tensor -> length of its split axis; attention_heads: length of the
    split batch axis at each attention core (QK GEMM), in topological order.
    """

    axis: Mapping[str, int]
    nodes: Mapping[str, NodeShard]
    comms: tuple[LayoutComm, ...]
    split_weights: Mapping[str, int]
    attention_heads: tuple[int, ...]
    sequence_parallel: bool = False
    #: tensor -> outer factor of a split axis that merges other dims before the split one
    #: (torch's attention export folds [batch, heads] into one axis: split on the heads,
    #: each rank holds its heads of every batch row); absent: 1
    outer: Mapping[str, int] = field(default_factory=dict)

    def tensor_fraction(self, t: TensorInfo | None, tp: int) -> float:
        """Share of ``t`` one rank holds."""
        if t is None or t.name not in self.axis:
            return 1.0
        return split_fraction(int(t.shape[self.axis[t.name]]) // self.outer.get(t.name, 1), tp)


@dataclass
class _State:
    """The walk's mutable state; rules read ``axis_of`` and call the recorders."""

    graph: Graph
    sequence_parallel: bool
    requires_grad: frozenset[str]
    weights: frozenset[str]
    vocab_table: str | None
    axis: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, NodeShard] = field(default_factory=dict)
    comms: list[LayoutComm] = field(default_factory=list)
    split_weights: dict[str, int] = field(default_factory=dict)
    heads: list[int] = field(default_factory=list)
    replicate: frozenset[str] = frozenset()  # nodes that must not start a split
    gathered: set[str] = field(default_factory=set)
    #: split tensor -> the column-parallel / vocab nodes its split comes from
    origin: dict[str, frozenset[str]] = field(default_factory=dict)
    outer: dict[str, int] = field(default_factory=dict)
    #: split starts whose split reaches a gather (not a row-parallel GEMM): replicate them
    wasted: set[str] = field(default_factory=set)
    #: replicated tensors whose gradient is partial on each rank -> (tensor, first such node)
    partial_grad: dict[str, tuple[TensorInfo, str]] = field(default_factory=dict)

    def axis_of(self, t: TensorInfo | None) -> Axis:
        return None if t is None else self.axis.get(t.name)

    def outer_of(self, t: TensorInfo | None) -> int:
        return 1 if t is None else self.outer.get(t.name, 1)

    def gather(self, t: TensorInfo, node: OpNode) -> None:
        """All-gather split ``t`` before ``node`` (once per tensor): forward all_gather,
        backward reduce_scatter of its gradient."""
        self.wasted |= self.origin.get(t.name, frozenset())
        if t.name in self.gathered:
            return
        self.gathered.add(t.name)
        self.comms.append(LayoutComm("all_gather", t, "forward", node.name))
        if t.name in self.requires_grad:
            self.comms.append(LayoutComm("reduce_scatter", t, "backward", node.name))

    def consume_replicated(self, t: TensorInfo, axis: int, node: OpNode) -> None:
        """``node`` uses only its rank's slice of replicated ``t`` along ``axis``: a weight is
        stored split; an activation's gradient is partial (all-reduced in the backward)."""
        if t.name in self.weights:
            self.split_weights[t.name] = int(t.shape[axis])
        elif t.name in self.requires_grad:
            self.partial_grad.setdefault(t.name, (t, node.name))

    def reduce_output(self, t: TensorInfo, node: OpNode) -> Axis:
        """Partial sums of ``t``: all-reduce (replicated after), or with sequence parallelism
        reduce-scatter over the token axis (second-to-last) when it has one."""
        if self.sequence_parallel and len(t.shape) >= 2 and int(t.shape[-2]) > 1:
            self.comms.append(LayoutComm("reduce_scatter", t, "forward", node.name))
            if t.name in self.requires_grad:
                self.comms.append(LayoutComm("all_gather", t, "backward", node.name))
            return len(t.shape) - 2
        self.comms.append(LayoutComm("all_reduce", t, "forward", node.name))
        return None


@dataclass(frozen=True)
class Decision:
    """A rule's answer: output axes (per output position), the node's shard; ``outer``: the
    split outputs' outer factor (None: that of the node's first split input)."""

    outputs: tuple[Axis, ...]
    shard: NodeShard = NodeShard()
    outer: int | None = None


ShardRule = Callable[[OpNode, _State], Decision]
#: op family or op type -> rule (op type entries win)
SHARD_RULES: dict[str, ShardRule] = {}


def shard_rule(*keys: str) -> Callable[[ShardRule], ShardRule]:
    """Register a rule under op families and/or op types; a key registered twice is an error."""
    def deco(fn: ShardRule) -> ShardRule:
        for key in keys:
            if key in SHARD_RULES:
                raise RuntimeError(f"shard rule {key!r} registered twice")
            SHARD_RULES[key] = fn
        return fn
    return deco


def _replicated(node: OpNode) -> Decision:
    return Decision((None,) * len(node.outputs))


def _gathered(node: OpNode, st: _State) -> Decision:
    """Gather every split input; the node runs replicated."""
    split = [t for t in node.inputs if st.axis_of(t) is not None]
    for t in split:
        st.gather(t, node)
    return Decision((None,) * len(node.outputs),
                    NodeShard(rule="gathered" if split else "replicated"))


def _split_all(node: OpNode, axis: int, length: int, role: str | None = None) -> Decision:
    return Decision((axis,) * len(node.outputs), NodeShard(length, role, "split"))


# ------------------------------------------------------------------------ GEMMs


def _weight_operand(node: OpNode) -> int | None:
    for i in (1, 0):
        t = node.input(i)
        if t is not None and t.name in node.weight_inputs:
            return i
    return None


def _linear(node: OpNode, st: _State, x: TensorInfo, w: TensorInfo, k_axis: int,
            w_k: int, w_n: int, out_axis: int) -> Decision:
    """A GEMM of activation ``x`` (contraction axis ``k_axis``) and weight ``w`` (its
    contraction axis ``w_k``, output-feature axis ``w_n``); the output's feature axis is
    ``out_axis``. Biases (other weight inputs) follow the output features when split."""
    y = node.outputs[0]
    ax = st.axis_of(x)
    if ax is not None and ax == k_axis:  # row-parallel
        st.split_weights[w.name] = int(w.shape[w_k])
        out = st.reduce_output(y, node)
        return Decision((out,) + (None,) * (len(node.outputs) - 1),
                        NodeShard(int(x.shape[k_axis]), "k", "row"), outer=1)
    if ax is not None:
        st.gather(x, node)
    if node.name in st.replicate:
        return _replicated(node)
    if ax is None and x.name in st.requires_grad:
        st.partial_grad.setdefault(x.name, (x, node.name))
    st.split_weights[w.name] = int(w.shape[w_n])
    for b in node.inputs:
        if b is not None and b.name in node.weight_inputs and b.name != w.name and b.shape:
            st.split_weights[b.name] = int(b.shape[-1])
    n = int(w.shape[w_n])
    return Decision((out_axis % len(y.shape),) + (None,) * (len(node.outputs) - 1),
                    NodeShard(n, "n", "column"))


@shard_rule("matmul")
def _matmul(node: OpNode, st: _State) -> Decision:
    """MatMul / Gemm: a weight operand makes a Linear layer, else an activation GEMM."""
    a, b = node.input(0), node.input(1)
    if a is None or b is None or len(a.shape) < 1 or len(b.shape) < 1:
        return _gathered(node, st)
    trans_a = bool(node.attrs.get("transA", 0))
    trans_b = bool(node.attrs.get("transB", 0))
    wi = _weight_operand(node)
    if wi == 1 and len(b.shape) == 2 and not trans_a:
        return _linear(node, st, a, b, len(a.shape) - 1, 1 if trans_b else 0,
                       0 if trans_b else 1, -1)
    if wi is not None:
        return _gathered(node, st)
    return _activation_gemm(node, st, a, b)


def _activation_gemm(node: OpNode, st: _State, a: TensorInfo, b: TensorInfo) -> Decision:
    y = node.outputs[0]
    ra, rb, ry = len(a.shape), len(b.shape), len(y.shape)
    aa, ab = st.axis_of(a), st.axis_of(b)
    if aa is None and ab is None:
        return _replicated(node)
    if ra >= 3 and rb >= 3:  # batched: is the split a shared batch axis?
        ya = None if aa is None else aa + ry - ra
        yb = None if ab is None else ab + ry - rb
        batch = {v for v in (ya, yb) if v is not None}
        if len(batch) == 1 and (ya is None or aa < ra - 2) and (yb is None or ab < rb - 2):
            axis = batch.pop()
            for t, ax, r in ((a, aa, ra), (b, ab, rb)):
                if ax is None and t.shape[axis - ry + r] > 1:
                    st.consume_replicated(t, axis - ry + r, node)
            return _split_all(node, axis, int(y.shape[axis]), "b")
    if aa == ra - 1 and ab == rb - 2:  # both split on the contraction: partial sums
        out = st.reduce_output(y, node)
        return Decision((out,), NodeShard(int(a.shape[-1]), "k", "row"), outer=1)
    return _gathered(node, st)


@shard_rule("conv")
def _conv(node: OpNode, st: _State) -> Decision:
    """Conv: column-parallel over output channels, row-parallel over input channels,
    depthwise (group = channels) stays split on the channels."""
    x, w = node.input(0), node.input(1)
    if (x is None or w is None or w.name not in node.weight_inputs or len(x.shape) < 3
            or node.op_type not in ("Conv", "FusedConv")):
        return _gathered(node, st)
    group = int(node.attrs.get("group", 1))
    channels = int(x.shape[1])
    if group > 1 and group == channels and st.axis_of(x) in (1, None):
        if st.axis_of(x) is None:
            st.consume_replicated(x, 1, node)
        for b in node.inputs[1:]:
            if b is not None and b.name in node.weight_inputs:
                st.split_weights[b.name] = int(b.shape[0])
        return _split_all(node, 1, channels, "b")
    if group > 1:
        return _gathered(node, st)
    return _linear(node, st, x, w, 1, 1, 0, 1)


# ------------------------------------------------------------------------ elementwise


@shard_rule("elementwise", "quantization", "Cast", "CastLike")
def _elementwise(node: OpNode, st: _State) -> Decision:
    """Split when split inputs agree on one right-aligned axis (see module docstring)."""
    if not node.outputs:
        return _replicated(node)
    ry = max(len(o.shape) for o in node.outputs)
    split = {}
    for t in node.inputs:
        ax = st.axis_of(t)
        if ax is not None:
            split[t.name] = ax + ry - len(t.shape)
    if not split:
        return _replicated(node)
    axes = set(split.values())
    if len(axes) > 1:
        return _gathered(node, st)
    axis = axes.pop()
    for t in node.inputs:
        if t is None or t.name in split:
            continue
        pos = axis - ry + len(t.shape)
        if pos >= 0 and int(t.shape[pos]) > 1:
            st.consume_replicated(t, pos, node)
    length = max(int(o.shape[axis]) for o in node.outputs if len(o.shape) == ry)
    return Decision(tuple(axis if len(o.shape) == ry else None for o in node.outputs),
                    NodeShard(length, None, "split"))


# ------------------------------------------------------------------------ reducing ops


def _norm_axes(node: OpNode, rank: int) -> set[int]:
    """Axes a normalization op reduces over (BatchNorm-like: all but the channels)."""
    if node.op_type in _PER_CHANNEL:
        return {a for a in range(rank) if a != 1} if node.op_type == "BatchNormalization" \
            else set(range(2, rank))
    if node.op_type in ("LpNormalization",):
        return {int(node.attrs.get("axis", -1)) % rank}
    if node.op_type == "MeanVarianceNormalization":
        return {int(a) % rank for a in node.attrs.get("axes", (0, 2, 3))}
    if node.op_type in ("GroupNormalization", "LRN"):
        return set(range(1, rank))
    axis = int(node.attrs.get("axis", -1)) % rank
    return set(range(axis, rank))


_PER_CHANNEL = frozenset({"BatchNormalization", "InstanceNormalization"})


@shard_rule("normalization")
def _normalization(node: OpNode, st: _State) -> Decision:
    x = node.input(0)
    ax = st.axis_of(x)
    if x is None or ax is None:
        return _replicated(node)
    if ax in _norm_axes(node, len(x.shape)):
        return _gathered(node, st)
    if node.op_type in _PER_CHANNEL and ax == 1:
        for p in node.inputs[1:]:
            if p is not None and p.name in st.weights and p.shape:
                st.split_weights[p.name] = int(p.shape[0])
    for t in node.inputs[1:]:  # e.g. SkipLayerNorm's skip input
        if t is not None and t.name not in st.weights and st.axis_of(t) not in (None, ax):
            return _gathered(node, st)
    out = node.outputs[0]
    return Decision((ax,) + (None,) * (len(node.outputs) - 1),
                    NodeShard(int(out.shape[ax]), None, "split"))


@shard_rule("softmax")
def _softmax(node: OpNode, st: _State) -> Decision:
    x = node.input(0)
    ax = st.axis_of(x)
    if x is None or ax is None:
        return _replicated(node)
    rank = len(x.shape)
    axis = int(node.attrs.get("axis", -1)) % rank
    reduced = {axis} if st.graph.opset >= 13 else set(range(axis, rank))
    if ax in reduced:
        return _gathered(node, st)
    if rank >= 3 and ax <= rank - 3:  # attention probabilities [.., heads, q, k]
        st.heads.append(int(x.shape[ax]) // st.outer_of(x))
    return _split_all(node, ax, int(x.shape[ax]))


_SUMMING = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2",
                      "ReduceL1", "ReduceSumSquare", "ReduceLogSumExp", "ReduceLogSum",
                      "ReduceProd"})


def _reduce_axes(node: OpNode, rank: int) -> set[int]:
    axes = node.attrs.get("axes")
    if axes is None and node.input(1) is not None:
        value = node.const_inputs.get(node.input(1).name)
        axes = None if value is None else [int(v) for v in list(value.reshape(-1))]
    if axes is None:
        if node.op_type in _SUMMING:
            return set(range(rank))
        return {int(node.attrs.get("axis", 0)) % rank}
    return {int(a) % rank for a in axes}


@shard_rule("reduction")
def _reduction(node: OpNode, st: _State) -> Decision:
    x = node.input(0)
    ax = st.axis_of(x)
    if x is None or ax is None or not node.outputs:
        return _replicated(node)
    rank = len(x.shape)
    axes = _reduce_axes(node, rank)
    out = node.outputs[0]
    if ax in axes:
        if node.op_type in _SUMMING:
            return Decision((st.reduce_output(out, node),) + (None,) * (len(node.outputs) - 1),
                            NodeShard(int(x.shape[ax]), None, "row"), outer=1)
        return _gathered(node, st)
    keep = len(out.shape) == rank
    new = ax if keep else ax - sum(1 for a in axes if a < ax)
    return _split_all(node, new, int(x.shape[ax]))


@shard_rule("pooling")
def _pooling(node: OpNode, st: _State) -> Decision:
    x = node.input(0)
    ax = st.axis_of(x)
    if x is None or ax is None:
        return _replicated(node)
    if ax >= 2:
        return _gathered(node, st)
    return _split_all(node, ax, int(x.shape[ax]))


# ------------------------------------------------------------------------ views, data movement


@shard_rule("Shape", "Size")
def _metadata(node: OpNode, st: _State) -> Decision:
    """Shape and Size read no data: their (tiny) outputs are the same on every rank."""
    return _replicated(node)



def map_axis(src: tuple[int, ...], dst: tuple[int, ...], axis: int, outer: int = 1
             ) -> tuple[int, int] | None:
    """Where a split of ``src`` axis ``axis`` (viewed as [outer, m], split on m) lands in a
    reshape to ``dst``: (dst axis, its outer factor), or None when no single axis holds it.

    The split starts after ``before = prod(src[:axis]) * outer`` elements; the dst axis i with
    ``prod(dst[:i]) <= before < prod(dst[:i + 1])`` holds it when its outer factor
    ``before / prod(dst[:i])`` is whole and divides ``dst[i]``, and m and ``dst[i] / outer``
    nest (one divides the other: splitting either in tp contiguous chunks is the same split).
    A [b, s, 768] split on 768 reshaped to [b, s, 12, 64] is split on the 12 heads; torch's
    [s, b, 768] -> [s, b·12, 64] is split on axis 1 with outer factor b. When the dst axis
    has 2 or 3 elements and the split continues into the next axis, it is a packed [k, v] /
    [q, k, v] axis: Megatron interleaves the pieces so that each rank holds its part of every
    piece, and the split moves to the next axis."""
    before = math.prod(src[:axis]) * outer
    m = src[axis] // outer
    acc = 1
    for i, d in enumerate(dst):
        if acc <= before < acc * d or (acc == before and d > 1):
            if before % acc or d % (before // acc):
                return None
            new_outer = before // acc
            m_new = d // new_outer
            if m_new <= 1 or (m % m_new and m_new % m):
                return None
            if (new_outer == 1 and d <= 3 and i + 1 < len(dst) and d * dst[i + 1] <= m
                    and m % (d * dst[i + 1]) == 0):
                return i + 1, 1
            return i, new_outer
        acc *= d
    return None


@shard_rule("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout")
def _view(node: OpNode, st: _State) -> Decision:
    x = node.input(0)
    ax = st.axis_of(x)
    if x is None or ax is None or not node.outputs:
        return _replicated(node)
    mapped = map_axis(tuple(x.shape), tuple(node.outputs[0].shape), ax, st.outer_of(x))
    if mapped is None:
        return _gathered(node, st)
    new, outer = mapped
    return Decision((new,) + (None,) * (len(node.outputs) - 1),
                    NodeShard(int(node.outputs[0].shape[new]) // outer, None, "split"), outer)


@shard_rule("Transpose")
def _transpose(node: OpNode, st: _State) -> Decision:
    x = node.input(0)
    ax = st.axis_of(x)
    if x is None or ax is None:
        return _replicated(node)
    perm = list(node.attrs.get("perm", range(len(x.shape) - 1, -1, -1)))
    return _split_all(node, perm.index(ax), int(x.shape[ax]))


@shard_rule("Concat")
def _concat(node: OpNode, st: _State) -> Decision:
    ins = [t for t in node.inputs if t is not None]
    axes = {st.axis_of(t) for t in ins} - {None}
    if not axes:
        return _replicated(node)
    out = node.outputs[0]
    cat = int(node.attrs.get("axis", 0)) % len(out.shape)
    if len(axes) > 1:
        return _gathered(node, st)
    axis = axes.pop()
    if axis == cat and any(st.axis_of(t) is None for t in ins):
        return _gathered(node, st)
    for t in ins:
        if st.axis_of(t) is None:
            st.consume_replicated(t, axis, node)
    return _split_all(node, axis, int(out.shape[axis]))


@shard_rule("Split")
def _split(node: OpNode, st: _State) -> Decision:
    x = node.input(0)
    ax = st.axis_of(x)
    if x is None or ax is None:
        return _replicated(node)
    return _split_all(node, ax, int(x.shape[ax]))


@shard_rule("Slice", "Pad", "Resize", "Upsample", "Expand", "Tile", "Trilu", "CenterCropPad")
def _axiswise(node: OpNode, st: _State) -> Decision:
    """Ops that keep every axis: split when the split axis is untouched (same length)."""
    x = node.input(0)
    ax = st.axis_of(x)
    if x is None or ax is None or not node.outputs:
        return _replicated(node)
    out = node.outputs[0]
    new = ax + len(out.shape) - len(x.shape)
    if 0 <= new < len(out.shape) and int(out.shape[new]) == int(x.shape[ax]):
        return Decision((new,) + (None,) * (len(node.outputs) - 1),
                        NodeShard(int(out.shape[new]), None, "split"))
    return _gathered(node, st)


@shard_rule("Gather")
def _gather(node: OpNode, st: _State) -> Decision:
    data, idx = node.input(0), node.input(1)
    if data is None or idx is None or not node.outputs:
        return _replicated(node)
    # vocab-parallel embedding
    if data.name == st.vocab_table and st.axis_of(idx) is None and node.name not in st.replicate:
        st.split_weights[data.name] = int(data.shape[0])
        out = st.reduce_output(node.outputs[0], node)
        return Decision((out,), NodeShard(int(data.shape[0]), None, "vocab"))
    ax = st.axis_of(data)
    if st.axis_of(idx) is not None or (ax is None):
        return _gathered(node, st) if st.axis_of(idx) is not None else _replicated(node)
    g = int(node.attrs.get("axis", 0)) % len(data.shape)
    if ax == g:
        return _gathered(node, st)
    new = ax if ax < g else ax + len(idx.shape) - 1
    return _split_all(node, new, int(data.shape[ax]))


# ------------------------------------------------------------------------ the walk


def _vocab_table(order: list[OpNode]) -> str | None:
    """The largest 2-D float weight a Gather reads rows from (the token embedding)."""
    best: tuple[int, str] | None = None
    for node in order:
        t = node.input(0)
        if (node.op_type == "Gather" and t is not None and t.name in node.weight_inputs
                and len(t.shape) == 2 and int(node.attrs.get("axis", 0)) == 0):
            size = t.numel
            if best is None or size > best[0]:
                best = (size, t.name)
    return None if best is None else best[1]


def rule_for(node: OpNode) -> ShardRule:
    """The node's rule: its op type's entry, else its family's, else ``gathered``."""
    return SHARD_RULES.get(node.op_type) or SHARD_RULES.get(op_family(node)) or _gathered


def shard_layout(graph: Graph, *, sequence_parallel: bool = False,
                 requires_grad: frozenset[str] = frozenset()) -> ShardLayout:
    """The layout of ``graph`` (module docstring). ``requires_grad``: tensors whose gradient
    the backward computes (``predictor.training.requires_grad_tensors``; empty: no backward
    collectives).

    A split that only leads to an all-gather (a column-parallel GEMM whose output meets a
    LayerNorm before any row-parallel GEMM, e.g. a ViT's patch embedding) saves nothing:
    such split starts are made replicated and the walk is redone (at most ``_ROUNDS`` times).
    """
    order = list(graph.ops())
    weights = frozenset(n for node in order for n in node.weight_inputs)
    vocab = _vocab_table(order)
    replicate: frozenset[str] = frozenset()
    for _ in range(_ROUNDS):
        st = _State(graph, sequence_parallel, frozenset(requires_grad), weights, vocab,
                    replicate=replicate)
        _walk(order, st)
        if not st.wasted - replicate:
            break
        replicate = replicate | st.wasted
    for name, (t, node_name) in st.partial_grad.items():
        if name not in st.gathered:
            st.comms.append(LayoutComm("all_reduce", t, "backward", node_name))
    return ShardLayout(dict(st.axis), dict(st.nodes), tuple(st.comms), dict(st.split_weights),
                       tuple(st.heads), sequence_parallel, dict(st.outer))


_ROUNDS = 6


def _walk(order: list[OpNode], st: _State) -> None:
    for node in order:
        if not any(st.axis_of(t) is not None for t in node.inputs) and not _starts_split(node, st):
            st.nodes[node.name] = NodeShard()
            continue
        if node.cost is None or not all(o.is_concrete for o in node.outputs) or not all(
                t is None or t.is_concrete for t in node.inputs):
            decision = _gathered(node, st)
        else:
            decision = rule_for(node)(node, st)
        st.nodes[node.name] = decision.shard
        if decision.shard.rule == "column":
            origin = frozenset({node.name})
        elif decision.shard.rule in ("row", "vocab"):  # reduced: replicated or token-split
            origin = frozenset()
        else:
            origin = frozenset().union(*(st.origin.get(t.name, frozenset())
                                         for t in node.inputs if t is not None))
        outer = decision.outer
        if outer is None:
            outer = next((st.outer_of(t) for t in node.inputs if st.axis_of(t) is not None), 1)
        for out, ax in zip(node.outputs, decision.outputs, strict=False):
            if ax is not None:
                st.axis[out.name] = ax
                st.origin[out.name] = origin
                if outer > 1:
                    st.outer[out.name] = outer


def _starts_split(node: OpNode, st: _State) -> bool:
    """A node with replicated inputs that splits its output: a weight GEMM (column-parallel),
    a depthwise conv, or the vocab-parallel embedding."""
    if node.cost is None or node.cost.engine == Engine.FREE or node.name in st.replicate:
        return False
    family = op_family(node)
    if family in ("matmul", "conv"):
        return any(t is not None and t.name in node.weight_inputs for t in node.inputs)
    return node.op_type == "Gather" and node.input(0) is not None \
        and node.input(0).name == st.vocab_table
