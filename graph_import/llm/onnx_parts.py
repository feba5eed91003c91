"""The pieces of an ONNX decoder: token embedding, LM head, attention cores and per-layer
projections (``onnx_decoder`` assembles them into an ``LLMArch``; the module docstring there
says how each is found)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import onnx
from onnx import ModelProto, TensorProto

from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm.onnx_graph import DecoderGraph, Linear

CONFIG_ROAD = "give the model's Hugging Face config.json instead (roofcast llm path/to/config.json)"


@dataclass(frozen=True)
class Embedding:
    gather: int
    table: str
    ids_input: str
    vocab: int
    d_model: int


@dataclass(frozen=True)
class Core:
    """One attention: ``start``/``end`` nodes (QK MatMul and AV MatMul, or the fused op), the
    tensors entering it, heads from op attributes (0 when the op does not say)."""

    start: int
    end: int
    q: str
    k: str
    v: str
    n_heads: int = 0
    n_kv_heads: int = 0
    kv_inputs: tuple[str, ...] = ()
    kv_outputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Heads:
    n_heads: int
    n_kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class Layer:
    heads: Heads
    qkv: tuple[Linear, ...]
    d_ff: int
    gated: bool
    n_experts: int
    top_k: int
    parallel: bool
    qkv_bias: bool
    mlp_bias: bool
    mlp: tuple[Linear, ...]
    kv_inputs: tuple[str, ...]
    kv_outputs: tuple[str, ...]

    @property
    def shape(self) -> tuple:
        return (self.heads, self.d_ff, self.gated, self.n_experts, self.top_k, self.parallel,
                self.qkv_bias, self.mlp_bias)


@dataclass
class Found:
    """What the structural pass found; the field detectors read it."""

    view: DecoderGraph
    emb: Embedding
    head: Linear
    cores: list[Core]
    layers: list[Layer]
    notes: list[str]


def label_of(source: Any, model: ModelProto) -> str:
    if isinstance(source, str | os.PathLike):
        return os.path.splitext(os.path.basename(os.fspath(source)))[0]
    return model.graph.name or "onnx-model"


def positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise LLMConfigError(f"{what} must be a positive integer, not {value!r}")
    return value


def is_kv_input(vi: onnx.ValueInfoProto) -> bool:
    tt = vi.type.tensor_type
    return tt.elem_type in FLOATS and len(tt.shape.dim) == 4


FLOATS = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16,
                     TensorProto.DOUBLE})
_INDEX_OPS = frozenset({"Cast", "Reshape", "Unsqueeze", "Flatten", "Squeeze", "Identity"})


def token_embedding(view: DecoderGraph, label: str) -> Embedding:
    """The Gather of graph-input ids from a 2-D float table (the largest if several)."""
    inputs = {vi.name for vi in view.inputs}
    found: list[Embedding] = []
    for i, node in enumerate(view.nodes):
        if node.op_type != "Gather" or len(node.input) < 2:
            continue
        table = view.init.get(node.input[0])
        if table is None or len(table.dims) != 2 or table.data_type not in FLOATS:
            continue
        src = node.input[1]
        for _ in range(4):
            p = view.node_of(src)
            if p is None or p.op_type not in _INDEX_OPS:
                break
            src = p.input[0]
        if src in inputs:
            found.append(Embedding(i, node.input[0], src, int(table.dims[0]), int(table.dims[1])))
    if not found:
        raise LLMConfigError(
            f"{label}: found no token embedding (a Gather of the input ids from a [vocab, d_model] "
            f"table): not a decoder-only language model roofcast can read; {CONFIG_ROAD}")
    best = max(found, key=lambda e: (e.ids_input == "input_ids", e.vocab))
    ids = sorted({e.ids_input for e in found if e.table == best.table})
    if len(ids) > 1:
        raise LLMConfigError(
            f"{label}: token ids enter through {len(ids)} inputs ({', '.join(ids)}): an "
            f"encoder-decoder model; roofcast serves decoder-only LLMs; {CONFIG_ROAD}")
    return best


def lm_head(view: DecoderGraph, emb: Embedding, label: str) -> Linear:
    heads = [lin for lin in view.linears
             if lin.out_features == emb.vocab and lin.in_features == emb.d_model]
    if not heads:
        raise LLMConfigError(
            f"{label}: found no LM head (a matmul from d_model={emb.d_model} to the vocabulary "
            f"of {emb.vocab}): an encoder or a headless model; export the causal-LM class "
            f"(e.g. *ForCausalLM) or {CONFIG_ROAD}")
    return heads[-1]


# ------------------------------------------------------------------------------- cores

#: ops between the QK MatMul and the Softmax (scale, mask, soft-capping)
_SCORE_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Where", "Cast", "Tanh", "Slice", "Reshape",
                        "Expand", "Min", "Max", "Clip"})
_PROB_OPS = frozenset({"Cast", "Dropout", "Identity", "Reshape", "Where"})


def _eager_cores(view: DecoderGraph) -> list[Core]:
    out = []
    for node in view.nodes:
        if node.op_type != "Softmax":
            continue
        qk = next((j for j in view.walk_back(
            node.input[:1], lambda n: n.op_type in _SCORE_OPS,
            stop=lambda j: view.nodes[j].op_type == "MatMul", limit=30)
            if view.nodes[j].op_type == "MatMul"), None)
        if qk is None or qk in view.linear_at or _has_weight(view, view.nodes[qk].input):
            continue
        av = next((j for j in view.walk_forward(
            node.output[:1], lambda n: n.op_type in _PROB_OPS, limit=10)
            if view.nodes[j].op_type == "MatMul"), None)
        if av is None or av in view.linear_at or _has_weight(view, view.nodes[av].input):
            continue
        q, k = view.nodes[qk].input[:2]
        out.append(Core(qk, av, q, k, view.nodes[av].input[1]))
    return out


def _has_weight(view: DecoderGraph, tensors: Iterable[str]) -> bool:
    return any(view.is_weight(t) for t in tensors)


@dataclass(frozen=True)
class FusedOp:
    """Where a fused attention op keeps its tensors and head counts."""

    q: int
    k: int
    v: int
    past: tuple[int, int] | None
    present: tuple[int, int] | None
    heads: tuple[str, ...]  # attribute names: n_heads, then n_kv_heads
    kv_heads: tuple[str, ...] = ()


FUSED_ATTENTION: dict[tuple[str, str], FusedOp] = {
    ("", "Attention"): FusedOp(0, 1, 2, (4, 5), (1, 2), ("q_num_heads",), ("kv_num_heads",)),
    ("com.microsoft", "GroupQueryAttention"): FusedOp(0, 1, 2, (3, 4), (1, 2), ("num_heads",),
                                                      ("kv_num_heads",)),
    ("com.microsoft", "MultiHeadAttention"): FusedOp(0, 1, 2, (6, 7), (1, 2), ("num_heads",)),
}


def _fused_cores(view: DecoderGraph) -> list[Core]:
    out = []
    for i, node in enumerate(view.nodes):
        spec = FUSED_ATTENTION.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
        if spec is None:
            continue
        ins = list(node.input) + [""] * 8
        outs = list(node.output) + [""] * 3
        n_heads = next((int(view.attr(node, a)) for a in spec.heads if view.attr(node, a)), 0)
        n_kv = next((int(view.attr(node, a)) for a in spec.kv_heads if view.attr(node, a)), n_heads)
        graph_in = {vi.name for vi in view.inputs}
        kv_in = tuple(ins[j] for j in spec.past or () if ins[j] in graph_in)
        kv_out = tuple(outs[j] for j in spec.present or () if outs[j] in view.outputs)
        out.append(Core(i, i, ins[spec.q], ins[spec.k] or ins[spec.q], ins[spec.v] or ins[spec.q],
                        n_heads, n_kv, kv_in, kv_out))
    return out


CORE_FINDERS: tuple[Callable[[DecoderGraph], list[Core]], ...] = (_eager_cores, _fused_cores)


def find_cores(view: DecoderGraph) -> list[Core]:
    return sorted((c for find in CORE_FINDERS for c in find(view)), key=lambda c: c.start)


# ------------------------------------------------------------------------------- layers

#: ops whose outputs carry no data of their inputs (shapes, generators): traces stop there
_NO_DATA_OPS = frozenset({"Shape", "Size", "Range", "ConstantOfShape", "EyeLike", "TopK",
                          "Softmax", "NonZero", "OneHot"})


@dataclass(frozen=True)
class Trace:
    linears: frozenset[Linear]
    inputs: frozenset[str]
    tensors: frozenset[str]


def _trace(view: DecoderGraph, tensor: str, skip: frozenset[int] = frozenset()) -> Trace:
    """Linears and graph inputs that ``tensor`` is computed from without crossing a linear."""
    inputs = {vi.name for vi in view.inputs}
    lins, found, seen = set(), set(), set()
    todo = [tensor]
    while todo and len(seen) < 2000:
        t = todo.pop()
        if not t or t in seen:
            continue
        seen.add(t)
        i = view.producer.get(t)
        if i is None:
            if t in inputs:
                found.add(t)
            continue
        if i in view.linear_at:
            lins.add(view.linear_at[i])
            continue
        node = view.nodes[i]
        if node.op_type in _NO_DATA_OPS or i in skip:
            continue
        todo.extend(node.input)
    return Trace(frozenset(lins), frozenset(found), frozenset(seen))


def layer_of(view: DecoderGraph, cores: list[Core], index: int, head: Linear, d_model: int,
           label: str) -> Layer:
    core = cores[index]
    where = f"{label}: layer {index}"
    tq, tk, tv = (_trace(view, t) for t in (core.q, core.k, core.v))
    if not (tq.linears and tk.linears and tv.linears):
        raise LLMConfigError(f"{where}: the attention's Q/K/V come from no weight matmul; "
                             f"{CONFIG_ROAD}")
    _refuse_cross_attention(view, tq, tk, where)
    qkv = tuple(sorted(tq.linears | tk.linears | tv.linears, key=lambda lin: lin.node))
    heads = _heads(view, core, tq, tk, tv, where)
    nxt = cores[index + 1].start if index + 1 < len(cores) else len(view.nodes)
    nxt_qkv: set[Linear] = set()
    if index + 1 < len(cores):
        for t in (cores[index + 1].q, cores[index + 1].k, cores[index + 1].v):
            nxt_qkv |= _trace(view, t).linears
    seg = [lin for lin in view.linears
           if core.end < lin.node < nxt and lin not in nxt_qkv and lin != head]
    out_proj = [lin for lin in seg if core.end in _ancestors(view, lin.input)]
    router, top_k = _router(view, seg)
    mlp = tuple(lin for lin in seg if lin not in out_proj and lin != router)
    downs = [lin for lin in mlp if lin.out_features == d_model]
    if not out_proj or not downs:
        missing = "output projection" if not out_proj else "MLP down projection"
        raise LLMConfigError(f"{where}: found no {missing} (a matmul back to d_model={d_model}); "
                             f"{CONFIG_ROAD}")
    d_ff = downs[0].in_features
    if any(d.in_features != d_ff for d in downs):
        raise LLMConfigError(f"{where}: MLP matrices of different widths "
                             f"({sorted({d.in_features for d in downs})}; shared experts?): "
                             f"LLMArch holds one d_ff; {CONFIG_ROAD}")
    stacked = max(lin.experts for lin in mlp)
    n_experts = stacked if stacked > 1 else (router.out_features if router else 1)
    per_weight = {lin.weight: lin.elements * lin.experts for lin in mlp}
    mats, rest = divmod(sum(per_weight.values()), n_experts * d_model * d_ff)
    if rest or mats not in (2, 3):
        raise LLMConfigError(
            f"{where}: the MLP holds {sum(per_weight.values())} weights, not 2 or 3 matrices of "
            f"{d_model}x{d_ff} per expert ({n_experts} experts); {CONFIG_ROAD}")
    if router is not None and router.out_features != n_experts:
        raise LLMConfigError(f"{where}: the router picks among {router.out_features} experts "
                             f"but the layer holds {n_experts}; {CONFIG_ROAD}")
    ups = [lin for lin in mlp if lin not in downs]
    parallel = bool(ups) and core.end not in _ancestors(view, ups[0].input, floor=qkv[0].node)
    kv_in = _kv_pair(view, core, tk, tv)
    kv_out = core.kv_outputs or tuple(
        t for tr in (tk, tv) for t in view.outputs if t in tr.tensors)
    return Layer(heads=heads, qkv=qkv, d_ff=d_ff, gated=mats == 3, n_experts=n_experts,
                 top_k=top_k if router else 1, parallel=parallel,
                 qkv_bias=any(lin.bias for lin in qkv), mlp_bias=any(lin.bias for lin in mlp),
                 mlp=mlp, kv_inputs=kv_in, kv_outputs=kv_out)


def _refuse_cross_attention(view: DecoderGraph, tq: Trace, tk: Trace, where: str) -> None:
    """K projected from a float graph input (encoder states), not from the decoder's stream."""
    states = {vi.name for vi in view.inputs
              if vi.type.tensor_type.elem_type in FLOATS and not is_kv_input(vi)}
    for lin in tk.linears - tq.linears:
        found = _trace(view, lin.input).inputs & states
        if found:
            raise LLMConfigError(
                f"{where}: cross-attention (keys from the input {sorted(found)[0]!r}): the decoder "
                f"of an encoder-decoder model; roofcast serves decoder-only LLMs; {CONFIG_ROAD}")


