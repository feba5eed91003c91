"""--dim spec parsing, the default batch, and dim names checked against the model."""

import pytest
from onnx import TensorProto, helper

from roofcast.graph_import import import_model
from roofcast.graph_import.dims import (
    MAX_DIM,
    check_dim_names,
    model_dim_names,
    parse_dim_specs,
    split_input_axis,
    with_default_batch,
)
from roofcast.graph_import.errors import ModelImportError


def test_name_and_input_axis_specs():
    assert parse_dim_specs(["batch=8", "input_ids:1=128", " sequence = 512 "]) == {
        "batch": 8,
        "input_ids:1": 128,
        "sequence": 512,
    }


def test_input_names_with_colons_split_at_last_colon():
    assert split_input_axis("encoder:input:0") == ("encoder:input", 0)
    assert split_input_axis("batch") is None
    assert split_input_axis("x:-1") == ("x", -1)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("batch", "expected NAME=VALUE or INPUT:AXIS=VALUE"),
        ("=8", "expected NAME=VALUE"),
        ("batch=eight", "bad value 'eight' for dim batch"),
        ("batch=0", "out of range: give a positive integer"),
        ("batch=-2", "out of range"),
        (f"batch={MAX_DIM + 1}", "out of range"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(ModelImportError, match=message):
        parse_dim_specs([spec])


def test_same_key_twice_with_other_value():
    with pytest.raises(ModelImportError, match=r"--dim batch given twice \(1 and 2\)"):
        parse_dim_specs(["batch=1", "batch=2"])
    assert parse_dim_specs(["batch=1", "batch=1"]) == {"batch": 1}


def test_default_batch_only_when_no_batch_and_no_axis_0_binding():
    assert with_default_batch({}) == {"batch": 1}
    assert with_default_batch({"sequence": 128}) == {"sequence": 128, "batch": 1}
    assert with_default_batch({"batch": 8}) == {"batch": 8}
    # an INPUT:0 binding may be the batch axis: a default there could contradict it
    assert with_default_batch({"input_ids:0": 8}) == {"input_ids:0": 8}
    assert with_default_batch({"input_ids:1": 32}) == {"input_ids:1": 32, "batch": 1}


def _tiny_graph(dims):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "tiny", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)])
    return import_model(model.SerializeToString(), dims=dims, name="tiny")


def test_model_dim_names_bound_and_unbound():
    assert model_dim_names(_tiny_graph({"batch": 2})) == ("batch", "sequence")
    assert model_dim_names(_tiny_graph({"x:1": 4, "batch": 2})) == ("batch", "sequence")


def test_check_dim_names_lists_the_models_dims():
    graph = _tiny_graph({"batch": 2, "seq": 128})  # the import ignores 'seq'
    check_dim_names({"batch": 2, "x:1": 3}, graph)  # INPUT:AXIS keys: checked at import
    with pytest.raises(ModelImportError) as err:
        check_dim_names({"batch": 2, "seq": 128}, graph)
    assert str(err.value) == (
        "model 'tiny' has no dim named 'seq' (--dim seq=128); its symbolic dims are: batch, "
        "sequence; bind those, e.g. --dim sequence=N")


def test_check_dim_names_on_a_model_with_fixed_shapes():
    from onnx import TensorProto, helper

    from roofcast.graph_import import import_model
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "fixed", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = import_model(model.SerializeToString(), dims={"batch": 4}, name="fixed")
    with pytest.raises(ModelImportError, match="it has no symbolic dims"):
        check_dim_names(["batch"], graph)
