"""The zoo's exports of the models NeuSight timed end to end (``gpu_models`` of the public data):
full depth, the parameter count of their HF configs, symbolic batch and sequence.

The expected counts are written out from the configs (``gpu_models/configs/*.json``), not read
from the export's metadata, so a shallower graph or a dropped head cannot pass. No torch here.
"""

from __future__ import annotations

import pytest

from roofcast.graph_import import import_model
from roofcast.training_data import zoo


def gpt2_params(d: int, layers: int, vocab: int, positions: int) -> int:
    """GPT2LMHeadModel with a tied head: token + position embeddings, per layer two LayerNorms
    (2d each), QKV (d x 3d + 3d), attention out (d x d + d), MLP (d x 4d + 4d, 4d x d + d);
    final LayerNorm."""
    return vocab * d + positions * d + layers * (12 * d * d + 13 * d) + 2 * d


def switch_params(d: int, inner: int, d_ff: int, layers: int, sparse: int, experts: int,
                  vocab: int, buckets: int, heads: int) -> int:
    """SwitchTransformersForConditionalGeneration, tied head: shared embedding; per encoder
    layer self-attention (4 d x inner), 2 RMS norms (d), an FFN (2 d x d_ff) or, in ``sparse``
    of them, a router (d x experts) and ``experts`` FFNs; per decoder layer also
    cross-attention and a third norm; relative position bias in each stack's first layer;
    a final norm per stack."""
    ffn = 2 * d * d_ff
    moe = d * experts + experts * ffn
    feed = (layers - sparse) * ffn + sparse * moe
    encoder = layers * (4 * d * inner + 2 * d) + feed + buckets * heads + d
    decoder = layers * (8 * d * inner + 3 * d) + feed + buckets * heads + d
    return vocab * d + encoder + decoder


EXPECTED = {
    "gpt3_xl": (gpt2_params(3072, 24, 50257, 2048), 50257 * 3072, 24),
    "gpt3_27": (gpt2_params(2560, 32, 50257, 2048), 50257 * 2560, 32),
    "switchxl4": (switch_params(1024, 32 * 128, 16384, 24, 12, 4, 32128, 32, 32),
                  32128 * 1024, 48),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_export_has_the_configs_parameters(name):
    params, head_copy, _ = EXPECTED[name]
    meta = zoo.model_meta(name)
    assert meta["params"] == params
    graph = import_model(zoo.model_path(name), dims={"batch": 2, "sequence": 2048}, name=name)
    assert graph.unresolved == {}
    assert graph.unsupported == {}
    # the tied LM head is stored once more, transposed, as the head's MatMul weight
    assert graph.params == params + head_copy


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_export_is_full_depth_with_symbolic_batch_and_sequence(name):
    meta = zoo.model_meta(name)
    assert meta["symbolic_dims"] == ["batch", "sequence"]
    graph = import_model(zoo.model_path(name), dims={"batch": 1, "sequence": 512}, name=name)
    # node names: /hf/transformer/h.7/... (GPT-2), /hf/encoder/block.7/... (Switch)
    blocks = {"/".join(op.name.split("/")[2:4]) for op in graph.ops()
              if "/h." in op.name or "/block." in op.name}
    _, _, layers = EXPECTED[name]
    assert len(blocks) == layers, sorted(blocks)
    logits = [o for o in graph.outputs if o.name == "logits"]
    assert len(logits) == 1
    assert logits[0].shape[:2] == (1, 512)