def _kv_pair(view: DecoderGraph, core: Core, tk: Trace, tv: Trace) -> tuple[str, ...]:
    if core.kv_inputs:
        return core.kv_inputs
    kv = {vi.name for vi in view.inputs if is_kv_input(vi)}
    keys = sorted(tk.inputs & kv)
    values = sorted(tv.inputs & kv)
    return (*keys, *values)


def _ancestors(view: DecoderGraph, tensor: str, floor: int = -1) -> set[int]:
    """Nodes ``tensor`` depends on: without crossing a linear (``floor < 0``), or all of them
    down to node position ``floor``."""
    def data(n: onnx.NodeProto) -> bool:
        return n.op_type not in _NO_DATA_OPS

    if floor < 0:
        return set(view.walk_back([tensor], data, stop=lambda j: j in view.linear_at, limit=600))
    return set(view.walk_back([tensor], data, stop=lambda j: j < floor, limit=6000))


def _router(view: DecoderGraph, seg: list[Linear]) -> tuple[Linear | None, int]:
    """The linear whose output reaches a TopK (MoE routing) and that TopK's k."""
    route_ops = {"Cast", "Softmax", "Sigmoid", "Reshape", "Add", "Div", "Mul", "Identity"}
    for lin in seg:
        for j in view.walk_forward([lin.output], lambda n: n.op_type in route_ops, limit=20):
            node = view.nodes[j]
            if node.op_type == "TopK":
                k = view.value(node.input[1]) if len(node.input) > 1 else None
                k = int(k.reshape(-1)[0]) if k is not None and k.size == 1 else None
                if k is None:
                    raise LLMConfigError(f"the router's TopK ({node.name}) has no constant k; "
                                         f"{CONFIG_ROAD}")
                return lin, k
    return None, 1


