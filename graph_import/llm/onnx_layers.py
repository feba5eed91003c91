"""The layer kind of each ONNX decoder layer, and what sets differing layers apart in words.

``layer_kind_of(arch, layer)``: the ``LayerKind`` of one detected ``onnx_parts.Layer`` (its
heads, MLP width, gating, experts, biases, parallel block), with the norm, activation and
positions the detectors read for the whole model. ``differing_layers``: a one-line note naming
the layers whose kind is not the main one and the fields that differ (never a tuple dump).
"""

from __future__ import annotations

from collections.abc import Sequence

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.layers import MLP, Attention, LayerKind, MoE
from roofcast.graph_import.llm.onnx_parts import Layer


def layer_kind_of(arch: LLMArch, lay: Layer) -> LayerKind:
    """The kind of detected layer ``lay`` of ``arch`` (module docstring)."""
    h = lay.heads
    mlp = MLP(lay.d_ff, lay.gated, arch.activation, lay.mlp_bias)
    ffn: MLP | MoE = MoE(mlp, lay.n_experts, lay.top_k) if lay.n_experts > 1 else mlp
    attn = Attention(h.n_heads, h.n_kv_heads, h.head_dim, lay.qkv_bias, arch.positions)
    return LayerKind(arch.d_model, attn, ffn, arch.norm, lay.parallel)


def _fields(lay: Layer) -> dict[str, object]:
    h = lay.heads
    return {"heads": h.n_heads, "KV heads": h.n_kv_heads, "head dim": h.head_dim,
            "MLP width": lay.d_ff, "gated MLP": lay.gated, "experts": lay.n_experts,
            "experts per token": lay.top_k, "parallel block": lay.parallel,
            "QKV bias": lay.qkv_bias, "MLP bias": lay.mlp_bias}


def differing_layers(layers: Sequence[Layer], main: Layer) -> str:
    """``layer 0 differs from the other 11 (MLP width 64 vs 48); ...``: words, no repr."""
    ref = _fields(main)
    odd = [i for i, lay in enumerate(layers) if lay.shape != main.shape]
    diffs: dict[str, str] = {}
    for i in odd:
        for k, v in _fields(layers[i]).items():
            if v != ref[k]:
                diffs.setdefault(k, f"{k} {v} vs {ref[k]}")
    shown = ", ".join(str(i) for i in odd[:8]) + (", ..." if len(odd) > 8 else "")
    which = f"layers {shown} differ" if len(odd) > 1 else f"layer {shown} differs"
    return (f"{which} from the other {len(layers) - len(odd)} ({'; '.join(diffs.values())}); "
            "each layer is read as its own kind")
