"""Tiny decoder-only transformers built with onnx.helper, for fast detection tests.

``tiny_decoder(**spec)`` returns ModelProto bytes of a causal LM with the structure a Hugging Face
export has (token embedding Gather, per layer norm -> Q/K/V matmuls -> heads reshape -> RoPE ->
(past concat) -> (GQA repeat) -> QK^T -> Softmax -> AV -> output projection -> residual -> norm
-> MLP -> residual; final norm; LM head), or a fused attention op instead of the eager core.
Weights are real (small) initializers, so ``params`` is what the file holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass(frozen=True)
class Spec:
    layers: int = 2
    d_model: int = 32
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 8
    d_ff: int = 48
    vocab: int = 64
    gated: bool = True
    activation: str = "silu"  # silu | gelu | gelu_tanh | relu
    norm: str = "rmsnorm"  # rmsnorm (decomposed) | layernorm (op) | rms_op (RMSNormalization)
    positions: str = "rope"  # rope | learned
    max_positions: int = 128
    qkv_bias: bool = False
    mlp_bias: bool = False
    packed_qkv: bool = False
    tied: bool = False
    past: bool = False
    experts: int = 1
    top_k: int = 2
    attention: str = "eager"  # eager | gqa_op (com.microsoft GroupQueryAttention) | onnx_op
    parallel: bool = False
    nbits: bool = False  # 4-bit MatMulNBits linears (onnxruntime-genai style)
    rotary_cache: int = 0  # GroupQueryAttention cos/sin caches of this many positions
    cross: bool = False  # K/V projected from an ``encoder_hidden_states`` input
    layer_d_ff: tuple[int, ...] = ()  # per-layer MLP widths (non-uniform decoders)
    layer_kv_heads: tuple[int, ...] = ()  # per-layer KV heads


class _B:
    def __init__(self, spec: Spec):
        self.s = spec
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(0)
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def w(self, *dims: int, name: str = "w") -> str:
        n = self.name(name)
        self.inits.append(numpy_helper.from_array(
            self.rng.standard_normal(dims).astype(np.float32) * 0.02, n))
        return n

    def c(self, value, dtype=np.int64) -> str:
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), n))
        return n

    def op(
        self, op_type: str, inputs: list[str], n_out: int = 1, domain: str = "", **attrs
    ) -> str | list[str]:
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type),
                                           domain=domain, **attrs))
        return outs[0] if n_out == 1 else outs

    def linear(self, x: str, k: int, n: int, bias: bool) -> str:
        if self.s.nbits:
            blocks = k // 16
            packed = self.name("qweight")
            self.inits.append(numpy_helper.from_array(np.zeros((n, blocks, 8), np.uint8), packed))
            y = self.op("MatMulNBits", [x, packed, self.w(n * blocks, name="scales")],
                        domain="com.microsoft", K=k, N=n, bits=4, block_size=16)
            return self.op("Add", [y, self.w(n, name="b")]) if bias else y
        y = self.op("MatMul", [x, self.w(k, n)])
        return self.op("Add", [y, self.w(n, name="b")]) if bias else y

    def norm(self, x: str) -> str:
        d = self.s.d_model
        if self.s.norm == "layernorm":
            return self.op("LayerNormalization", [x, self.w(d, name="ln"), self.w(d, name="lnb")],
                           axis=-1)
        if self.s.norm == "rms_op":
            return self.op("RMSNormalization", [x, self.w(d, name="rms")], axis=-1)
        sq = self.op("Pow", [x, self.c(2.0, np.float32)])
        mean = self.op("ReduceMean", [sq, self.c([-1])], keepdims=1)
        root = self.op("Sqrt", [self.op("Add", [mean, self.c(1e-6, np.float32)])])
        return self.op("Mul", [self.op("Div", [x, root]), self.w(d, name="rms")])

    def heads(self, x: str, n: int) -> str:
        r = self.op("Reshape", [x, self.c([0, 0, n, self.s.head_dim])])
        return self.op("Transpose", [r], perm=[0, 2, 1, 3])

    def rope(self, x: str) -> str:
        if self.s.positions != "rope":
            return x
        angle = self.op("Constant", [], value=numpy_helper.from_array(  # not a weight
            np.linspace(0, 1, self.s.head_dim).astype(np.float32)))
        cos, sin = self.op("Cos", [angle]), self.op("Sin", [angle])
        return self.op(
            "Add", [self.op("Mul", [x, cos]), self.op("Mul", [self.op("Neg", [x]), sin])]
        )

    def act(self, x: str) -> str:
        a = self.s.activation
        if a == "silu":
            return self.op("Mul", [x, self.op("Sigmoid", [x])])
        if a == "relu":
            return self.op("Relu", [x])
        if a == "gelu":
            e = self.op("Erf", [self.op("Div", [x, self.c(1.4142135, np.float32)])])
            return self.op(
                "Mul",
                [
                    self.op("Mul", [x, self.op("Add", [e, self.c(1.0, np.float32)])]),
                    self.c(0.5, np.float32),
                ],
            )
        cube = self.op(
            "Mul", [self.op("Pow", [x, self.c(3.0, np.float32)]), self.c(0.044715, np.float32)]
        )
        t = self.op(
            "Tanh", [self.op("Mul", [self.op("Add", [x, cube]), self.c(0.79788, np.float32)])]
        )
        return self.op("Mul", [self.op("Mul", [x, self.c(0.5, np.float32)]),
                               self.op("Add", [t, self.c(1.0, np.float32)])])

    def mlp_one(self, h: str) -> str:
        s = self.s
        if s.gated:
            g = self.linear(h, s.d_model, s.d_ff, s.mlp_bias)
            u = self.linear(h, s.d_model, s.d_ff, s.mlp_bias)
            inner = self.op("Mul", [self.act(g), u])
        else:
            inner = self.act(self.linear(h, s.d_model, s.d_ff, s.mlp_bias))
        return self.linear(inner, s.d_ff, s.d_model, s.mlp_bias)

    def mlp(self, h: str) -> str:
        s = self.s
        if s.experts == 1:
            return self.mlp_one(h)
        probs = self.op("Softmax", [self.linear(h, s.d_model, s.experts, False)], axis=-1)
        top_vals, _ = self.op("TopK", [probs, self.c([s.top_k])], n_out=2, axis=-1)
        scale = self.op("ReduceSum", [top_vals, self.c([-1])], keepdims=1)
        out = None
        for e in range(s.experts):  # dense stand-in for the routing: every expert, weighted
            gate = self.op("Slice", [probs, self.c([e]), self.c([e + 1]), self.c([-1])])
            y = self.op("Mul", [self.mlp_one(h), self.op("Mul", [gate, scale])])
            out = y if out is None else self.op("Add", [out, y])
        return out

    def attention(self, h: str, layer: int, graph_inputs: list, graph_outputs: list) -> str:
        s = self.s
        q_w, kv_w = s.heads * s.head_dim, s.kv_heads * s.head_dim
        if s.packed_qkv and s.attention == "gqa_op":  # the op splits the packed projection
            q = k = v = self.linear(h, s.d_model, q_w + 2 * kv_w, s.qkv_bias)
        elif s.packed_qkv:
            qkv = self.linear(h, s.d_model, q_w + 2 * kv_w, s.qkv_bias)
            q, k, v = self.op("Split", [qkv, self.c([q_w, kv_w, kv_w])], n_out=3, axis=-1)
        else:
            kv_src = "encoder_hidden_states" if s.cross else h
            q = self.linear(h, s.d_model, q_w, s.qkv_bias)
            k, v = (self.linear(kv_src, s.d_model, kv_w, s.qkv_bias) for _ in range(2))
        if s.attention != "eager":
            return self.fused(q, k, v, layer, graph_inputs, graph_outputs)
        q, k, v = (
            self.rope(self.heads(q, s.heads)),
            self.rope(self.heads(k, s.kv_heads)),
            self.heads(v, s.kv_heads),
        )
        if s.past:
            for kind in ("key", "value"):
                past = f"past_key_values.{layer}.{kind}"
                graph_inputs.append(helper.make_tensor_value_info(
                    past, TensorProto.FLOAT, ["batch", s.kv_heads, "past_sequence", s.head_dim]))
                present = f"present.{layer}.{kind}"
                cur = k if kind == "key" else v
                self.nodes.append(helper.make_node("Concat", [past, cur], [present], axis=2))
                graph_outputs.append(
                    helper.make_tensor_value_info(present, TensorProto.FLOAT, None)
                )
                if kind == "key":
                    k = present
                else:
                    v = present
        rep = s.heads // s.kv_heads
        if rep > 1:
            k, v = (self.op("Reshape", [self.op("Expand", [self.op("Unsqueeze", [t, self.c([2])]),
                                                            self.c([1, 1, rep, 1, 1])]),
                                        self.c([0, s.heads, -1, s.head_dim])]) for t in (k, v))
        kt = self.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = self.op("Mul", [self.op("MatMul", [q, kt]), self.c(0.35, np.float32)])
        probs = self.op("Softmax", [scores], axis=-1)
        ctx = self.op("Transpose", [self.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = self.op("Reshape", [ctx, self.c([0, 0, q_w])])
        return self.linear(ctx, q_w, s.d_model, False)

    def fused(
        self, q: str, k: str, v: str, layer: int, graph_inputs: list, graph_outputs: list
    ) -> str:
        s = self.s
        q_w = s.heads * s.head_dim
        past, present = ["", ""], ["", ""]
        if s.past:
            for i, kind in enumerate(("key", "value")):
                past[i], present[i] = f"past_key_values.{layer}.{kind}", f"present.{layer}.{kind}"
                graph_inputs.append(helper.make_tensor_value_info(
                    past[i], TensorProto.FLOAT, ["batch", s.kv_heads, "past_sequence", s.head_dim]))
                graph_outputs.append(
                    helper.make_tensor_value_info(present[i], TensorProto.FLOAT, None)
                )
        outs = [self.name("attn"), present[0] or self.name("pk"), present[1] or self.name("pv")]
        if s.attention == "onnx_op":
            self.nodes.append(helper.make_node(
                "Attention", [q, k, v, "", *past] if s.past else [q, k, v], outs,
                q_num_heads=s.heads, kv_num_heads=s.kv_heads))
        else:
            caches = ["", "", "", ""]
            if s.rotary_cache:
                caches[2:] = (self.w(s.rotary_cache, s.head_dim // 2, name="cos_cache"),
                              self.w(s.rotary_cache, s.head_dim // 2, name="sin_cache"))
            packed = s.packed_qkv and q == k
            self.nodes.append(
                helper.make_node(
                    "GroupQueryAttention",
                    [q, "" if packed else k, "" if packed else v, *past, *caches],
                    outs,
                    domain="com.microsoft",
                    num_heads=s.heads,
                    kv_num_heads=s.kv_heads,
                    do_rotary=int(s.positions == "rope"),
                )
            )
        return self.linear(outs[0], q_w, s.d_model, False)


def tiny_decoder(**kw) -> bytes:
    s = Spec(**kw)
    b = _B(s)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])]
    outputs: list = []
    table = b.w(s.vocab, s.d_model, name="embed")
    x = b.op("Gather", [table, "input_ids"])
    if s.positions == "learned":
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64,
                                                    ["batch", "sequence"]))
        x = b.op(
            "Add",
            [x, b.op("Gather", [b.w(s.max_positions, s.d_model, name="pos"), "position_ids"])],
        )
    kv_outputs: list = []
    if s.cross:
        inputs.append(helper.make_tensor_value_info("encoder_hidden_states", TensorProto.FLOAT,
                                                    ["batch", "encoder_sequence", s.d_model]))
    for layer in range(s.layers):
        b.s = replace(s, d_ff=s.layer_d_ff[layer] if s.layer_d_ff else s.d_ff,
                      kv_heads=s.layer_kv_heads[layer] if s.layer_kv_heads else s.kv_heads)
        h = b.norm(x)
        a = b.attention(h, layer, inputs, kv_outputs)
        if s.parallel:
            x = b.op("Add", [b.op("Add", [x, a]), b.mlp(h)])
        else:
            x1 = b.op("Add", [x, a])
            x = b.op("Add", [x1, b.mlp(b.norm(x1))])
    b.s = s
    h = b.norm(x)
    if s.tied:
        head_w = b.op("Transpose", [table], perm=[1, 0])
        logits = b.op("MatMul", [h, head_w])
    else:
        logits = b.linear(h, s.d_model, s.vocab, False)
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"]))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None), *kv_outputs]
    graph = helper.make_graph(b.nodes, "tiny_decoder", inputs, outputs, b.inits)
    opsets = [helper.make_opsetid("", 23)]
    if s.attention == "gqa_op" or s.nbits:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    return model.SerializeToString()
