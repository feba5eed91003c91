"""Training step: backward rows per family, optimizer traffic, phases."""

from __future__ import annotations

import pytest

from roofcast.graph_import.types import Engine
from roofcast.predictor.config import RunConfig
from roofcast.predictor.simulate import predict_graph
from roofcast.predictor.training import requires_grad_tensors, trainable_params
from roofcast.predictor.workload import workload_table
from tests.predictor.graph_helpers import AS_WRITTEN, graph, op, t, toy_device

B, D, H = 8, 64, 32  # batch, in features, hidden


def mlp():
    """x[B,D] @ w1[D,H] -> Relu -> @ w2[H,H] -> y[B,H]."""
    x, w1, w2 = t("x", B, D), t("w1", D, H), t("w2", H, H)
    h0, h1, y = t("h0", B, H), t("h1", B, H), t("y", B, H)
    nodes = [
        op("mm1", "MatMul", [x, w1], [h0], flops=2 * B * D * H, engine=Engine.MATRIX,
           weights=["w1"]),
        op("relu", "Relu", [h0], [h1], flops=B * H),
        op("mm2", "MatMul", [h1, w2], [y], flops=2 * B * H * H, engine=Engine.MATRIX,
           weights=["w2"]),
    ]
    return graph(nodes, [x], [y])


def rows(cfg=None):
    w = workload_table(mlp(), cfg or RunConfig(mode="train"), AS_WRITTEN)
    return dict(zip(w["key"], w.to_dict("records"), strict=True))


def test_only_parameters_and_what_depends_on_them_require_grad():
    g = mlp()
    assert set(trainable_params(g)) == {"w1", "w2"}
    assert requires_grad_tensors(g) == {"w1", "w2", "h0", "h1", "y"}  # not the input x


def test_matmul_backward_is_two_gemms_of_forward_size_except_the_first_layer():
    r = rows()
    # mm2: dX = dY·W2ᵀ and dW2 = h1ᵀ·dY, each 2·B·H·H FLOPs
    dx = r["backward:grad_input0:mm2"]
    assert dx["flops"] == 2 * B * H * H
    assert dx["bytes_read"] == 4 * (B * H + H * H)  # dY + W2
    assert dx["bytes_written"] == 4 * (B * H)  # dh1
    assert dx["weight_bytes"] == 4 * (H * H)  # W2 is read
    assert (dx["gemm_m"], dx["gemm_n"], dx["gemm_k"]) == (B, H, H)
    dw = r["backward:grad_weight1:mm2"]
    assert dw["flops"] == 2 * B * H * H
    assert dw["bytes_read"] == 4 * (B * H + B * H)  # dY + h1
    assert dw["bytes_written"] == 4 * (H * H)
    assert (dw["gemm_batch"], dw["gemm_m"], dw["gemm_n"], dw["gemm_k"]) == (1, H, H, B)
    # mm1: the model input needs no gradient -> only dW1
    assert "backward:grad_input0:mm1" not in r
    dw1 = r["backward:grad_weight1:mm1"]
    assert dw1["flops"] == 2 * B * D * H
    assert (dw1["gemm_m"], dw1["gemm_n"], dw1["gemm_k"]) == (D, H, B)


def test_activation_backward_reads_grad_and_saved_input():
    r = rows()["backward:grad:relu"]
    assert r["flops"] == B * H
    assert r["bytes_read"] == 4 * (B * H + B * H)  # dY + saved h0
    assert r["bytes_written"] == 4 * (B * H)


@pytest.mark.parametrize(("optimizer", "flops", "reads", "writes"),
                         [("adam", 12, 4, 3), ("sgd_momentum", 4, 3, 2)])
def test_optimizer_update_traffic(optimizer, flops, reads, writes):
    for precision in ("fp32", "fp16"):  # state stays fp32 under mixed precision
        r = rows(RunConfig(mode="train", optimizer=optimizer, precision=precision))
        u = r[f"update:{optimizer}:w1"]
        n = D * H
        assert u["flops"] == flops * n
        assert u["bytes_read"] == reads * n * 4
        assert u["bytes_written"] == writes * n * 4
        assert u["grad_of"] == "mm1"
        assert u["dtype"] == "fp32"


def test_training_costs_more_than_inference_and_reports_phases():
    hw = toy_device(matrix_flops=1e10)
    infer = predict_graph(mlp(), hw, RunConfig(), "time-roofline")
    train = predict_graph(mlp(), hw, RunConfig(mode="train"), "time-roofline")
    assert train.total_s > infer.total_s
    phases = dict(zip(train.by_phase["phase"], train.by_phase["time_s"], strict=True))
    assert set(phases) == {"forward", "backward", "update"}
    assert phases["forward"] == pytest.approx(infer.total_s)
    assert sum(phases.values()) == pytest.approx(train.total_s)


def test_training_critical_path_of_a_chain_is_the_whole_step():
    """One parameter at the head of a chain: nothing can overlap."""
    x, w, a, b, c = t("x", 100), t("w", 100), t("a", 100), t("b", 100), t("c", 100)
    g = graph([op("mul", "Mul", [x, w], [a], flops=100, weights=["w"]),
               op("relu", "Relu", [a], [b], flops=100),
               op("exp", "Exp", [b], [c], flops=100)], [x], [c])
    p = predict_graph(g, toy_device(), RunConfig(mode="train", inter_op=True), "roofline")
    assert p.critical_path_s == pytest.approx(p.total_s)
    assert [s.split(":")[0] for s in p.critical_path if s.split(":")[0] != "F"] == \
        ["B", "B", "B", "U"]


def test_updates_overlap_the_rest_of_the_backward_pass_with_inter_op():
    p = predict_graph(mlp(), toy_device(matrix_flops=1e10),
                      RunConfig(mode="train", inter_op=True), "roofline")
    w2_update = float(p.per_op.loc[p.per_op["key"] == "update:adam:w2", "time_s"].iloc[0])
    assert p.critical_path_s == pytest.approx(p.total_s - w2_update)


def test_batchnorm_running_stats_are_not_trained():
    x, s, bias, mean, var, y = (t("x", 2, 4, 3, 3), t("s", 4), t("bb", 4), t("m", 4),
                                t("v", 4), t("y", 2, 4, 3, 3))
    g = graph([op("bn", "BatchNormalization", [x, s, bias, mean, var], [y], flops=4 * 72,
                  weights=["s", "bb", "m", "v"])], [x], [y])
    assert set(trainable_params(g)) == {"s", "bb"}
    w = workload_table(g, RunConfig(mode="train"), AS_WRITTEN)
    bwd = w[w["phase"] == "backward"].iloc[0]
    assert bwd["flops"] == 2 * 4 * 72
    # reads dY + the forward's reads (x, scale, bias, mean, var); writes dscale + dbias only
    assert bwd["bytes_read"] == 4 * (72 + 72 + 4 * 4)
    assert bwd["bytes_written"] == 4 * (4 + 4)


def test_no_gradient_flows_through_non_float_outputs():
    x, w, a, m = t("x", 10), t("w", 10), t("a", 10), t("m", 10, dtype="bool")
    g = graph([op("mul", "Mul", [x, w], [a], flops=10, weights=["w"]),
               op("cmp", "Greater", [a, x], [m], flops=10)], [x], [m])
    w_rows = workload_table(g, RunConfig(mode="train"), AS_WRITTEN)
    assert "backward:grad:cmp" not in set(w_rows["key"])
