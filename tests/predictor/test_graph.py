"""Graph timing: sequential sum, critical path, breakdowns, completeness checks."""

from __future__ import annotations

import math

import pytest

from roofcast.graph_import.types import FREE_COST, Engine
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.simulate import predict_graph
from roofcast.predictor.workload import workload_table
from tests.predictor.graph_helpers import AS_WRITTEN, branched_graph, graph, op, t, toy_device

N = 1000
US = 1e-6


def test_sequential_sum_and_critical_path_on_a_branched_graph():
    g = branched_graph(N)
    hw = toy_device()
    seq = predict_graph(g, hw, RunConfig(), estimator="roofline")
    # a: reads x (4000 B) writes a (4000 B) = 8000 B -> 8 µs; Exp: 20 FLOP/elem -> 20 µs
    a, b, c, d = 8000 / 1e9, 20 * N / 1e9, 8000 / 1e9, 12000 / 1e9
    assert seq.total_s == pytest.approx(a + b + c + d)
    assert seq.critical_path_s is None
    assert seq.time_s == seq.total_s
    par = predict_graph(g, hw, RunConfig(inter_op=True), estimator="roofline")
    assert par.total_s == pytest.approx(a + b + c + d)
    assert par.critical_path_s == pytest.approx(a + b + d)  # c runs beside b
    assert [p for p in par.critical_path if p.startswith("F:")] == ["F:a", "F:b", "F:d"]
    assert par.time_s == par.critical_path_s
    assert seq.speedup_over(par) == pytest.approx((a + b + d) / (a + b + c + d))


def test_time_roofline_floors_every_kernel_at_the_launch_overhead():
    g = branched_graph(N)
    hw = toy_device(overhead_s=15 * US)
    p = predict_graph(g, hw, RunConfig(), estimator="time-roofline")
    # roofline terms 8, 20, 8, 12 µs; floor 15 µs on every kernel
    assert p.total_s == pytest.approx(15 * US + 20 * US + 15 * US + 15 * US)
    assert set(p.per_op["bound"]) == {"overhead", "compute"}
    by_bound = dict(zip(p.by_bound["bound"], p.by_bound["time_s"], strict=True))
    assert by_bound == pytest.approx({"overhead": 45e-6, "compute": 20e-6})


def test_breakdowns_add_up_to_the_total():
    p = predict_graph(branched_graph(N), toy_device(), RunConfig(), estimator="roofline")
    for table in (p.by_op_type, p.by_bound, p.by_phase):
        assert table["time_s"].sum() == pytest.approx(p.total_s)
        assert table["share"].sum() == pytest.approx(1.0)
    assert list(p.by_phase["phase"]) == ["forward"]
    assert p.by_op_type.iloc[0]["op_type"] == "Exp"  # largest first


def test_more_bandwidth_speeds_up_a_memory_bound_graph_by_the_ratio():
    g = branched_graph(N)
    # vector peak 1 TFLOP/s: everything memory bound
    slow = predict_graph(g, toy_device("s", vector_flops=1e12), RunConfig(), "roofline")
    fast = predict_graph(g, toy_device("f", vector_flops=1e12, bw_Bps=2e9), RunConfig(),
                         "roofline")
    assert fast.speedup_over(slow) == pytest.approx(2.0)


def test_free_view_ops_get_no_row_and_no_time():
    x, r, y = t("x", 10, 100), t("r", 1000), t("y", 1000)
    g = graph([op("reshape", "Reshape", [x], [r], engine=Engine.FREE,
                  cost=FREE_COST),
               op("relu", "Relu", [r], [y], flops=1000)], [x], [y])
    w = workload_table(g, RunConfig(), AS_WRITTEN)
    assert list(w["node"]) == ["relu"]
    p = predict_graph(g, toy_device(), RunConfig(inter_op=True), "roofline")
    assert p.total_s == pytest.approx(8000 / 1e9) == p.critical_path_s


def test_fp16_halves_float_bytes_and_keeps_flops():
    g = branched_graph(N)
    w32 = workload_table(g, RunConfig(), AS_WRITTEN)
    w16 = workload_table(g, RunConfig(precision="fp16"), AS_WRITTEN)
    assert (w16["bytes_read"] * 2 == w32["bytes_read"]).all()
    assert (w16["flops"] == w32["flops"]).all()
    assert set(w16["dtype"]) == {"fp16"}


def test_incomplete_graph_is_refused_unless_allowed():
    g = branched_graph(N)
    g.unsupported["MyCustomOp"] = 2
    with pytest.raises(PredictionError, match="MyCustomOp x2"):
        predict_graph(g, toy_device(), RunConfig())
    p = predict_graph(g, toy_device(), RunConfig(), "roofline", allow_incomplete=True)
    assert math.isfinite(p.total_s)


def test_config_dims_must_match_the_import():
    g = branched_graph(N)
    g.dims = {"batch": 4}
    with pytest.raises(PredictionError, match="imported with batch=4"):
        workload_table(g, RunConfig(dims={"batch": 8}), AS_WRITTEN)
    assert len(workload_table(g, RunConfig(dims={"batch": 4}), AS_WRITTEN)) == 4


def test_unknown_estimator_lists_the_known_ones():
    with pytest.raises(PredictionError, match="time-roofline"):
        predict_graph(branched_graph(N), toy_device(), RunConfig(), estimator="magic")


def test_critical_path_equals_networkx_longest_path():
    """The vectorised DP gives nx.dag_longest_path_length of the node-weighted step DAG."""
    import networkx as nx

    from roofcast.predictor.simulate import critical_path_times, step_dag

    p = predict_graph(branched_graph(N), toy_device(), RunConfig(mode="train", inter_op=True),
                      "roofline")
    dag = step_dag(branched_graph(N), p.per_op)
    times = p.per_op["time_s"].to_numpy()
    weights = [0.0] * len(dag.nodes)
    for i, row in enumerate(dag.row_node):
        weights[row] += times[i]
    split = nx.DiGraph()  # node i -> (i,in) -w-> (i,out); edges carry weights
    for i, preds in enumerate(dag.preds):
        split.add_edge((i, "in"), (i, "out"), w=weights[i])
        for j in preds:
            split.add_edge((j, "out"), (i, "in"), w=0.0)
    lengths, _ = critical_path_times(dag, times)
    assert lengths[0] == pytest.approx(nx.dag_longest_path_length(split, weight="w"))
    assert p.critical_path_s == pytest.approx(lengths[0])


def test_predict_graph_accepts_a_device_id():
    p = predict_graph(branched_graph(N), "h100-sxm", RunConfig())
    assert p.device == "h100-sxm"
