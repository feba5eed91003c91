"""Field detectors of an ONNX decoder: norm, MLP activation, positions and ``max_context``, each
read from the ops of layer 0 (``DETECTORS``; ``onnx_decoder`` runs them in turn)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import onnx

from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm.onnx_graph import DecoderGraph
from roofcast.graph_import.llm.onnx_parts import CONFIG_ROAD, Found

#: ``max_context`` when the graph holds no position table or rotary cache: LlamaConfig's default
DEFAULT_MAX_CONTEXT = 2048


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
        consumers = view.consumers.get(view.nodes[j].output[0], [])
        if any(view.nodes[c].op_type == "Sub" for c in consumers):
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
#: ops that take cos/sin caches ``[max_context, head_dim / 2]`` as inputs
_ROTARY_CACHE_OPS = frozenset({"RotaryEmbedding", "GroupQueryAttention"})


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
    rotary_inputs = [view.init[t] for n in view.nodes if n.op_type in _ROTARY_CACHE_OPS
                     for t in n.input if t in view.init and len(view.init[t].dims) == 2]
    caches = [t for t in (*tables, *rotary_inputs) if t.dims[1] in (head_dim, head_dim // 2)]
    if caches:
        return {"positions": "rope", "max_context": int(caches[0].dims[0])}
    return {"positions": "rope", "max_context": _default_context(found)}


def _default_context(found: Found) -> int:
    found.notes.append(f"max_context: the graph holds no position table or rotary cache; "
                       f"{DEFAULT_MAX_CONTEXT} assumed (pass max_context, or use config.json's "
                       "max_position_embeddings)")
    return DEFAULT_MAX_CONTEXT


DETECTORS: tuple[Callable[[Found], dict[str, Any]], ...] = (_norm, _activation, _positions)
