"""The ONNX Runtime CPU rules (``rules_ort``): what ``ort-optimized`` falls back to."""

from __future__ import annotations

import pytest

from roofcast.predictor.config import RunConfig
from roofcast.predictor.runtimes import get_runtime
from roofcast.predictor.runtimes.ort_plan import FALLBACK_PATTERNS, fallback
from roofcast.predictor.runtimes.patterns import PATTERNS, KernelPlan
from roofcast.predictor.runtimes.rules_ort import nchwc_region
from roofcast.predictor.workload import workload_table
from tests.predictor.runtimes.ort_graphs import conv_block, decomposed_layernorm, pad_conv, se_block


def pad_into_conv(graph):
    return PATTERNS["ort-pad-into-conv"](graph, KernelPlan())


def test_zero_pad_before_conv_launches_nothing():
    plan = pad_into_conv(pad_conv())
    assert plan.free == {"pad"}
    assert plan.notes == ("1 Pads folded into the next Conv",)


@pytest.mark.parametrize("kw", [
    {"value": 1.0},  # a non-zero pad value is not a conv's implicit zero padding
    {"mode": "reflect"},
    {"pads": (0, 1, 1, 1, 0, 0, 1, 1)},  # pads the channel axis
    {"pads": (0, 0, -1, 0, 0, 0, 0, 0)},  # a crop
    {"reader": "Relu"},  # no conv reads it
    {"second_reader": True},  # the padded tensor is also a model output
])
def test_pads_onnx_runtime_keeps(kw):
    assert pad_into_conv(pad_conv(**kw)).free == frozenset()


def test_workload_drops_the_folded_pad_row():
    graph = pad_conv()
    config = RunConfig(threads=1, fusion=True)
    written = workload_table(graph, RunConfig(threads=1, fusion=False), "onnxruntime-cpu")
    assert "pad" in set(written["node"])
    plan = fallback(graph, KernelPlan(), "test")
    rows = workload_table(graph, config, "onnxruntime-cpu", plan=plan)
    assert "pad" not in set(rows["node"])
    assert not rows["fused_nodes"].str.contains("pad").any()


def test_nchwc_reorders_at_the_region_borders():
    graph = conv_block(cin=16, cout=16, hw=8)
    plan = PATTERNS["ort-nchwc-reorders"](graph, KernelPlan())
    kinds = sorted(e.kernel.op_type for e in plan.extra)
    assert kinds == ["ReorderInput", "ReorderOutput"]
    size = 1 * 16 * 8 * 8 * 4  # the tensor crossing the border, fp32
    for e in plan.extra:
        assert (e.kernel.bytes_read, e.kernel.bytes_written) == (size, size)
        assert e.kernel.family == "data_movement"
        assert e.kernel.flops == 0
    rows = workload_table(graph, RunConfig(threads=1, fusion=True), "onnxruntime-cpu",
                          plan=plan)
    assert list(rows["op_type"]) == ["Conv", "ReorderInput", "Relu", "ReorderOutput",
                                     "Transpose"]


def test_no_reorder_without_a_blocked_conv():
    # a grouped (not depthwise) conv stays NCHW: nothing to reorder
    plan = PATTERNS["ort-nchwc-reorders"](conv_block(cin=16, cout=16, group=2), KernelPlan())
    assert plan.extra == ()
    # the first conv of an image model reads 3 channels in NCHW: a ReorderOutput only
    plan = PATTERNS["ort-nchwc-reorders"](conv_block(cin=3, cout=16), KernelPlan())
    assert [e.kernel.op_type for e in plan.extra] == ["ReorderOutput"]


def test_fallback_chain_composes_pad_epilogue_and_reorders():
    plan = fallback(pad_conv(), KernelPlan(), "no onnxruntime here")
    assert plan.notes[0] == "ONNX Runtime not asked (no onnxruntime here): its fusion rules instead"
    assert plan.free == {"pad"}
    assert plan.groups == {"conv": ("conv", "relu")}
    # the reorder's reader looks through the folded pad: the conv reads the model input
    assert sorted(e.kernel.op_type for e in plan.extra) == ["ReorderInput", "ReorderOutput"]


def test_profile_names_only_registered_patterns():
    prof = get_runtime("onnxruntime-cpu")
    assert prof.fusion_patterns == ("ort-optimized",)
    assert prof.patterns == ()
    assert all(p in PATTERNS for p in FALLBACK_PATTERNS)


@pytest.mark.parametrize("affine", [True, False])
def test_decomposed_layernorm_is_one_kernel(affine):
    plan = PATTERNS["ort-layernorm"](decomposed_layernorm(affine=affine), KernelPlan())
    members = ["mean", "sub", "pow", "var", "eps", "sqrt", "div"]
    members += ["gamma", "beta"] if affine else []
    assert [sorted(g) for g in plan.groups.values()] == [sorted(members)]
    assert plan.notes == ("1 decomposed layer norms as one kernel",)


def test_layernorm_with_a_second_reader_of_the_mean_is_left_alone():
    graph = decomposed_layernorm()
    graph.outputs = (*graph.outputs, next(t for n in graph.ops() if n.name == "mean"
                                          for t in n.outputs))
    assert PATTERNS["ort-layernorm"](graph, KernelPlan()).groups == {}


def test_broadcast_multiply_leaves_the_nchwc_region():
    graph = se_block()
    assert nchwc_region(graph) == {"conv1", "relu", "gap", "squeeze", "sig", "conv2"}
    labels = sorted(e.label for e in PATTERNS["ort-nchwc-reorders"](graph, KernelPlan()).extra)
    assert labels == ["ReorderInput.conv1", "ReorderInput.conv2", "ReorderOutput.conv2",
                      "ReorderOutput.relu", "ReorderOutput.sig"]