def _heads(view: DecoderGraph, core: Core, tq: Trace, tk: Trace, tv: Trace, where: str) -> Heads:
    """Heads and head_dim from op attributes or Q's concrete shape, kv heads from the widths."""
    q_dims = view.dims(core.q)
    packed = tq.linears == tk.linears == tv.linears and len(tq.linears) == 1
    if packed:
        width = next(iter(tq.linears)).out_features
    else:
        q_w = sum(lin.out_features for lin in tq.linears - tk.linears - tv.linears)
        k_w = sum(lin.out_features for lin in tk.linears - tq.linears - tv.linears)
        v_w = sum(lin.out_features for lin in tv.linears - tq.linears - tk.linears)
        if k_w != v_w or not q_w:
            raise LLMConfigError(f"{where}: cannot split the Q/K/V projections "
                                 f"(q {q_w}, k {k_w}, v {v_w} wide); {CONFIG_ROAD}")
    n_heads, head_dim = core.n_heads, 0
    if q_dims and len(q_dims) == 4 and not n_heads:
        n_heads, head_dim = q_dims[1], q_dims[3]
    elif q_dims and len(q_dims) == 3 and not n_heads:
        head_dim = q_dims[2]
    if packed and not n_heads:
        raise LLMConfigError(f"{where}: packed QKV projection and no head count on Q's shape; "
                             f"{CONFIG_ROAD}")
    if packed:
        head_dim = head_dim or (width // (n_heads + 2 * (core.n_kv_heads or n_heads)))
        q_w = n_heads * head_dim
        k_w = (width - q_w) // 2
    if not head_dim and n_heads:
        head_dim = q_w // n_heads
    if not n_heads and head_dim:
        n_heads = q_w // head_dim
    if (not head_dim or q_w != n_heads * head_dim or k_w <= 0 or k_w % head_dim
            or (packed and q_w + 2 * k_w != width)):
        raise LLMConfigError(f"{where}: cannot read heads x head_dim from Q ({q_dims}) and the "
                             f"projection widths (q {q_w}, k/v {k_w}); {CONFIG_ROAD}")
    n_kv = k_w // head_dim
    if core.n_kv_heads and n_kv != core.n_kv_heads:
        raise LLMConfigError(f"{where}: the attention op says {core.n_kv_heads} KV heads but the "
                             f"K projection holds {n_kv} of {head_dim}; {CONFIG_ROAD}")
    return Heads(n_heads, n_kv, head_dim)
