"""The layer kinds a decoder is a list of (elements, no units; ``decoder`` builds the list).

``Attention``: query / KV heads of ``head_dim`` (MHA, GQA, MQA); a sliding ``window`` or a
``chunk`` in tokens (0 = global); ``sinks`` learned sink logits per head (gpt-oss; one extra
score per query row); ``qk_norm`` (RMSNorm of Q and K per head); ``latent``: multi-head
latent attention (MLA). ``MLP`` (gated: 3 matrices of ``d_model x d_ff``, else 2) or ``MoE``
(``n_experts`` routed MLPs, ``top_k`` per token, ``n_shared`` always-on experts of the same
width, a ``d_model x n_experts`` router). Parameters per layer:
attention ``d (q + 2 kv) + q d`` (+ QKV bias, + ``2 hd`` qk-norm, + ``H`` sinks); MLA
``d r_q + r_q H (n + r) + d (r_kv + r) + r_kv H (n + v) + H v d`` (+ norms ``r_q + r_kv``);
MLP ``mats d f`` (+ biases); MoE ``(E + S) mlp + d E``; norms ``d`` each (x2 LayerNorm).
KV cache per token and layer: ``2 Hkv hd``; MLA ``r_kv + r`` (one latent, shared by heads).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Latent:
    """MLA (DeepSeek-V2/V3): queries through a ``q_lora_rank`` bottleneck (0: one
    ``d x H (nope + rope)`` projection); keys and values decompressed from a ``kv_lora_rank``
    latent, plus one ``qk_rope_head_dim`` rotary key shared by all heads; per head
    ``qk_nope_head_dim`` + ``qk_rope_head_dim`` query/key channels, ``v_head_dim`` value ones."""

    kv_lora_rank: int
    q_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int

    @property
    def cache_width(self) -> int:
        """Elements one token caches per layer: ``kv_lora_rank + qk_rope_head_dim``."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class Attention:
    """Self-attention of one layer kind (module docstring). With ``latent`` set,
    ``n_kv_heads == n_heads`` and ``head_dim`` = nope + rope (the decompressed form)."""

    n_heads: int
    n_kv_heads: int
    head_dim: int
    qkv_bias: bool = False
    positions: str = "rope"
    window: int = 0
    sinks: int = 0
    qk_norm: bool = False
    chunk: int = 0
    latent: Latent | None = None

    @property
    def variant(self) -> str:
        """``MLA``, ``MHA`` (a KV head per query head), ``MQA`` (one KV head) or ``GQA``."""
        if self.latent is not None:
            return "MLA"
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
    def v_dim(self) -> int:
        """Width of the attention output (the O projection's input)."""
        return self.n_heads * (self.latent.v_head_dim if self.latent else self.head_dim)

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.n_heads // self.n_kv_heads

    @property
    def cache_width(self) -> int:
        """KV-cache elements per token: ``2 Hkv hd``, MLA ``kv_lora_rank + rope``."""
        return self.latent.cache_width if self.latent else 2 * self.kv_dim

    def matrix_params(self, d_model: int) -> int:
        """Projection weight elements (module docstring)."""
        m = self.latent
        if m is None:
            return d_model * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d_model
        h, qk = self.n_heads, m.qk_nope_head_dim + m.qk_rope_head_dim
        q = d_model * m.q_lora_rank + m.q_lora_rank * h * qk if m.q_lora_rank \
            else d_model * h * qk
        return (q + d_model * m.cache_width + m.kv_lora_rank * h * (m.qk_nope_head_dim
                + m.v_head_dim) + h * m.v_head_dim * d_model)

    def small_params(self) -> int:
        """Biases, qk-norm gains, sink logits and MLA's latent norms."""
        bias = (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0
        latent = (self.latent.q_lora_rank + self.latent.kv_lora_rank) if self.latent else 0
        return bias + (2 * self.head_dim if self.qk_norm else 0) + self.sinks * self.n_heads \
            + latent

    def params(self, d_model: int) -> int:
        return self.matrix_params(d_model) + self.small_params()


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

    @property
    def mats(self) -> int:
        return 3 if self.gated else 2

    def params(self, d_model: int) -> int:
        bias = (self.d_ff * (self.mats - 1) + d_model) if self.bias else 0
        return self.mats * d_model * self.d_ff + bias


@dataclass(frozen=True)
class MoE:
    """Routed experts: ``n_experts`` copies of ``expert``, ``top_k`` per token, plus
    ``n_shared`` experts of the same width every token runs (DeepSeek, GLM-4.5, Llama 4)."""

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

    @property
    def norm_params(self) -> int:
        return (1 if self.parallel_block else 2) * self.d_model * \
            (2 if self.norm == "layernorm" else 1)

    @property
    def params(self) -> int:
        """Parameters of one layer (module docstring)."""
        moe, one = self.moe, self.mlp.params(self.d_model)
        ffn = one if moe is None else \
            (moe.n_experts + moe.n_shared) * one + self.d_model * moe.n_experts
        return self.attention.params(self.d_model) + ffn + self.norm_params

    @property
    def active_params(self) -> int:
        """Parameters a token uses: ``top_k + n_shared`` experts of an MoE layer."""
        moe = self.moe
        idle = 0 if moe is None else max(moe.n_experts - moe.top_k, 0)
        return self.params - idle * self.mlp.params(self.d_model)
