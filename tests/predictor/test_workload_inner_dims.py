"""inner_elems: the row length of row-wise ops and the conv window, in the workload table."""

from __future__ import annotations

import math

import numpy as np

from roofcast.graph_import.costs.inner_dims import inner_elems
from roofcast.graph_import.costs.registry import spec
from roofcast.graph_import.types import OpNode, TensorInfo
from roofcast.graph_import.workload_schema import check_workload
from roofcast.predictor.config import RunConfig
from roofcast.predictor.workload import workload_table
from tests.predictor.graph_helpers import AS_WRITTEN, graph, op


def t(name: str, *shape: int, dtype: str = "float") -> TensorInfo:
    return TensorInfo(name, tuple(shape), dtype)


def node(op_type: str, inputs, outputs, attrs=None) -> OpNode:
    return OpNode(name="n", op_type=op_type, domain="", inputs=tuple(inputs),
                  outputs=tuple(outputs), attrs=attrs or {})


def test_softmax_row_is_the_axis_length():
    x, y = t("x", 4, 12, 128, 96), t("y", 4, 12, 128, 96)
    assert inner_elems(node("Softmax", [x], [y])) == 96
    assert inner_elems(node("LogSoftmax", [x], [y], {"axis": 2})) == 128


def test_layer_norm_row_is_the_trailing_axes():
    x, s, y = t("x", 8, 16, 768), t("s", 768), t("y", 8, 16, 768)
    assert inner_elems(node("LayerNormalization", [x, s], [y])) == 768
    assert inner_elems(node("LayerNormalization", [x, s], [y], {"axis": 1})) == 16 * 768


def test_group_and_instance_norm_normalise_channels_times_spatial():
    x, y = t("x", 2, 32, 7, 7), t("y", 2, 32, 7, 7)
    assert inner_elems(node("InstanceNormalization", [x, t("s", 32), t("b", 32)], [y])) == 7 * 7
    g = node("GroupNormalization", [x, t("s", 32), t("b", 32)], [y], {"num_groups": 8})
    assert inner_elems(g) == 32 / 8 * 7 * 7


def test_reduction_folds_input_per_output():
    r = node("ReduceMean", [t("x", 2, 64, 10)], [t("y", 2, 1, 10)], {"axes": [1]})
    assert inner_elems(r) == 2 * 64 * 10 / (2 * 10)


def test_conv_window_and_no_rule():
    c = node("Conv", [t("x", 1, 3, 32, 32), t("w", 16, 3, 5, 3)], [t("y", 1, 16, 28, 30)])
    assert inner_elems(c) == 5 * 3
    assert inner_elems(node("Relu", [t("x", 4)], [t("y", 4)])) is None
    assert inner_elems(node("Softmax", [], [t("y", 4)])) is None  # missing input: no guess
    assert all(spec(op).inner_elems is not None
               for op in ("Softmax", "LayerNormalization", "Conv", "ReduceSum"))


def test_workload_table_carries_inner_elems():
    x, w, z, h, y = t("x", 4, 16), t("w", 16, 32), t("z", 4, 32), t("h", 4, 32), t("y", 4, 32)
    g = graph(
        [
            op("mm", "MatMul", [x, w], [z], flops=2 * 4 * 16 * 32, weights=("w",)),
            op("sm", "Softmax", [z], [h], flops=5 * 128),
            op("act", "Relu", [h], [y], flops=128),
        ],
        [x],
        [y],
    )
    w = workload_table(g, RunConfig(), AS_WRITTEN)
    check_workload(w)
    by = w.set_index("node")["inner_elems"]
    assert by["sm"] == 32
    assert math.isnan(by["act"])
    train = workload_table(g, RunConfig(mode="train"), AS_WRITTEN)
    bwd = train[(train["phase"] == "backward") & (train["node"] == "sm")]
    assert len(bwd) > 0
    assert np.all(bwd["inner_elems"] == 32)
