"""Malformed and hostile inputs: each is refused with a message saying what is wrong."""

from __future__ import annotations

import builtins
import io
import os

import numpy as np
import pytest
from onnx import TensorProto, helper

from roofcast.graph_import.errors import ModelImportError
from roofcast.graph_import.load import MAX_TENSOR_ELEMENTS, load_model
from roofcast.graph_import.shapes import infer_concrete
from tests.graph_import.import_helpers import (
    const,
    dynamic_reshape_model,
    external_weight,
    make_model,
    relu_model,
    serialize,
)

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


def _refused(source, match, **kw):
    with pytest.raises(ModelImportError, match=match):
        load_model(source, **kw)


def test_empty_bytes():
    _refused(b"", r"empty \(0 bytes\)")


def test_random_garbage():
    garbage = np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    _refused(garbage, r"not (a readable )?an? ?ONNX model|not a readable ONNX model")


def test_text_is_not_onnx():
    _refused(b"hello, I am a CSV file\n1,2,3\n", "not a readable ONNX model")


def test_truncated_model():
    data = serialize(relu_model())
    _refused(data[: len(data) - 7], "truncated, corrupt or not ONNX")


def test_ir_version_too_new():
    _refused(_with_ir(99), r"unsupported ONNX IR version 99: roofcast supports IR versions 3\.\.")


def test_ir_version_too_old():
    _refused(_with_ir(2), r"unsupported ONNX IR version 2: .*version_converter")


def _with_ir(ir):
    m = relu_model()
    m.ir_version = ir
    return m.SerializeToString()


def test_opset_too_new():
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y], opset=999)
    _refused(serialize(m), r"unsupported ai\.onnx opset 999: roofcast supports opsets 7\.\.")


def test_opset_too_old():
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y], opset=5)
    _refused(serialize(m), r"unsupported ai\.onnx opset 5: .*convert_version")


def test_no_default_opset():
    m = relu_model()
    del m.opset_import[:]
    _refused(serialize(m), "declares no ai.onnx opset import")


def test_no_graph():
    m = relu_model()
    m.ClearField("graph")
    _refused(serialize(m), "has no graph")


def test_no_nodes():
    m = make_model([], [X], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])])
    _refused(serialize(m), "has no nodes: nothing to analyse")


def test_cycle():
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
        helper.make_node("Relu", ["a"], ["b"], name="n2"),
        helper.make_node("Relu", ["b"], ["y"], name="n3"),
    ]
    _refused(
        serialize(make_model(nodes, [X], [Y])),
        r"the graph has a cycle \(nodes node 'n1' \(Add\), node 'n2' \(Relu\)",
    )


def test_dangling_input():
    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]
    _refused(
        serialize(make_model(nodes, [X], [Y])),
        r"node 'add' \(Add\) reads tensor 'ghost'.*dangling input",
    )


def test_output_produced_by_nothing():
    nodes = [helper.make_node("Relu", ["x"], ["z"])]
    _refused(serialize(make_model(nodes, [X], [Y])), "graph output 'y' is produced by no node")


def test_duplicate_output_names():
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="a"),
        helper.make_node("Sigmoid", ["x"], ["y"], name="b"),
    ]
    _refused(
        serialize(make_model(nodes, [X], [Y])),
        r"tensor 'y' is produced by two nodes \(node 'a'.*node 'b'",
    )


def test_output_shadows_initializer():
    nodes = [helper.make_node("Relu", ["x"], ["w"]), helper.make_node("Relu", ["w"], ["y"])]
    m = make_model(nodes, [X], [Y], [const("w", [1.0], np.float32)])
    _refused(serialize(m), "tensor 'w' is both a initializer and the output")


def test_negative_dim_in_input():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, -3])
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [x], [Y])
    _refused(serialize(m), r"tensor 'x' declares a negative dim \(-3\)")


def test_negative_dim_in_initializer():
    w = external_weight("w", [4, 4])
    w.dims[1] = -4
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [X], [Y], [w])
    _refused(serialize(m), r"tensor 'w' has a negative dim \(\[4, -4\]\)")


