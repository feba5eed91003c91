"""Find a decoder-only LLM's structure in an ONNX graph and return its ``LLMArch``.

The ONNX road and the ``config.json`` road give the same ``LLMArch``, so both take the same road
to kernels. Works on Hugging Face exports with or without ``past_key_values`` inputs (TorchScript
or dynamo exporter), eager or fused attention (``Attention``, ``MultiHeadAttention``,
``GroupQueryAttention``), MHA/GQA/MQA, RoPE or learned positions, gated MLPs and stacked or
unrolled MoE experts. Only initializer dims are read: weightless exports work, and the model is
loaded by ``graph_import.load.load_model`` (external data never opened).

How (each step a small detector):

1. token embedding: a ``Gather`` of the ids input from a 2-D ``[vocab, d_model]`` table;
   LM head: the last linear with ``out = vocab``; tied when it reads the embedding table;
2. attention cores (``CORE_FINDERS``): eager ``MatMul(Q, K^T) -> Softmax -> MatMul(., V)``
   between activations, or a fused attention op; ``n_layers`` = number of cores;
3. shapes made concrete at ``batch=1, sequence=8, past=4`` (``decoder_dims``) to read heads and
   ``head_dim`` off Q (``[b, heads, s, head_dim]``) or the op's ``num_heads``/``kv_num_heads``;
4. per layer: Q/K/V projections are the linears that the core's Q/K/V are traced back to
   (one packed linear: ``q + 2 kv`` wide); the output projection is the linear fed by the core;
   the router is the linear feeding a ``TopK`` (its width = ``n_experts``, TopK's ``k``); the
   rest are MLP matrices: ``d_ff`` = input width of those writing ``d_model``, gated when they
   hold ``3 d_model d_ff`` per expert (2 otherwise); biases are Adds of 1-D initializers;
5. KV inputs/outputs: float rank-4 graph inputs that the core's K/V trace back to, graph outputs
   on that trace (names as the export gives them); fused ops name them as inputs/outputs;
6. norm, activation and positions from the ops of layer 0 (``NORM_OPS``, ``ACTIVATIONS``).

``max_context`` comes from a learned position table or a gathered rotary cache; when the graph
has neither (RoPE computed on the fly) it is ``DEFAULT_MAX_CONTEXT`` with a note, or the
caller's ``max_context``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import onnx
from onnx import ModelProto, TensorProto

from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.onnx_graph import DecoderGraph, Linear
from roofcast.graph_import.types import Graph

#: ``max_context`` when the graph holds no position table or rotary cache: LlamaConfig's default
DEFAULT_MAX_CONTEXT = 2048
#: dims the detection binds to make shapes concrete (small: the import is cheap)
DETECT_SEQUENCE, DETECT_PAST = 8, 4

CONFIG_ROAD = "give the model's Hugging Face config.json instead (roofcast llm path/to/config.json)"


@dataclass(frozen=True)
class DecoderInfo:
    """What ``detect_decoder`` found.

    ``kv_inputs``/``kv_outputs``: the graph's past and present KV tensors, ordered layer by layer
    (key, value), named as the export names them; empty when the export has none.
    ``attention``: ``mha`` (kv heads = heads), ``gqa`` or ``mqa`` (one kv head).
    """

    arch: LLMArch
    kv_inputs: tuple[str, ...]
    kv_outputs: tuple[str, ...]
    layers: int
    attention: str
    has_kv_cache: bool
    notes: tuple[str, ...] = ()


def arch_from_onnx(source: Any, name: str | None = None, *, max_context: int | None = None) -> LLMArch:
    """The ``LLMArch`` of an ONNX decoder (path or bytes); see ``detect_decoder``."""
    return detect_decoder(source, name, max_context=max_context).arch


def detect_decoder(source: Any, name: str | None = None, *,
                   max_context: int | None = None) -> DecoderInfo:
    """Load ``source`` safely and find its decoder structure (module docstring).

    Raises ``LLMConfigError`` naming what was not found (and suggesting the config.json road)
    when the graph is not a decoder-only LLM or a part cannot be determined; ``ModelImportError``
    for a file that is not a loadable ONNX model.
    """
    from roofcast.graph_import.load import load_model
    from roofcast.graph_import.shapes import infer_concrete

    model = load_model(source)
    label = _label(source, model)
    plain = DecoderGraph(model)
    emb = _token_embedding(plain, label)
    cores = _find_cores(plain)
    if not cores:
        raise LLMConfigError(
            f"{label}: found no attention (no Softmax between two activation MatMuls and no fused "
            f"attention op): not a transformer decoder that roofcast can read; {CONFIG_ROAD}")
    head = _lm_head(plain, emb, label)
    shapes = infer_concrete(model, decoder_dims(model, emb.ids_input))
    view = DecoderGraph(model, shapes)
    cores = _find_cores(view)
    layers = [_layer(view, cores, i, head, emb.d_model, label) for i in range(len(cores))]
    first = layers[0]
    for i, lay in enumerate(layers[1:], start=1):
        if lay.shape != first.shape:
            raise LLMConfigError(
                f"{label}: layer {i} differs from layer 0 ({lay.shape} vs {first.shape}); "
                f"LLMArch describes uniform layers; {CONFIG_ROAD}")
    notes: list[str] = []
    found = Found(view=view, emb=emb, head=head, cores=cores, layers=layers, notes=notes)
    fields = {}
    for detect in DETECTORS:
        fields.update(detect(found))
    if max_context is not None:
        fields["max_context"] = _positive(max_context, "max_context")
        notes[:] = [n for n in notes if not n.startswith("max_context")]
    h = first.heads
    arch = LLMArch(
        name=name or label, family="onnx", n_layers=len(layers), d_model=emb.d_model,
        n_heads=h.n_heads, n_kv_heads=h.n_kv_heads, head_dim=h.head_dim, d_ff=first.d_ff,
        vocab=emb.vocab, gated_mlp=first.gated, n_experts=first.n_experts,
        experts_per_token=first.top_k, tied_embeddings=head.weight == emb.table,
        parallel_block=first.parallel, qkv_bias=first.qkv_bias, mlp_bias=first.mlp_bias,
        source=label, **fields)
    kv_in = tuple(t for lay in layers for t in lay.kv_inputs)
    kv_out = tuple(t for lay in layers for t in lay.kv_outputs)
    if kv_in and len(kv_in) != 2 * len(layers):
        notes.append(f"found {len(kv_in)} past KV inputs for {len(layers)} layers "
                     "(expected a key and a value per layer)")
    if head.weight != emb.table:
        notes.append("the LM head is its own initializer: counted untied (an exporter that copies "
                     "a tied head, as TorchScript does, cannot be told apart without weights)")
    kind = "mha" if h.n_kv_heads == h.n_heads else "mqa" if h.n_kv_heads == 1 else "gqa"
    return DecoderInfo(arch=arch, kv_inputs=kv_in, kv_outputs=kv_out, layers=len(layers),
                       attention=kind, has_kv_cache=bool(kv_in), notes=tuple(notes))


def decoder_dims(model: ModelProto, ids_input: str | None = None, *, batch: int = 1,
                 sequence: int = DETECT_SEQUENCE, past: int = DETECT_PAST) -> dict[str, int]:
    """Bindings for every symbolic dim of a decoder's inputs (for ``import_model``/shape
    inference): axis 0 ``batch``; the ids input's axis 1 ``sequence``; the other axes of float
    rank-4 inputs (past K/V) ``past``; an attention mask's axis 1 ``past + sequence`` when there
    are past inputs (else ``sequence``); other int inputs' axis 1 ``sequence``; anything else 1.
    Derived dims (``past_sequence + sequence``) are left to the import to evaluate."""
    init = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in init]
    has_past = any(_is_kv_input(vi) for vi in inputs)
    ids_input = ids_input or next((vi.name for vi in inputs if "input_ids" in vi.name), None)
    out: dict[str, int] = {}

    def bind(vi: onnx.ValueInfoProto, axis: int, d: Any, value: int) -> None:
        if d.dim_param and not d.dim_param.isidentifier():
            return  # an expression: evaluated from the names bound here
        key = d.dim_param or f"{vi.name}:{axis}"
        out.setdefault(key, value)

    ordered = sorted(inputs, key=lambda vi: (not _is_kv_input(vi), vi.name != ids_input))
    for vi in ordered:
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value"):
                continue
            if axis == 0:
                value = batch
            elif _is_kv_input(vi):
                value = past
            elif vi.name == ids_input or axis != 1:
                value = sequence if axis == 1 else 1
            elif "mask" in vi.name.lower():
                value = past + sequence if has_past else sequence
            else:
                value = sequence
            bind(vi, axis, d, value)
    return out


# ------------------------------------------------------------------------------- pieces


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


def _label(source: Any, model: ModelProto) -> str:
    if isinstance(source, str | os.PathLike):
        return os.path.splitext(os.path.basename(os.fspath(source)))[0]
    return model.graph.name or "onnx-model"


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise LLMConfigError(f"{what} must be a positive integer, not {value!r}")
    return value


def _is_kv_input(vi: onnx.ValueInfoProto) -> bool:
    tt = vi.type.tensor_type
    return tt.elem_type in _FLOATS and len(tt.shape.dim) == 4


_FLOATS = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16,
                     TensorProto.DOUBLE})
_INDEX_OPS = frozenset({"Cast", "Reshape", "Unsqueeze", "Flatten", "Squeeze", "Identity"})


def _token_embedding(view: DecoderGraph, label: str) -> Embedding:
    """The Gather of graph-input ids from a 2-D float table (the largest if several)."""
    inputs = {vi.name for vi in view.inputs}
    found: list[Embedding] = []
    for i, node in enumerate(view.nodes):
        if node.op_type != "Gather" or len(node.input) < 2:
            continue
        table = view.init.get(node.input[0])
        if table is None or len(table.dims) != 2 or table.data_type not in _FLOATS:
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


def _lm_head(view: DecoderGraph, emb: Embedding, label: str) -> Linear:
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


def _find_cores(view: DecoderGraph) -> list[Core]:
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


def _layer(view: DecoderGraph, cores: list[Core], index: int, head: Linear, d_model: int,
           label: str) -> Layer:
    core = cores[index]
    where = f"{label}: layer {index}"
    tq, tk, tv = (_trace(view, t) for t in (core.q, core.k, core.v))
    if not (tq.linears and tk.linears and tv.linears):
        raise LLMConfigError(f"{where}: the attention's Q/K/V come from no weight matmul; "
                             f"{CONFIG_ROAD}")
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


def _kv_pair(view: DecoderGraph, core: Core, tk: Trace, tv: Trace) -> tuple[str, ...]:
    if core.kv_inputs:
        return core.kv_inputs
    kv = {vi.name for vi in view.inputs if _is_kv_input(vi)}
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
    if not head_dim or q_w != n_heads * head_dim or k_w % head_dim:
        raise LLMConfigError(f"{where}: cannot read heads x head_dim from Q ({q_dims}) and the "
                             f"projection width {q_w}; {CONFIG_ROAD}")
    return Heads(n_heads, k_w // head_dim, head_dim)


# ------------------------------------------------------------------------------- field detectors


def _layer0_ops(found: Found, tensors: Iterable[str], forward: bool, limit: int) -> set[int]:
    view = found.view
    if forward:
        return set(view.walk_forward(tensors, lambda n: True, limit=limit))
    return set(view.walk_back(tensors, lambda n: True,
                              stop=lambda j: j in view.linear_at or j == found.emb.gather,
                              limit=limit))


#: op -> norm; decomposed norms are read from ReduceMean chains (``_decomposed_norm``)
NORM_OPS: dict[str, str] = {
    "LayerNormalization": "layernorm", "SkipLayerNormalization": "layernorm",
    "SimplifiedLayerNormalization": "rmsnorm", "SkipSimplifiedLayerNormalization": "rmsnorm",
    "RMSNormalization": "rmsnorm",
}


def _norm(found: Found) -> dict[str, Any]:
    view = found.view
    q_in = found.layers[0].qkv[0].input
    region = _layer0_ops(found, [q_in], forward=False, limit=80)
    for j in sorted(region, reverse=True):
        norm = NORM_OPS.get(view.nodes[j].op_type)
        if norm:
            return {"norm": norm}
    decomposed = _decomposed_norm(view, region)
    if decomposed:
        return {"norm": decomposed}
    raise LLMConfigError(f"found no normalisation before layer 0's attention (LayerNormalization, "
                         f"RMSNormalization or a ReduceMean chain); {CONFIG_ROAD}")


def _decomposed_norm(view: DecoderGraph, region: set[int]) -> str | None:
    """``ReduceMean(x)`` feeding a ``Sub``: LayerNorm; ``ReduceMean(x*x or x^2)``: RMSNorm."""
    means = [j for j in region if view.nodes[j].op_type == "ReduceMean"]
    for j in means:
        if any(view.nodes[c].op_type == "Sub" for c in view.consumers.get(view.nodes[j].output[0], [])):
            return "layernorm"
    for j in means:
        src = view.node_of(view.nodes[j].input[0])
        if src is not None and (src.op_type == "Pow" or
                                (src.op_type == "Mul" and src.input[0] == src.input[1])):
            return "rmsnorm"
    return None


#: (test on a node, activation) in priority order: the first that matches layer 0's MLP wins
ACTIVATIONS: tuple[tuple[Callable[[onnx.NodeProto, DecoderGraph], bool], str], ...] = (
    (lambda n, v: n.op_type == "Gelu" and v.attr(n, "approximate", b"none") in ("tanh", b"tanh"),
     "gelu_tanh"),
    (lambda n, v: n.op_type in ("FastGelu", "Tanh"), "gelu_tanh"),
    (lambda n, v: n.op_type in ("Gelu", "BiasGelu", "Erf"), "gelu"),
    (lambda n, v: n.op_type in ("Sigmoid", "Silu", "Swish", "QuickGelu"), "silu"),
    (lambda n, v: n.op_type == "Relu", "relu"),
)


def _activation(found: Found) -> dict[str, Any]:
    view = found.view
    mlp = found.layers[0].mlp
    downs = {lin for lin in mlp if lin.out_features == found.emb.d_model}
    ups = [lin for lin in mlp if lin not in downs]
    fwd = _layer0_ops(found, [lin.output for lin in ups], forward=True, limit=300)
    back = _layer0_ops(found, [lin.input for lin in downs], forward=False, limit=300)
    region = [view.nodes[j] for j in sorted(fwd & back)]
    for test, name in ACTIVATIONS:
        if any(test(n, view) for n in region):
            return {"activation": name}
    ops = sorted({n.op_type for n in region})
    raise LLMConfigError(f"cannot tell the MLP activation from the ops between layer 0's MLP "
                         f"matmuls ({', '.join(ops) or 'none'}); {CONFIG_ROAD}")


_ROPE_OPS = frozenset({"Sin", "Cos", "RotaryEmbedding"})


def _positions(found: Found) -> dict[str, Any]:
    view, emb = found.view, found.emb
    tables = [view.init[n.input[0]] for n in view.nodes
              if n.op_type == "Gather" and n.input[0] in view.init and n.input[0] != emb.table
              and len(view.init[n.input[0]].dims) == 2]
    learned = [t for t in tables if t.dims[1] == emb.d_model]
    if learned:
        return {"positions": "learned", "max_context": int(learned[0].dims[0])}
    head_dim = found.layers[0].heads.head_dim
    rope = any(n.op_type in _ROPE_OPS for n in view.nodes) or any(
        view.attr(n, "do_rotary", 0) for n in view.nodes if n.op_type == "GroupQueryAttention")
    if not rope:
        found.notes.append("positions: no position table and no rotary embedding found "
                           "(ALiBi is not told apart): 'none'")
        return {"positions": "none", "max_context": _default_context(found)}
    caches = [t for t in tables if t.dims[1] in (head_dim, head_dim // 2)]
    if caches:
        return {"positions": "rope", "max_context": int(caches[0].dims[0])}
    return {"positions": "rope", "max_context": _default_context(found)}


def _default_context(found: Found) -> int:
    found.notes.append(f"max_context: the graph holds no position table or rotary cache; "
                       f"{DEFAULT_MAX_CONTEXT} assumed (pass max_context, or use config.json's "
                       "max_position_embeddings)")
    return DEFAULT_MAX_CONTEXT


DETECTORS: tuple[Callable[[Found], dict[str, Any]], ...] = (_norm, _activation, _positions)


def decoder_graph(source: Any, sequence: int, past: int = 0, batch: int = 1) -> Graph:
    """``import_model`` of an ONNX decoder with its dims bound by ``decoder_dims``: a prefill of
    ``sequence`` tokens (``past = 0``) or a step after ``past`` cached tokens. An export with
    past KV inputs needs ``past >= 1`` (a zero-sized dim is refused by the import); the summed
    node costs cross-check ``LLMArch``-based kernels."""
    from roofcast.graph_import import import_model
    from roofcast.graph_import.load import load_model

    model = load_model(source)
    if past < 1 and any(_is_kv_input(vi) for vi in model.graph.input):
        raise LLMConfigError("this export takes past K/V inputs: give past >= 1 (the import "
                             "cannot bind a zero-length past)")
    ids = _token_embedding(DecoderGraph(model), _label(source, model)).ids_input
    dims = decoder_dims(model, ids, batch=batch, sequence=sequence, past=past)
    return import_model(model.SerializeToString(), dims=dims, name=_label(source, model))


def onnx_weight_elements(source: Any) -> int:
    """Elements of the model's float initializers over 1-D scalars (what a runtime loads as
    weights; shape constants excluded): for checking ``LLMArch.params`` against a file."""
    from roofcast.graph_import.load import load_model

    model = load_model(source)
    return sum(math.prod(t.dims) for t in model.graph.initializer
               if t.data_type in _FLOATS and math.prod(t.dims) > 1)


__all__ = ["DEFAULT_MAX_CONTEXT", "DecoderInfo", "arch_from_onnx", "decoder_dims", "decoder_graph",
           "detect_decoder", "onnx_weight_elements"]
