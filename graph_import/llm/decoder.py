"""A decoder as a list of layer kinds: the one description serving, training plans and sweeps
cost (``decoder_of(arch)``, built once per ``LLMArch``).

A ``LayerKind`` is an ``Attention`` (query / KV heads of ``head_dim``: MHA, GQA or MQA; a
sliding ``window`` in tokens, 0 = global; attention ``sinks``, 0 = none), an ``MLP`` (gated:
3 matrices of ``d_model x d_ff``, else 2) or an ``MoE`` (``n_experts`` routed MLPs, ``top_k``
per token, ``n_shared`` shared experts, a ``d_model x n_experts`` router), the ``norm`` and
whether attention and MLP run in parallel off one norm. ``Decoder.layers`` holds one kind per
layer; a uniform model repeats one kind, ``groups()`` gives ``(kind, layers)`` in first-use
order. Widths are elements (no units).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from roofcast.graph_import.llm.arch import LLMArch


@dataclass(frozen=True)
class Attention:
    """Self-attention of one layer kind (module docstring)."""

    n_heads: int
    n_kv_heads: int
    head_dim: int
    qkv_bias: bool = False
    positions: str = "rope"
    window: int = 0
    sinks: int = 0

    @property
    def variant(self) -> str:
        """``MHA`` (a KV head per query head), ``MQA`` (one KV head) or ``GQA``."""
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.n_heads // self.n_kv_heads


@dataclass(frozen=True)
class MLP:
    """A feed-forward block (one expert of an ``MoE``): ``d_ff`` channels, ``gated``
    (SwiGLU / GeGLU) or not, its ``activation`` and whether its GEMMs carry biases."""

    d_ff: int
    gated: bool = True
    activation: str = "silu"
    bias: bool = False

    @property
    def up_width(self) -> int:
        """Output channels of the (fused gate/) up projection."""
        return (2 if self.gated else 1) * self.d_ff


@dataclass(frozen=True)
class MoE:
    """Routed experts: ``n_experts`` copies of ``expert``, ``top_k`` per token, plus
    ``n_shared`` experts every token runs (0 today; room for DeepSeek-style models)."""

    expert: MLP
    n_experts: int
    top_k: int
    n_shared: int = 0


@dataclass(frozen=True)
class LayerKind:
    """One decoder layer: attention, then an MLP or MoE, with ``norm`` before each
    (``parallel_block``: one norm feeding both, outputs added)."""

    d_model: int
    attention: Attention
    ffn: MLP | MoE
    norm: str = "rmsnorm"
    parallel_block: bool = False

    @property
    def moe(self) -> MoE | None:
        return self.ffn if isinstance(self.ffn, MoE) else None

    @property
    def mlp(self) -> MLP:
        """The dense MLP, or one expert of the MoE."""
        return self.ffn.expert if isinstance(self.ffn, MoE) else self.ffn


@dataclass(frozen=True)
class Decoder:
    """A decoder-only model as layer kinds plus what wraps them (embedding, head)."""

    name: str
    layers: tuple[LayerKind, ...]
    d_model: int
    vocab: int
    max_context: int
    positions: str = "rope"
    norm: str = "rmsnorm"
    tied_embeddings: bool = False

    @property
    def uniform(self) -> bool:
        """Every layer the same kind."""
        return all(k == self.layers[0] for k in self.layers)

    def groups(self) -> tuple[tuple[LayerKind, int], ...]:
        """``(kind, layers of that kind)`` in order of first use."""
        counts: dict[LayerKind, int] = {}
        for k in self.layers:
            counts[k] = counts.get(k, 0) + 1
        return tuple(counts.items())


def layer_kind(arch: LLMArch) -> LayerKind:
    """The one layer kind of a uniform ``LLMArch``."""
    mlp = MLP(arch.d_ff, arch.gated_mlp, arch.activation, arch.mlp_bias)
    ffn: MLP | MoE = MoE(mlp, arch.n_experts, arch.experts_per_token) \
        if arch.n_experts > 1 else mlp
    attn = Attention(arch.n_heads, arch.n_kv_heads, arch.head_dim, arch.qkv_bias,
                     arch.positions, arch.sliding_window)
    return LayerKind(arch.d_model, attn, ffn, arch.norm, arch.parallel_block)


@lru_cache(maxsize=256)
def decoder_of(arch: LLMArch) -> Decoder:
    """The decoder of ``arch``: ``n_layers`` layers of ``layer_kind(arch)`` (cached)."""
    return Decoder(arch.name, (layer_kind(arch),) * arch.n_layers, arch.d_model, arch.vocab,
                   arch.max_context, arch.positions, arch.norm, arch.tied_embeddings)
