"""Zoo acceptance: every model imports fully, and its parameter and FLOP counts agree with the
independent counts taken at export time (``sum(p.numel())`` and ``FlopCounterMode``).

Conventions that differ, and how the test reconciles them:
- ``FlopCounterMode`` counts only matmul/conv-class aten ops (2 FLOPs per multiply-add), so it is
  compared with the FLOPs of roofcast's matmul/conv-class op types (``MATMUL_CLASS``), whichever
  engine roofcast assigns them (depthwise convs run on the vector engine). roofcast's conv and
  Gemm rules also count the bias add (1 FLOP per output element) and its LSTM rule the gate
  nonlinearities, which the independent counter does not: well under the 3% tolerance.
  Softmax, normalisation, activations and attention masking are separate ops in roofcast and
  are not compared.
- Sequence lengths: 128 at batch 1 and 2048 at batch 32 (each value of each dim once), 2048
  capped at the model's maximum positions (BERT: 512) where the architecture has learned
  position embeddings (``max_sequence`` in the export metadata).
- Parameters: the exporter may fold BatchNormalization into the preceding Conv (each BN's 2C
  affine params vanish and the bias-free Conv gains a C bias: ONNX count = params - C), and may
  store a tied or transposed weight under a new name. The export metadata reconciles each model
  tensor by tensor; the test checks roofcast's count against that reconciliation.
"""

from __future__ import annotations

import pytest

from roofcast.graph_import import import_model
from roofcast.training_data import zoo

MODELS = zoo.list_models()
MATMUL_CLASS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "LSTM", "GRU",
                          "RNN", "Attention", "MultiHeadAttention"})


def _import(name: str, **dims: int):
    return import_model(zoo.model_path(name), dims=dims, name=name)


def _seq_dims(name: str) -> list[dict[str, int]]:
    symbolic = zoo.model_meta(name)["symbolic_dims"]
    batches = [{"batch": 1}, {"batch": 32}]
    if "sequence" not in symbolic:
        return batches
    max_seq = zoo.model_meta(name).get("max_sequence") or 2048  # null: no position table
    return [{**b, "sequence": s} for b, s in zip(batches, (128, min(2048, max_seq)), strict=True)]


@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_imports_fully(name: str) -> None:
    for dims in _seq_dims(name):
        graph = _import(name, **dims)
        assert graph.unresolved == {}, (dims, list(graph.unresolved.items())[:3])
        assert graph.unsupported == {}, (dims, graph.unsupported)
        assert graph.unbound_dims == ()


@pytest.mark.parametrize("name", MODELS)
def test_params_match_independent_count(name: str) -> None:
    meta = zoo.model_meta(name)
    rec = meta["param_reconciliation"]
    graph = _import(name, **meta["export_dims"])
    expected = (meta["params"] - rec["params_absent_elements"] + rec["derived_elements"]
                + rec["duplicate_copies_elements"] + rec["float_buffers_in_onnx_elements"])
    assert graph.params == expected
    bn = meta.get("notes", {}).get("bn_folded", {})
    if bn.get("folded"):
        # independent explanation: each folded BN removes 2C params and adds a C conv bias
        assert graph.params == meta["params"] - bn["channels"]


@pytest.mark.parametrize("name", MODELS)
def test_matrix_flops_match_flop_counter(name: str) -> None:
    meta = zoo.model_meta(name)
    graph = _import(name, **meta["forward_flops_at"])
    matrix_flops = sum(op.cost.flops for op in graph.ops()
                       if op.cost is not None and op.op_type in MATMUL_CLASS)
    reference = meta["forward_flops"]
    assert matrix_flops == pytest.approx(reference, rel=0.03), (
        f"{name}: roofcast {matrix_flops / 1e9:.3f} GFLOP vs FlopCounterMode "
        f"{reference / 1e9:.3f} GFLOP")


@pytest.mark.parametrize("name", zoo.alt_exporter_models())
def test_other_exporter_imports_fully_and_counts_agree(name: str) -> None:
    """The same architectures exported by the other torch exporter (dynamo) import fully, and
    their matmul-class FLOPs equal those of the zoo's TorchScript export."""
    meta = zoo.alt_model_meta(name)
    assert meta["exporter"] != zoo.model_meta(name)["exporter"]
    max_seq = meta.get("max_sequence") or 2048  # null: no position table
    for dims in _seq_dims(name):
        if "sequence" in dims:
            dims["sequence"] = min(dims["sequence"], max_seq)
        graph = import_model(zoo.alt_model_path(name), dims=dims, name=name)
        assert graph.unresolved == {}, (dims, list(graph.unresolved.items())[:3])
        assert graph.unsupported == {}, (dims, graph.unsupported)
        reference = _import(name, **dims)
        flops = sum(op.cost.flops for op in graph.ops() if op.op_type in MATMUL_CLASS)
        ref_flops = sum(op.cost.flops for op in reference.ops() if op.op_type in MATMUL_CLASS)
        assert flops == pytest.approx(ref_flops, rel=0.03), dims