def test_absurd_initializer_size():
    w = external_weight("w", [2**21, 2**21])
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [X], [Y], [w])
    _refused(
        serialize(m),
        rf"tensor 'w' has {2**42} elements .* over the limit of {MAX_TENSOR_ELEMENTS} .*"
        "ROOFCAST_MAX_TENSOR_ELEMS",
    )


def test_absurd_declared_input_size():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**30, 2**30, 4])
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [x], [Y])
    _refused(serialize(m), "tensor 'x' has .* elements, over the limit")


def test_raw_data_shorter_than_dims():
    w = const("w", np.zeros((4, 4)), np.float32)
    w.raw_data = w.raw_data[:20]
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [X], [Y], [w])
    _refused(
        serialize(m), r"tensor 'w' holds 20 bytes of data but its dims \[4, 4\] and dtype need 64"
    )


def test_file_over_max_bytes_from_path(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(serialize(relu_model()))
    _refused(path, r"the model is \d+ bytes, over the limit of 16 bytes", max_bytes=16)


def test_bytes_over_max_bytes():
    _refused(serialize(relu_model()), "over the limit of 16 bytes", max_bytes=16)


def test_missing_file(tmp_path):
    _refused(tmp_path / "nope.onnx", "no such file: .*nope.onnx'; check the path")


def test_directory_is_not_a_model(tmp_path):
    _refused(tmp_path, "is a folder: give the .onnx file inside it")


def test_text_mode_file_object():
    _refused(io.StringIO("abc"), "open the model in binary mode")


def test_unreadable_source_type():
    _refused(12345, "cannot read a model from a int")


# --- external data: never followed ----------------------------------------------------------


def _ext_model(location):
    w = external_weight("w", [4, 8], location=location)
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [X], [Y], [w])


@pytest.fixture
def no_file_reads(monkeypatch):
    """Record every file opened through python's open/os.open while the test runs."""
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file, *args, **kwargs):
        opened.append(os.fspath(file) if not isinstance(file, int) else f"fd{file}")
        return real_open(file, *args, **kwargs)

    def spy_os_open(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    return opened


def test_external_data_path_traversal_refused_and_not_opened(no_file_reads):
    data = serialize(_ext_model("../../etc/passwd"))
    with pytest.raises(
        ModelImportError, match=r"'\.\./\.\./etc/passwd', outside the model's folder: refused"
    ):
        load_model(data)
    assert not any("passwd" in p for p in no_file_reads)


def test_external_data_absolute_path_refused(no_file_reads):
    with pytest.raises(ModelImportError, match="'/etc/shadow', outside the model's folder"):
        load_model(serialize(_ext_model("/etc/shadow")))
    assert not any("shadow" in p for p in no_file_reads)


def test_external_data_windows_drive_refused():
    _refused(serialize(_ext_model("C:\\Windows\\win.ini")), "outside the model's folder: refused")


def test_external_data_bad_offset():
    m = _ext_model("w.bin")
    m.graph.initializer[0].external_data[1].value = "-5"
    _refused(serialize(m), "bad external-data offset '-5'")


def test_weightless_model_loads_without_reading_existing_external_data(tmp_path, no_file_reads):
    """A path whose external data file exists: only the .onnx file is read, never weights.bin."""
    (tmp_path / "weights.bin").write_bytes(b"\x00" * 128)
    path = tmp_path / "m.onnx"
    path.write_bytes(serialize(_ext_model("weights.bin")))
    no_file_reads.clear()
    model = load_model(path)
    shapes = infer_concrete(model, {})
    assert shapes.tensors["y"].dims == (2, 8)
    assert "w" not in shapes.values
    assert no_file_reads == [str(path)]


def test_external_data_in_constant_node_refused(no_file_reads):
    t = external_weight("c", [4], location="../../etc/passwd")
    nodes = [
        helper.make_node("Constant", [], ["c"], value=t),
        helper.make_node("Add", ["x", "c"], ["y"]),
    ]
    with pytest.raises(
        ModelImportError, match=r"'\.\./\.\./etc/passwd', outside the model's folder"
    ):
        load_model(serialize(make_model(nodes, [X], [Y])))
    assert not any("passwd" in p for p in no_file_reads)


def test_external_data_in_subgraph_initializer_refused():
    body = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["t"])], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 4])],
        initializer=[external_weight("w", [2, 4], location="sub/../../../secret")],
    )
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=body, else_branch=body)]
    m = make_model(nodes, [X], [Y], [const("cond", True, np.bool_)])
    _refused(serialize(m), "'sub/../../../secret', outside the model's folder")


