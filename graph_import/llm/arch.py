"""``LLMArch``: the structure of a decoder-only transformer that serving predictions need.

Read from a Hugging Face ``config.json`` (``hf_config``) or an ONNX decoder (``onnx_decoder``);
both give the same ``LLMArch`` and the same road to kernels (``predictor.llm.kernels``).

Counts (no units: elements; ``_bytes`` names are bytes):

* attention projections per layer: Q ``d_model x n_heads*head_dim``, K and V
  ``d_model x n_kv_heads*head_dim`` each, O ``n_heads*head_dim x d_model``;
* MLP per layer and expert: gated (SwiGLU/GeGLU) ``3 * d_model * d_ff``, else
  ``2 * d_model * d_ff``; MoE layers hold ``n_experts`` of them plus a router
  ``d_model x n_experts``; a token runs ``experts_per_token`` of them;
* KV cache per token = ``2 * n_layers * n_kv_heads * head_dim`` elements (K and V).
A model whose layers differ (dense then MoE, windows, MLA) also carries ``layers``, one
``layers.LayerKind`` per layer; the counts then sum over them (``kinds``).
"""

from __future__ import annotations

from dataclasses import dataclass

from roofcast.graph_import.llm.layers import MLP, Attention, LayerKind, MoE

#: activation functions of the MLP (``act``) the kernel builder knows.
ACTIVATIONS: tuple[str, ...] = ("silu", "gelu", "gelu_tanh", "relu")
NORMS: tuple[str, ...] = ("rmsnorm", "layernorm")
POSITIONS: tuple[str, ...] = ("rope", "learned", "alibi", "none")


@dataclass(frozen=True)
class LLMArch:
    """A decoder-only LLM's shape (module docstring for the counts).

    ``family``: the reader that produced it (``llama``, ``mistral``, ``mixtral``, ``qwen2``,
    ``gemma``, ``gpt2``, ``gptj``, ``gpt_neox``, ``opt``, ``falcon``, ``onnx``).
    ``max_context``: the model's maximum context in tokens (``max_position_embeddings``).
    ``parallel_block``: attention and MLP read the same normed input and are added together
    (GPT-J, GPT-NeoX ``use_parallel_residual``, Falcon); one norm per layer then.
    ``sliding_window``: attention window in tokens (Mistral), 0 when attention is full.
    ``source``: where it came from (bundled name, a config path, an ONNX path).
    ``notes``: what the reader assumed for fields the source leaves out (shown with predictions).
    ``layers``: one kind per layer when they differ (empty: ``n_layers`` of ``uniform_kind``);
    the scalar fields then describe the model's main kind (its MoE layers, its first
    attention), which sharding checks and captions read.
    ``weight_dtype``: the dtype the weights are stored in when the source says so (a
    ``quantization_config``: ``fp8``, ``nvfp4``, ``mxfp4``, ``int4``); "" when it does not.
    """

    name: str
    family: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    max_context: int
    gated_mlp: bool = True
    activation: str = "silu"
    norm: str = "rmsnorm"
    positions: str = "rope"
    n_experts: int = 1
    experts_per_token: int = 1
    tied_embeddings: bool = False
    parallel_block: bool = False
    qkv_bias: bool = False
    mlp_bias: bool = False
    sliding_window: int = 0
    source: str = ""
    notes: tuple[str, ...] = ()
    layers: tuple[LayerKind, ...] = ()
    weight_dtype: str = ""

    def __post_init__(self) -> None:
        if self.layers and len(self.layers) != self.n_layers:
            raise ValueError(f"{self.name}: {len(self.layers)} layer kinds for "
                             f"{self.n_layers} layers")

    @property
    def uniform_kind(self) -> LayerKind:
        """The one layer kind the scalar fields describe."""
        mlp = MLP(self.d_ff, self.gated_mlp, self.activation, self.mlp_bias)
        ffn: MLP | MoE = MoE(mlp, self.n_experts, self.experts_per_token) \
            if self.n_experts > 1 else mlp
        attn = Attention(self.n_heads, self.n_kv_heads, self.head_dim, self.qkv_bias,
                         self.positions, self.sliding_window)
        return LayerKind(self.d_model, attn, ffn, self.norm, self.parallel_block)

    @property
    def kinds(self) -> tuple[LayerKind, ...]:
        """One layer kind per layer: ``layers``, or ``n_layers`` of ``uniform_kind``."""
        return self.layers or (self.uniform_kind,) * self.n_layers

    @property
    def uniform(self) -> bool:
        """Every layer the same kind."""
        return not self.layers or all(k == self.layers[0] for k in self.layers)

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def attention_params(self) -> int:
        """Parameters of one layer's attention projections (biases included when present)."""
        w = self.d_model * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.d_model
        b = (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0
        return w + b

    @property
    def expert_params(self) -> int:
        """Parameters of one MLP (one expert)."""
        mats = 3 if self.gated_mlp else 2
        bias = (self.d_ff * (mats - 1) + self.d_model) if self.mlp_bias else 0
        return mats * self.d_model * self.d_ff + bias

    @property
    def layer_params(self) -> int:
        """Parameters of one layer: attention + experts (+ router) + norms."""
        router = self.d_model * self.n_experts if self.n_experts > 1 else 0
        norms = (
            (1 if self.parallel_block else 2)
            * self.d_model
            * (2 if self.norm == "layernorm" else 1)
        )
        return self.attention_params + self.n_experts * self.expert_params + router + norms

    @property
    def embedding_params(self) -> int:
        """Token embedding (+ learned positions) + LM head unless tied + final norm."""
        pos = self.max_context * self.d_model if self.positions == "learned" else 0
        head = 0 if self.tied_embeddings else self.vocab * self.d_model
        return self.vocab * self.d_model + pos + head + self.d_model

    @property
    def params(self) -> int:
        """Total parameters (the layers' sum + embeddings and head)."""
        if not self.layers:
            return self.n_layers * self.layer_params + self.embedding_params
        return sum(k.params for k in self.layers) + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters a token uses (MoE: ``experts_per_token`` experts of each layer)."""
        if self.layers:
            return sum(k.active_params for k in self.layers) + self.embedding_params
        inactive = (self.n_experts - self.experts_per_token) * self.expert_params
        return self.params - self.n_layers * max(inactive, 0)

    def kv_elements_per_token(self) -> int:
        """KV-cache elements one token adds over all layers: ``2 * n_layers * n_kv_heads *
        head_dim``; per layer kind ``Attention.cache_width`` (MLA: its latent)."""
        if self.layers:
            return sum(k.attention.cache_width for k in self.layers)
        return 2 * self.n_layers * self.kv_dim
