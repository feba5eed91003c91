"""``ort-optimized``: ONNX Runtime's own optimised graph mapped back onto the imported graph."""

from __future__ import annotations

import os
import sys

import onnx
import pytest

from roofcast.graph_import import import_model
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.runtimes import ort_plan
from roofcast.predictor.runtimes.patterns import KernelPlan
from roofcast.predictor.workload import workload_table
from tests.predictor.runtimes.ort_graphs import (
    big_constant,
    conv_block,
    custom_op,
    decomposed_layernorm,
    external,
    folded_transpose,
    pad_conv,
    same_type_cast,
)

pytest.importorskip("onnxruntime")
ORT_NOTE = "ONNX Runtime's optimised graph"


@pytest.fixture(autouse=True)
def empty_cache():
    ort_plan._CACHE.clear()
    yield
    ort_plan._CACHE.clear()


def plan_of(graph):
    return ort_plan.ort_optimized(graph, KernelPlan())


def test_pad_conv_relu_is_one_kernel_headed_by_the_conv():
    plan = plan_of(pad_conv())
    assert plan.notes[0].startswith(ORT_NOTE)
    # ORT folds the Pad into the Conv and fuses the Relu: one kernel; the conv (most FLOPs)
    # heads it, so the row is priced as a convolution, not as a pad
    assert plan.groups == {"conv": ("conv", "pad", "relu")}
    assert plan.free == frozenset()
    rows = workload_table(pad_conv(), RunConfig(threads=1, fusion=True), "onnxruntime-cpu",
                          plan=plan)
    conv_rows = rows[rows["key"] == "forward:forward:conv"]
    assert list(conv_rows["family"]) == ["conv"]
    assert list(conv_rows["fused_nodes"]) == ["conv+pad+relu"]


def test_constant_folded_nodes_launch_nothing():
    graph = folded_transpose()
    assert "wt" in set(workload_table(graph, RunConfig(threads=1, fusion=False),
                                      "onnxruntime-cpu")["node"])
    plan = plan_of(graph)
    assert plan.free == {"wt"}  # ORT transposes the initializer once, at load


def test_eliminated_node_joins_its_readers_kernel():
    # ORT removes a Cast to the type its input has: the Sigmoid reads the Relu's output
    plan = plan_of(same_type_cast())
    assert plan.groups == {"sig": ("sig", "cast")}


def test_layout_kernels_become_copies_of_their_tensor():
    plan = plan_of(conv_block(cin=16, cout=16, hw=8))
    reorders = [e for e in plan.extra if e.kernel.op_type in ort_plan.LAYOUT_KERNELS]
    assert reorders, "ORT runs a 16-channel 1x1 conv in NCHWc: a reorder back to NCHW follows"
    size = 16 * 8 * 8 * 4
    for e in reorders:
        assert (e.kernel.bytes_read, e.kernel.bytes_written) == (size, size)
        assert e.after in {"conv", "relu", "nhwc"}  # the group ORT's mapping put it in


def test_second_ask_is_a_cache_hit(monkeypatch):
    graph = pad_conv()
    first = plan_of(graph)

    def refuse(*a, **k):
        raise AssertionError("ONNX Runtime asked twice for the same model and dims")

    monkeypatch.setattr(ort_plan, "optimized_graph", refuse)
    assert plan_of(pad_conv()) == first
    other_dims = pad_conv(hw=20)  # another graph (other shapes): not served from the cache
    with pytest.raises(AssertionError, match="asked twice"):
        plan_of(other_dims)


def test_over_the_byte_budget_falls_back_to_the_rules(monkeypatch):
    monkeypatch.setenv(ort_plan.BUDGET_ENV, "1000")  # the 16x16x3x3 weight needs 9216 bytes
    plan = plan_of(pad_conv(weightless=True))
    assert "over the 0 MiB budget" in plan.notes[0]
    assert plan.notes[0].startswith("ONNX Runtime not asked")
    assert plan.free == {"pad"}  # the rule folded the pad instead
    monkeypatch.setenv(ort_plan.BUDGET_ENV, "100000")
    assert plan_of(pad_conv(weightless=True)).notes[0].startswith(ORT_NOTE)


