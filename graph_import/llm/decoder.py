"""A decoder as a list of layer kinds: the one description serving, training plans and sweeps
cost (``decoder_of(arch)``, built once per ``LLMArch``).

The kinds (``Attention`` with its window, chunk, sinks, qk-norm or MLA ``Latent``; ``MLP`` or
``MoE`` with shared experts; ``LayerKind``) live in ``layers`` and are re-exported here.
``Decoder.layers`` holds one kind per layer (``LLMArch.kinds``: its ``layers`` when they
differ, else ``n_layers`` of one kind); ``groups()`` gives ``(kind, layers)`` in first-use
order. Widths are elements (no units).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.layers import MLP, Attention, Latent, LayerKind, MoE

__all__ = [
    "MLP",
    "Attention",
    "Decoder",
    "Latent",
    "LayerKind",
    "MoE",
    "decoder_of",
    "layer_kind",
]


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
    """The main layer kind of ``arch`` (all of them when uniform)."""
    return arch.uniform_kind


@lru_cache(maxsize=256)
def decoder_of(arch: LLMArch) -> Decoder:
    """The decoder of ``arch``: its ``kinds``, one per layer (cached)."""
    return Decoder(arch.name, arch.kinds, arch.d_model, arch.vocab,
                   arch.max_context, arch.positions, arch.norm, arch.tied_embeddings)
