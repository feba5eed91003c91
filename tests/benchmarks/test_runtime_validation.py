"""``benchmarks/runtime_validation.py``: the trace classifier, the kernel grouping and the
speedup bounds on hand-written rows (no measurement data needed)."""

from __future__ import annotations

import pandas as pd
import pytest

from roofcast.hw_catalog.catalog import get_device
from tests.scripts import load_benchmark


@pytest.fixture(scope="module")
def rv():
    return load_benchmark("runtime_validation")


def node(fx_op="call_function", target="add", module_class=None, inputs="[[2, 8, 16]]",
         output="(2, 8, 16)", contiguous="[True]", scope="layer", ms=0.1):
    return {"fx_op": fx_op, "target": target, "module_class": module_class,
            "input_shapes": inputs, "output_shape": output, "input_contiguous": contiguous,
            "scope": scope, "fwd_ms": ms}


@pytest.mark.parametrize(("row", "group"), [
    (node(target="addmm", inputs="[[48], [16, 16], [16, 48]]", output="(16, 48)"), "GEMM"),
    (node("call_module", "lm_head", "Linear"), "GEMM"),
    (node(target="matmul", inputs="[[2, 4, 8, 4], [2, 4, 4, 8]]"), "batched matmul"),
    (node(target="softmax"), "softmax"),
    (node("call_module", "transformer.h.0.ln_1", "LayerNorm"), "layernorm"),
    (node("call_module", "transformer.wte", "Embedding"), "copies"),
    (node("call_method", "contiguous", contiguous="[False]"), "copies"),
    (node("call_method", "reshape", contiguous="[False, True]"), "copies"),
    (node("call_method", "reshape", contiguous="[True, True]"), "no-kernel"),
    (node("call_method", "view"), "no-kernel"),
    (node("call_method", "permute"), "no-kernel"),
    (node("call_function", "getitem", inputs="[[1]]", output="(1,)"), "no-kernel"),
    (node("call_module", "transformer.drop", "Dropout"), "no-kernel"),
    (node(target="add", inputs="[[1], [1]]", output="(1,)"), "no-kernel"),  # sizes
    (node(target="add", inputs="[[2, 8, 16], [2, 8, 16]]"), "elementwise"),
    (node(target="truediv", inputs="[[2, 4, 8, 8], [1]]", output="(2, 4, 8, 8)"), "elementwise"),
    (node(target="full", inputs="[[1], [1], [1]]", output="(1,)"), "elementwise"),
    (node("call_module", "x.conv", "Conv2d"), "other"),
])
def test_trace_nodes_are_classified(rv, row, group):
    assert rv.classify_trace_node(row) == group


@pytest.mark.parametrize("fx_op", ["placeholder", "get_attr", "output"])
def test_nodes_that_do_not_run_have_no_group(rv, fx_op):
    assert rv.classify_trace_node(node(fx_op, "x")) is None


def test_trace_groups_scale_layer_nodes_by_the_layer_count(rv):
    trace = pd.DataFrame([
        node(target="addmm", scope="layer", ms=2.0),
        node(target="softmax", scope="layer", ms=0.5),
        node("call_module", "lm_head", "Linear", scope="head", ms=7.0),
        node("call_module", "wte", "Embedding", scope="embedding", ms=0.25),
        node("placeholder", "input_ids", scope="model", ms=0.0),
    ])
    table = rv.trace_groups(trace, num_layer=24)
    assert table.loc["GEMM", "meas_ms"] == pytest.approx(24 * 2.0 + 7.0)
    assert table.loc["GEMM", "meas_kernels"] == 25
    assert table.loc["softmax", "meas_ms"] == pytest.approx(12.0)
    assert table.loc["copies", "meas_kernels"] == 1
    assert set(table.index) == {"GEMM", "softmax", "copies"}


def kernel(family, time_s, nodes, weight_bytes=0.0, engine="vector"):
    return {"family": family, "time_s": time_s, "fused_nodes": nodes,
            "weight_bytes": weight_bytes, "engine": engine}


@pytest.mark.parametrize(("row", "group"), [
    (kernel("matmul", 1.0, "g", weight_bytes=4096.0, engine="matrix"), "GEMM"),
    (kernel("matmul", 1.0, "qk", engine="matrix"), "batched matmul"),
    (kernel("softmax", 1.0, "s"), "softmax"),
    (kernel("normalization", 1.0, "ln"), "layernorm"),
    (kernel("elementwise", 1.0, "a+b"), "elementwise"),
    (kernel("data_movement", 1.0, "t", engine="data"), "copies"),
    (kernel("data_movement", 0.0, "r", engine="free"), "no-kernel"),
    (kernel("conv", 1.0, "c", weight_bytes=4.0, engine="matrix"), "other"),
])
def test_roofcast_kernels_are_grouped(rv, row, group):
    assert rv.classify_kernel(row) == group


def test_kernel_groups_count_uncovered_graph_nodes_as_no_kernel(rv):
    per_op = pd.DataFrame([
        kernel("matmul", 2e-3, "mm", weight_bytes=8.0, engine="matrix"),
        kernel("matmul", 1e-3, "mm2+mul", engine="matrix"),  # a fused pair: two nodes
        kernel("elementwise", 5e-4, "add"),
    ])
    table = rv.kernel_groups(per_op, graph_nodes=10)
    assert table.loc["GEMM", "pred_ms"] == pytest.approx(2.0)
    assert table.loc["batched matmul", "pred_kernels"] == 1
    assert table.loc["no-kernel", "pred_kernels"] == 10 - 4
    assert table.loc["no-kernel", "pred_ms"] == 0.0


def test_speedup_bounds_are_the_compute_and_bandwidth_ratios(rv):
    a100, h100 = get_device("a100-40gb-pcie"), get_device("h100-sxm")
    rc, rb, lo, hi = rv.bounds(a100, h100, "fp16")
    assert rc == pytest.approx(h100.peak("matrix", "fp16").flops_per_s
                               / a100.peak("matrix", "fp16").flops_per_s)
    assert rb == pytest.approx(h100.mem_bw_Bps / a100.mem_bw_Bps)
    assert (lo, hi) == (min(rc, rb), max(rc, rb))
    back = rv.bounds(h100, a100, "fp16")
    assert back[3] == pytest.approx(1 / lo)


def test_ratio_checks_run_end_to_end(rv, capsys):
    """The quick ratio part alone needs only the zoo: every non-baseline cell is counted."""
    import json

    rc = rv.main(["--quick", "--only", "ratios", "--runtime", "none", "--ratio-estimators",
                  "time-roofline", "--format", "json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    (summary,) = doc["ratio_summary"]
    cells = len(rv.RATIO_MODELS) * len(rv.RATIO_PRECISIONS) * len(rv.RATIO_MODES) * (
        len(rv.QUICK_RATIO_DEVICES) - 1)
    assert summary["cells"] == cells
    assert summary["above_max"] + summary["below_min"] == len(doc["ratio_outside"])
    for row in doc["ratio_outside"]:
        assert not row["allowed_min"] <= row["speedup"] <= row["allowed_max"]


def test_unknown_part_is_refused(rv):
    with pytest.raises(SystemExit):
        rv.main(["--only", "whole,nope"])
