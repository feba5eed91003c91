"""The bundled model zoo: listing, lookup, metadata and the weightless files themselves.

No torch here: the reference figures come from the JSON written at export time.
"""

from __future__ import annotations

import math

import onnx
import pytest

from roofcast.graph_import.errors import ModelImportError
from roofcast.training_data import zoo

REQUIRED = {
    "resnet50", "vgg16", "mobilenet_v2", "efficientnet_b0", "vit_b_16", "unet", "bert_base",
    "gpt2", "llama", "t5_encoder", "lstm_lm",
}
META_KEYS = {
    "name", "description", "source", "exporter", "opset", "versions", "inputs", "outputs",
    "symbolic_dims", "max_sequence", "params", "buffers", "forward_flops", "forward_flops_at",
    "forward_flops_by_shape", "flop_counter", "param_reconciliation",
}
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
               onnx.TensorProto.DOUBLE}


def _load(path):
    return onnx.load(str(path), load_external_data=False)


def test_zoo_lists_the_required_architectures():
    names = zoo.list_models()
    assert names == sorted(names)
    assert len(names) >= 13
    assert set(names) >= REQUIRED


def test_alt_exporter_set_has_at_least_three_models_also_in_the_zoo():
    alt = zoo.alt_exporter_models()
    assert len(alt) >= 3
    assert set(alt) <= set(zoo.list_models())
    for name in alt:
        assert zoo.alt_model_meta(name)["exporter"] != zoo.model_meta(name)["exporter"]


def test_unknown_name_raises_import_error_listing_the_names():
    with pytest.raises(ModelImportError, match=r"no zoo model named 'resnet51'.*resnet50"):
        zoo.model_path("resnet51")
    with pytest.raises(ModelImportError, match="available:"):
        zoo.model_meta("nope")
    with pytest.raises(ModelImportError, match="alt-exporter"):
        zoo.alt_model_path("vgg17")


@pytest.mark.parametrize("name", zoo.list_models())
def test_meta_is_complete_and_consistent(name):
    meta = zoo.model_meta(name)
    assert meta.keys() >= META_KEYS
    assert meta["name"] == name
    assert meta["params"] > 0
    assert meta["forward_flops"] > 0
    assert meta["forward_flops_by_shape"][0]["dims"] == meta["forward_flops_at"]
    assert meta["forward_flops_by_shape"][0]["flops"] == meta["forward_flops"]
    assert "batch" in meta["symbolic_dims"]


@pytest.mark.parametrize("name", zoo.list_models())
def test_forward_flops_scale_linearly_with_batch(name):
    """Every zoo model's work is per-sample: FLOPs at batch 2 = 2 x FLOPs at batch 1."""
    by_shape = zoo.model_meta(name)["forward_flops_by_shape"]
    base = by_shape[0]
    doubled = [
        s for s in by_shape if s["dims"] == {**base["dims"], "batch": 2 * base["dims"]["batch"]}
    ]
    assert doubled, "export script records FLOPs at batch 2"
    assert doubled[0]["flops"] == 2 * base["flops"]


ALL_FILES = [(n, zoo.model_path, zoo.model_meta) for n in zoo.list_models()] + [
    (n, zoo.alt_model_path, zoo.alt_model_meta) for n in zoo.alt_exporter_models()]
FILE_IDS = [f"{n}-{'alt' if p is zoo.alt_model_path else 'zoo'}" for n, p, _ in ALL_FILES]


@pytest.mark.parametrize(("name", "path_of", "meta_of"), ALL_FILES, ids=FILE_IDS)
def test_file_is_weightless_small_and_keeps_initializer_dims(name, path_of, meta_of):
    path = path_of(name)
    model = _load(path)
    # names and shape constants only: ~200-550 bytes a node (deep models exceed 1.1 MB in all)
    assert path.stat().st_size < max(1_100_000, 1_000 * len(model.graph.node))
    external = [t for t in model.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL]
    assert external, "large initializers are declared external"
    for t in external:
        info = {e.key: e.value for e in t.external_data}
        assert info["location"] == f"{name}.weights.bin"
        assert not t.raw_data
        assert int(info["length"]) == math.prod(t.dims) * onnx.helper.tensor_dtype_to_np_dtype(
            t.data_type).itemsize
    assert not (path.parent / f"{name}.weights.bin").exists()
    float_elements = sum(math.prod(t.dims) for t in model.graph.initializer
                         if t.data_type in FLOAT_TYPES)
    rec = meta_of(name)["param_reconciliation"]
    assert float_elements == rec["onnx_float_initializer_elements"]


@pytest.mark.parametrize(("name", "path_of", "meta_of"), ALL_FILES, ids=FILE_IDS)
def test_graph_inputs_carry_the_symbolic_dims_of_the_metadata(name, path_of, meta_of):
    meta = meta_of(name)
    model = _load(path_of(name))
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = {
        v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in model.graph.input if v.name not in initializers
    }
    assert graph_inputs == {i["name"]: i["dims"] for i in meta["inputs"]}


@pytest.mark.parametrize("name", zoo.list_models())
def test_param_reconciliation_identity_holds(name):
    """onnx float elements = params - absent + duplicate copies + buffers stored + derived."""
    rec = zoo.model_meta(name)["param_reconciliation"]
    assert rec["onnx_float_initializer_elements"] == (
        rec["params"] - rec["params_absent_elements"] + rec["duplicate_copies_elements"]
        + rec["float_buffers_in_onnx_elements"] + rec["derived_elements"]
    )
