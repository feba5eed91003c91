"""A decoder's activations: the prefill peak, and Korthikanti et al.'s per-block count."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.predictor.memory.decoder_activations import (
    ActivationCase,
    block_activation_bytes,
    forward_slot_bytes,
    prefill_activation_bytes,
    slot_activation_bytes,
)
from tests.predictor.llm.conftest import ARCHS

# GPT-3-style block: multi-head attention, GeLU MLP of 4h, LayerNorm
H, A, S, B = 1024, 16, 512, 2
GPT = LLMArch("gpt3ish", "gpt2", n_layers=4, d_model=H, n_heads=A, n_kv_heads=A,
              head_dim=H // A, d_ff=4 * H, vocab=50257, max_context=2048, gated_mlp=False,
              activation="gelu", norm="layernorm", positions="learned", mlp_bias=True)


@dataclass(frozen=True)
class Rank:
    """Per-rank dims of a tensor-parallel degree ``tp`` (``RankDims``)."""

    tp: int
    sp: bool = False

    heads = property(lambda self: A // self.tp)
    kv_heads = property(lambda self: A // self.tp)
    d_ff = property(lambda self: 4 * H // self.tp)
    expert_d_ff = property(lambda self: 4 * H // self.tp)
    vocab = property(lambda self: 50304 // self.tp)
    seq_split = property(lambda self: self.tp if self.sp else 1)


def test_prefill_peak():
    a = ARCHS["llama-2-7b"]  # QKV 3 x 4096 = 12288 < gated up 2 x 11008 = 22016
    got = prefill_activation_bytes(a, batch=2, prompt_tokens=100, elem_bytes=2)
    assert got == 2 * 100 * (2 * 4096 + 22016) * 2 + 2 * 32000 * 4
    chunked = prefill_activation_bytes(a, batch=2, prompt_tokens=100, elem_bytes=2,
                                       max_prefill_tokens=64)
    assert chunked == 64 * (2 * 4096 + 22016) * 2 + 2 * 32000 * 4
    eager = prefill_activation_bytes(a, batch=2, prompt_tokens=100, elem_bytes=2, eager=True)
    assert eager == got + 2 * 32 * 100 * 100 * 2


@pytest.mark.parametrize("tp", [1, 4])
def test_block_matches_korthikanti(tp):
    case = ActivationCase(B, S, 2.0, "eager", dropout=True)
    sbh = S * B * H
    # tensor parallel: s b h (10 + 24 / t + 5 a s / (h t))
    assert block_activation_bytes(GPT, Rank(tp), case) == pytest.approx(
        sbh * (10 + 24 / tp + 5 * A * S / (H * tp)))
    # with sequence parallelism everything is split: s b h (34 + 5 a s / h) / t
    assert block_activation_bytes(GPT, Rank(tp, sp=True), case) == pytest.approx(
        sbh * (34 + 5 * A * S / H) / tp)


def test_slots_and_recompute():
    case = ActivationCase(B, S, 2.0, "fused")
    act, ckpt = slot_activation_bytes(GPT, Rank(2), case)
    assert len(act) == GPT.n_layers + 2
    assert act[0] == 8 * S * B  # token ids
    assert act[-1] == 2 * 2 * S * B * H + 4 * S * B * (50304 // 2)  # norm + head input, logits
    assert list(ckpt[1:-1]) == [2 * S * B * H] * GPT.n_layers  # a block's input
    assert (ckpt[0], ckpt[-1]) == (act[0], act[-1])


def test_a_forward_block_is_the_prefill_peak_without_logits():
    a = ARCHS["llama-2-7b"]
    one = Rank(1)
    one_rank = type("One", (), {"heads": 32, "kv_heads": 32, "d_ff": 11008,
                                "expert_d_ff": 11008, "vocab": 32000, "seq_split": 1})()
    act = forward_slot_bytes(a, one_rank, ActivationCase(2, 100, 2.0, "fused"))
    prefill = prefill_activation_bytes(a, batch=2, prompt_tokens=100, elem_bytes=2)
    assert act[1] == prefill - 2 * 32000 * 4
    assert act[-1] == 2 * 200 * 4096 + 4 * 200 * 32000  # head input + every token's logits
    assert act[0] == 8 * 200 + 2 * 200 * 4096  # ids + embedded tokens
    gpt = forward_slot_bytes(GPT, one, ActivationCase(B, S, 2.0, "eager"))
    # GeLU up 4h > QKV 3h; eager adds the scores b a s s
    assert gpt[1] == 2 * (2 * S * B * H + S * B * 4 * H) + 2 * B * A * S * S
