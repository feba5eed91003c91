"""Models exported by torch.onnx.export (TorchScript and dynamo exporters) from PyTorch and
Hugging Face transformers with dynamic batch/sequence axes, and the same models fused by
onnxruntime's transformer optimiser (com.microsoft contrib ops), end fully concrete.

The reference shapes in ``data/*.shapes.json`` were *observed* by onnxruntime running the full
model at batch=3, sequence=11 before its weights were stripped (see data/make_models.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofcast.graph_import import import_model

DATA = Path(__file__).parent / "data"
MODELS = sorted(DATA.glob("*.onnx"))


def test_all_exporters_and_architectures_are_present():
    names = {p.stem for p in MODELS}
    for arch in ("cnn", "lstm", "bert", "gpt2", "llama"):
        assert {f"{arch}_ts", f"{arch}_dynamo"} <= names
    assert {"bert_ortopt", "gpt2_ortopt"} <= names


@pytest.mark.parametrize("name", ["bert_ortopt", "gpt2_ortopt"])
def test_ort_optimized_models_contain_contrib_ops(name):
    graph = import_model(DATA / f"{name}.onnx", dims={"batch": 2, "sequence": 16})
    contrib = {op.op_type for op in graph.ops() if op.domain == "com.microsoft"}
    assert "SkipLayerNormalization" in contrib
    assert contrib & {"FastGelu", "BiasGelu"}
    if name == "bert_ortopt":
        assert {"Attention", "EmbedLayerNormalization"} <= contrib
    assert graph.unresolved == {}
    assert graph.unsupported == {}


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_every_tensor_shape_matches_onnxruntime(path):
    ref = json.loads(path.with_suffix(".shapes.json").read_text())
    graph = import_model(path, dims=ref["dims"])
    assert graph.unresolved == {}
    assert graph.unsupported == {}
    seen = {t.name: list(t.shape) for op in graph.ops() for t in op.outputs}
    assert seen == ref["shapes"]


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
@pytest.mark.parametrize(("batch", "sequence"), [(1, 128), (32, 512)])
def test_concrete_at_other_dims(path, batch, sequence):
    graph = import_model(path, dims={"batch": batch, "sequence": sequence})
    assert graph.unbound_dims == ()
    assert graph.unresolved == {}
    assert graph.unsupported == {}
    first = graph.inputs[0]
    assert first.shape[0] == batch
    if len(first.shape) == 2:  # token ids [batch, sequence]
        assert first.shape[1] == sequence
    assert all(op.cost is not None for op in graph.ops())


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_without_dims_unbound_names_are_reported(path):
    graph = import_model(path)
    expected = ("batch",) if path.stem.startswith("cnn") else ("batch", "sequence")
    assert graph.unbound_dims == expected
    assert graph.unresolved
    assert all("--dim" in reason for reason in graph.unresolved.values())


@pytest.mark.parametrize("name", ["bert_ts", "bert_dynamo", "gpt2_ts", "gpt2_dynamo"])
def test_sequence_beyond_the_position_table_is_flagged(name):
    """These exports have 512 learned positions: sequence 600 cannot run, and the import says
    so (never a silently costed graph with made-up shapes)."""
    graph = import_model(DATA / f"{name}.onnx", dims={"batch": 2, "sequence": 600})
    assert graph.unresolved
    roots = [r for r in graph.unresolved.values() if "comes from the unresolved node" not in r]
    assert any("within what the model supports" in r for r in roots), roots