def test_big_tensor_whose_data_is_shorter_than_its_dims_is_never_read():
    """Only small tensors' values are ever read (and checked); a big one lying about its size
    is harmless: its dims are used, its bytes are not."""
    from roofcast.graph_import import import_model

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024, 1024])
    c = const("c", np.zeros(4), np.float32)
    c.dims[:] = [1024, 1024]
    nodes = [
        helper.make_node("Constant", [], ["c"], value=c),
        helper.make_node("Add", ["x", "c"], ["y"]),
    ]
    w = const("w", np.zeros(4), np.float32)
    w.dims[:] = [1024, 1024]
    nodes.append(helper.make_node("Mul", ["y", "w"], ["z"]))
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    graph = import_model(serialize(make_model(nodes, [x], [z], [w])))
    assert graph.outputs[0].shape == (1024, 1024)
    assert graph.params == 1024 * 1024


def test_huge_computed_tensors_are_not_materialised():
    """Range to 2**40 and ConstantOfShape of 2**40 elements: shapes only, nothing allocated."""
    from roofcast.graph_import import import_model

    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    r = helper.make_tensor_value_info("r", TensorProto.INT64, None)
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["y"]),
        helper.make_node("Range", ["zero", "limit", "one"], ["r"]),
    ]
    inits = [
        const("shape", [2**20, 2**20]),
        const("zero", 0),
        const("limit", 2**40),
        const("one", 1),
    ]
    graph = import_model(serialize(make_model(nodes, [], [y, r], inits)))
    assert graph.outputs[0].shape == (2**20, 2**20)
    assert graph.outputs[1].shape == (2**40,)


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 8, 13, 21, 34, 55, 89])
def test_every_truncation_is_refused(cut):
    """Cut anywhere, a model is refused (protobuf may parse a prefix cut at a field boundary:
    then the missing opset import or graph is reported)."""
    data = serialize(dynamic_reshape_model())
    with pytest.raises(ModelImportError, match=r"re-export|truncated|not an ONNX model"):
        load_model(data[: len(data) - cut])


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_device_file_is_refused_without_reading():
    _refused("/dev/zero", "is not a regular file")


def test_name_that_is_not_utf8_is_refused():
    data = bytearray(serialize(relu_model()))
    at = data.find(b"relu")
    data[at + 1] = 0xFF  # node name 'relu' -> b'r\xfflu'
    _refused(bytes(data), r"is not valid UTF-8 text: the file is corrupt")


def test_attribute_without_type_is_refused():
    m = make_model(
        [helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], [X], [Y], [const("i", 0)]
    )
    m.graph.node[0].attribute[0].type = 0  # AttributeProto.UNDEFINED
    _refused(serialize(m), "attribute 'axis' of node '' .Gather. has no type")


@pytest.mark.parametrize("seed", range(4))
def test_random_byte_corruption_never_crashes(seed):
    """Flip a few bytes of a real exported model 25 times: every outcome is an import or a
    ModelImportError, never another exception."""
    from pathlib import Path

    from roofcast.graph_import import import_model

    data = (Path(__file__).parent / "data" / "gpt2_dynamo.onnx").read_bytes()
    rng = np.random.default_rng(seed)
    outcomes = []
    for _ in range(25):
        corrupt = bytearray(data)
        for at in rng.integers(0, len(data), rng.integers(1, 5)):
            corrupt[at] = int(rng.integers(0, 256))
        try:
            import_model(bytes(corrupt), dims={"batch": 2, "sequence": 8})
            outcomes.append("imported")
        except ModelImportError as exc:
            assert str(exc)  # noqa: PT017 - a message for the user, whatever went wrong
            outcomes.append("refused")
    assert len(outcomes) == 25
    assert "refused" in outcomes


def test_unknown_tensor_element_type_is_refused():
    w = const("w", np.zeros((4, 4)), np.float32)
    w.data_type = 99
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [X], [Y], [w])
    _refused(serialize(m), r"tensor 'w' has an unknown element type \(99\)")
