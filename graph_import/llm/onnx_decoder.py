"""Find a decoder-only LLM's structure in an ONNX graph and return its ``LLMArch``.

The ONNX road and the ``config.json`` road give the same ``LLMArch`` (so the same
``decoder_of`` layer kinds). Works on Hugging Face exports with or without past KV inputs,
eager or fused attention, MHA/GQA/MQA, RoPE or learned positions, gated MLPs and MoE; only
initializer dims are read. Detectors: the token embedding and LM head; attention cores
(``CORE_FINDERS``, their count = ``n_layers``); heads and ``head_dim`` at concrete dims
(``decoder_dims``); per layer the Q/K/V, output, router and MLP linears; KV inputs; norm,
activation and positions from layer 0. Layers that differ (widths, heads, experts) are
read as one kind each (``onnx_layers``), the scalar fields from the most common one.
``max_context``: a learned or rotary table, else ``DEFAULT_MAX_CONTEXT`` with a note.
Step details: docs/design/decoder.md.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import onnx
from onnx import ModelProto

from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.onnx_fields import DEFAULT_MAX_CONTEXT, DETECTORS
from roofcast.graph_import.llm.onnx_graph import DecoderGraph
from roofcast.graph_import.llm.onnx_layers import differing_layers, layer_kind_of
from roofcast.graph_import.llm.onnx_parts import (
    CONFIG_ROAD,
    FLOATS,
    Found,
    find_cores,
    is_kv_input,
    label_of,
    layer_of,
    lm_head,
    positive_int,
    token_embedding,
)
from roofcast.graph_import.types import Graph

#: dims the detection binds to make shapes concrete (small: the import is cheap)
DETECT_SEQUENCE, DETECT_PAST = 8, 4


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


def arch_from_onnx(
    source: Any, name: str | None = None, *, max_context: int | None = None
) -> LLMArch:
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
    label = label_of(source, model)
    plain = DecoderGraph(model)
    emb = token_embedding(plain, label)
    cores = find_cores(plain)
    if not cores:
        raise LLMConfigError(
            f"{label}: found no attention (no Softmax between two activation MatMuls and no fused "
            f"attention op): not a transformer decoder that roofcast can read; {CONFIG_ROAD}")
    head = lm_head(plain, emb, label)
    shapes = infer_concrete(model, decoder_dims(model, emb.ids_input))
    view = DecoderGraph(model, shapes)
    cores = find_cores(view)
    layers = [layer_of(view, cores, i, head, emb.d_model, label) for i in range(len(cores))]
    shapes = Counter(lay.shape for lay in layers)
    first = next(lay for lay in layers if lay.shape == shapes.most_common(1)[0][0])
    notes: list[str] = [differing_layers(layers, first)] if len(shapes) > 1 else []
    found = Found(view=view, emb=emb, head=head, cores=cores, layers=layers, notes=notes)
    fields = {}
    for detect in DETECTORS:
        fields.update(detect(found))
    if max_context is not None:
        fields["max_context"] = positive_int(max_context, "max_context")
        notes[:] = [n for n in notes if not n.startswith("max_context")]
    h = first.heads
    arch = LLMArch(
        name=name or label, family="onnx", n_layers=len(layers), d_model=emb.d_model,
        n_heads=h.n_heads, n_kv_heads=h.n_kv_heads, head_dim=h.head_dim, d_ff=first.d_ff,
        vocab=emb.vocab, gated_mlp=first.gated, n_experts=first.n_experts,
        experts_per_token=first.top_k, tied_embeddings=head.weight == emb.table,
        parallel_block=first.parallel, qkv_bias=first.qkv_bias, mlp_bias=first.mlp_bias,
        source=label, **fields)
    if len(shapes) > 1:
        arch = replace(arch, layers=tuple(layer_kind_of(arch, lay) for lay in layers))
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
    has_past = any(is_kv_input(vi) for vi in inputs)
    ids_input = ids_input or next((vi.name for vi in inputs if "input_ids" in vi.name), None)
    out: dict[str, int] = {}

    def bind(vi: onnx.ValueInfoProto, axis: int, d: Any, value: int) -> None:
        if d.dim_param and not d.dim_param.isidentifier():
            return  # an expression: evaluated from the names bound here
        key = d.dim_param or f"{vi.name}:{axis}"
        out.setdefault(key, value)

    ordered = sorted(inputs, key=lambda vi: (not is_kv_input(vi), vi.name != ids_input))
    for vi in ordered:
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value"):
                continue
            if axis == 0:
                value = batch
            elif is_kv_input(vi):
                value = past
            elif vi.name == ids_input or axis != 1:
                value = sequence if axis == 1 else 1
            elif "mask" in vi.name.lower():
                value = past + sequence if has_past else sequence
            else:
                value = sequence
            bind(vi, axis, d, value)
    return out


def decoder_graph(source: Any, sequence: int, past: int = 0, batch: int = 1) -> Graph:
    """``import_model`` of an ONNX decoder with its dims bound by ``decoder_dims``: a prefill of
    ``sequence`` tokens (``past = 0``) or a step after ``past`` cached tokens. An export with
    past KV inputs needs ``past >= 1`` (a zero-sized dim is refused by the import); the summed
    node costs cross-check ``LLMArch``-based kernels."""
    from roofcast.graph_import import import_model
    from roofcast.graph_import.load import load_model

    model = load_model(source)
    if past < 1 and any(is_kv_input(vi) for vi in model.graph.input):
        raise LLMConfigError("this export takes past K/V inputs: give past >= 1 (the import "
                             "cannot bind a zero-length past)")
    ids = token_embedding(DecoderGraph(model), label_of(source, model)).ids_input
    dims = decoder_dims(model, ids, batch=batch, sequence=sequence, past=past)
    return import_model(model.SerializeToString(), dims=dims, name=label_of(source, model))


def onnx_weight_elements(source: Any) -> int:
    """Elements of the model's float initializers over 1-D scalars (what a runtime loads as
    weights; shape constants excluded): for checking ``LLMArch.params`` against a file."""
    from roofcast.graph_import.load import load_model

    model = load_model(source)
    return sum(math.prod(t.dims) for t in model.graph.initializer
               if t.data_type in FLOATS and math.prod(t.dims) > 1)


__all__ = ["DEFAULT_MAX_CONTEXT", "DecoderInfo", "arch_from_onnx", "decoder_dims", "decoder_graph",
           "detect_decoder", "onnx_weight_elements"]