@pytest.mark.parametrize("raw", ["-1", "lots", "1e9"])
def test_bad_budget_is_a_user_error(monkeypatch, raw):
    monkeypatch.setenv(ort_plan.BUDGET_ENV, raw)
    with pytest.raises(PredictionError, match=ort_plan.BUDGET_ENV):
        plan_of(pad_conv(weightless=True))


def test_external_data_is_never_read(tmp_path):
    """The weight says its data is in ``w.bin`` beside the model: here a folder (reading it
    would fail) and, in the second model, a link to /etc/passwd. The skeleton keeps no
    external-data entry and ONNX Runtime gets stand-in values from memory."""
    (tmp_path / "w.bin").mkdir()
    model_path = tmp_path / "model.onnx"
    model = onnx.load_from_string(_weightless_bytes())
    model_path.write_bytes(model.SerializeToString())
    graph = import_model(model_path)
    skeleton = onnx.load_from_string(graph.skeleton)
    assert all(not t.external_data for t in skeleton.graph.initializer)
    assert b"w.bin" not in graph.skeleton
    assert plan_of(graph).notes[0].startswith(ORT_NOTE)
    other = tmp_path / "other"
    other.mkdir()
    os.symlink("/etc/passwd", other / "w.bin")
    (other / "model.onnx").write_bytes(model.SerializeToString())
    assert plan_of(import_model(other / "model.onnx")).notes[0].startswith(ORT_NOTE)


def _weightless_bytes() -> bytes:
    import numpy as np
    from onnx import helper

    from tests.predictor.runtimes.onnx_graphs import const, vi

    w = external(const("W", np.zeros((16, 16, 3, 3))))
    nodes = [helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1], name="conv")]
    g = helper.make_graph(nodes, "ext", [vi("x", 1, 16, 8, 8)], [vi("y", 1, 16, 8, 8)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_model_onnx_runtime_cannot_load_falls_back():
    plan = plan_of(custom_op())
    assert plan.notes[0].startswith("ONNX Runtime not asked (ONNX Runtime cannot load it")


def test_graph_without_source_model_falls_back():
    graph = pad_conv()
    graph.skeleton = b""
    plan = plan_of(graph)
    assert plan.notes[0] == ("ONNX Runtime not asked (the graph was not imported from an ONNX "
                             "model): its fusion rules instead")
    assert plan.free == {"pad"}


def test_without_onnxruntime_the_rules_answer(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if absent
    plan = plan_of(pad_conv())
    assert plan.notes[0] == ("ONNX Runtime not asked (onnxruntime is not installed): its "
                             "fusion rules instead")
    assert plan.free == {"pad"}


def test_the_default_cpu_runtime_prices_ort_kernels():
    graph = pad_conv()
    rows = workload_table(graph, RunConfig(threads=1), "onnxruntime-cpu")  # fusion default on
    kernels = rows[rows["key"].str.startswith("forward:forward:")]
    assert list(kernels["fused_nodes"]) == ["conv+pad+relu"]
    written = workload_table(graph, RunConfig(threads=1, fusion=False), "onnxruntime-cpu")
    assert list(written["node"]) == ["pad", "conv", "relu"]


def test_rules_and_onnx_runtime_agree_on_a_decomposed_layernorm():
    graph = decomposed_layernorm()
    asked = plan_of(graph)
    ruled = ort_plan.fallback(graph, KernelPlan(), "test")
    assert asked.notes[0].startswith(ORT_NOTE)
    assert [sorted(g) for g in asked.groups.values()] == [sorted(g) for g in ruled.groups.values()]


def test_load_time_constants_count_against_the_budget(monkeypatch):
    graph = big_constant(n=1024)  # a 4 MiB constant ORT would build at session creation
    assert ort_plan.folded_bytes(graph) == 1024 * 1024 * 4
    monkeypatch.setenv(ort_plan.BUDGET_ENV, str(2**20))
    note = plan_of(graph).notes[0]
    assert note.startswith("ONNX Runtime not asked (its weights and load-time constants need "
                           "4 MiB, over the 1 MiB budget")
