"""``app.charts`` figures built from library tables: order and labels."""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.app import charts
from roofcast.app.model_ref import load_graph
from roofcast.predictor.config import RunConfig
from roofcast.predictor.simulate import predict_graph


def test_slowest_kernels_slowest_first_with_one_label_per_kernel():
    """A training step has several kernels per node (forward, grad_input, grad_weight, the
    optimizer update): each keeps its own bar, and the bars run slowest first."""
    pred = predict_graph(load_graph("resnet50", (), 8), "h100-sxm",
                         RunConfig(dims={"batch": 8}, mode="train"))
    fig = charts.top_ops_bar(pred.per_op, top=30)
    bar = fig.data[0]
    assert list(bar.x) == sorted(pred.per_op["time_s"] * 1e6, reverse=True)[:30]
    assert len(set(bar.y)) == 30
    assert list(fig.layout.yaxis.categoryarray) == list(bar.y)
    assert fig.layout.yaxis.autorange == "reversed"  # first listed on top
    assert any(label.endswith(" · F") for label in bar.y)
    assert any(" · B grad_" in label for label in bar.y)


def test_equal_times_are_ordered_by_their_own_work_not_by_graph_order():
    """ResNet-50 at batch 1 on an H100: every kernel sits on the 5 µs launch floor. The chart
    lists first the kernels with the most compute/memory time, not the graph's first 20."""
    per_op = predict_graph(load_graph("resnet50", (), 1), "h100-sxm",
                           RunConfig(dims={"batch": 1})).per_op
    assert per_op["time_s"].nunique() == 1
    own = np.maximum(per_op["compute_s"], per_op["memory_s"])
    fig = charts.top_ops_bar(per_op, top=20)
    shown = per_op.set_index(charts.kernel_labels(per_op)).loc[list(fig.data[0].y)]
    shown_own = np.maximum(shown["compute_s"], shown["memory_s"]).tolist()
    assert shown_own == sorted(own, reverse=True)[:20]
    assert list(fig.data[0].y)[:2] != list(charts.kernel_labels(per_op))[:2]  # not graph order


def test_kernel_labels_fall_back_to_the_key_on_a_collision():
    per_op = pd.DataFrame({"fused_nodes": ["n", "n", "m"], "phase": ["forward"] * 3,
                           "kernel": ["forward"] * 3, "key": ["k1", "k2", "k3"]})
    assert list(charts.kernel_labels(per_op)) == ["k1", "k2", "m · F"]


def test_device_charts_write_their_figures_beside_the_bars():
    df = pd.DataFrame({"device": ["a", "b"], "time_ms": [1.0, 2.0], "lower_ms": [0.5, 1.5],
                       "upper_ms": [1.5, 3.0], "speedup": [1.0, 0.5],
                       "speedup_at_lower": [1.0, 1 / 3], "speedup_at_upper": [1.0, 0.5]})
    for fig in (charts.device_time_bars(df), charts.speedup_bars(df, "a")):
        assert fig.layout.xaxis.domain == (0.0, charts.BAR_DOMAIN)
        notes = fig.layout.annotations
        assert [a.y for a in notes] == ["a", "b"]
        assert all(a.xref == "paper" and a.x > charts.BAR_DOMAIN for a in notes)
    assert charts.device_time_bars(df).layout.annotations[1].text == "<b>2 ms</b><br>1.5 – 3"


def test_titles_sit_under_the_toolbar_and_legends_below_the_axis_title():
    """Every chart's title is placed below the toolbar row (Plotly's mode bar over the top right
    of the chart), and a horizontal legend gets a band of its own under the x axis title, as
    tall as its rows; the LLM memory chart (5 entries) is the case that overlapped."""
    df = pd.DataFrame({"device": ["a", "b"], "weights_GiB": [10.0, 20.0],
                       "kv_cache_GiB": [5.0, 6.0], "activations_GiB": [1.0, 1.0],
                       "reserve_GiB": [2.0, 2.0], "capacity_GiB": [80.0, 80.0],
                       "memory_GiB": [18.0, 29.0], "fits": [True, True]})
    fig = charts.llm_memory_bars(df)
    rows = charts._legend_rows(fig)
    assert rows >= 1
    assert fig.layout.title.pad.t == charts.TOOLBAR_PX
    assert fig.layout.title.yref == "container"
    assert fig.layout.title.yanchor == "top"
    assert fig.layout.margin.t > charts.TOOLBAR_PX + fig.layout.title.font.size
    assert fig.layout.legend.yref == "container"
    assert fig.layout.legend.y == 0
    assert fig.layout.margin.b == charts.X_AXIS_PX + rows * charts.LEGEND_ROW_PX
    single = charts.metric_bars(df, "memory_GiB", "Memory", "GiB", "#000")
    assert charts._legend_rows(single) == 0
    assert single.layout.margin.b < charts.X_AXIS_PX  # no legend: no band


def test_op_mix_bar_by_flops_or_by_count():
    mix = pd.DataFrame({"op_type": ["Conv", "Relu", "Add"], "count": [3, 5, 1],
                        "gflop": [9.0, 0.5, 0.1], "flop_share": [0.9375, 0.052, 0.0105]})
    by_flops = charts.op_mix_bar(mix)
    assert list(by_flops.data[0].y) == ["Add", "Relu", "Conv"]  # largest on top
    assert by_flops.layout.title.text == "Op mix by FLOPs"
    by_count = charts.op_mix_bar(mix, "count")
    assert list(by_count.data[0].y) == ["Add", "Conv", "Relu"]
    assert list(by_count.data[0].x) == [1, 3, 5]
    assert by_count.layout.xaxis.title.text == "nodes"
