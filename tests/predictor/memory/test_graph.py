"""Memory footprint: liveness on a chain and a diamond, views, training state, max batch."""

from __future__ import annotations

import pytest

from roofcast.graph_import.types import FREE_COST, Engine
from roofcast.predictor.config import RunConfig
from roofcast.predictor.memory.batch import max_batch_that_fits
from roofcast.predictor.memory.graph import memory_footprint, peak_live_bytes
from tests.predictor.graph_helpers import batched_chain, graph, op, t, toy_device


def chain():
    """x[100] -> a[200] -> b[50] -> y[300] (float32: 400, 800, 200, 1200 B)."""
    x, a, b, y = t("x", 100), t("a", 200), t("b", 50), t("y", 300)
    return graph([op("p", "Tile", [x], [a]), op("q", "Relu", [a], [b]),
                  op("r", "Tile", [b], [y])], [x], [y])


def test_chain_liveness_is_the_largest_adjacent_pair():
    # step p: x + a = 1200; step q: a + b = 1000; step r: b + y = 1400
    assert peak_live_bytes(chain(), "fp32") == 200 + 1200
    assert peak_live_bytes(chain(), "fp16") == (200 + 1200) / 2


def test_diamond_keeps_the_fork_alive_until_both_branches_ran():
    """x[10] -> a[100] -> {b[30], c[40]} -> d[5] = b+c (shapes differ for the arithmetic)."""
    x, a, b, c, d = t("x", 10), t("a", 100), t("b", 30), t("c", 40), t("d", 5)
    g = graph([op("a", "Tile", [x], [a]), op("b", "Slice", [a], [b]),
               op("c", "Slice", [a], [c]), op("d", "Add", [b, c], [d])], [x], [d])
    order = [n.name for n in g.ops()]
    assert order.index("d") == 3
    # live bytes per step: a: x+a = 440; b: a+b = 520; c: a+b+c = 680 (b waits for d);
    # d: b+c+d = 300
    assert peak_live_bytes(g, "fp32") == 4 * (100 + 30 + 40)


def test_a_view_aliases_its_input_instead_of_allocating():
    x, r, y = t("x", 10, 10), t("r", 100), t("y", 100)
    g = graph([op("view", "Reshape", [x], [r], cost=FREE_COST, engine=Engine.FREE),
               op("relu", "Relu", [r], [y])], [x], [y])
    assert peak_live_bytes(g, "fp32") == 400 + 400  # x (= r) and y


def test_a_view_of_a_weight_is_not_an_activation():
    x, w, wr, y = t("x", 4, 8), t("w", 128), t("wr", 8, 16), t("y", 4, 16)
    g = graph([op("view", "Reshape", [w], [wr], cost=FREE_COST, engine=Engine.FREE,
                  weights=["w"]),
               op("mm", "MatMul", [x, wr], [y], engine=Engine.MATRIX)], [x], [y])
    assert peak_live_bytes(g, "fp32") == 4 * (4 * 8 + 4 * 16)


def test_inference_weights_at_run_precision():
    x, w, y = t("x", 4, 8), t("w", 8, 16), t("y", 4, 16)
    g = graph([op("mm", "MatMul", [x, w], [y], engine=Engine.MATRIX, weights=["w"])], [x], [y])
    m = memory_footprint(g, RunConfig(precision="int8"))
    assert m.weights_bytes == 8 * 16
    assert m.activations_bytes == 4 * 8 + 4 * 16
    assert m.total_bytes == 8 * 16 + 4 * 8 + 4 * 16


@pytest.mark.parametrize(("optimizer", "states"), [("adam", 2), ("sgd_momentum", 1)])
def test_training_adds_gradients_optimizer_state_and_saved_activations(optimizer, states):
    x, w, h, y = t("x", 4, 8), t("w", 8, 16), t("h", 4, 16), t("y", 4, 16)
    g = graph([op("mm", "MatMul", [x, w], [h], engine=Engine.MATRIX, weights=["w"]),
               op("relu", "Relu", [h], [y])], [x], [y])
    for precision in ("fp32", "fp16"):
        m = memory_footprint(g, RunConfig(mode="train", optimizer=optimizer,
                                          precision=precision))
        s = 4 if precision == "fp32" else 2
        master = 4 if precision == "fp16" else 0  # fp32 master copy: an optimizer state
        assert m.weights_bytes == s * 8 * 16
        assert m.gradients_bytes == s * 8 * 16
        assert m.optimizer_bytes == (master + states * 4) * 8 * 16
        assert m.weights_bytes + m.gradients_bytes + m.optimizer_bytes == (2 + states) * 4 * 8 * 16
        assert m.saved_activations_bytes == s * (4 * 8 + 4 * 16 + 4 * 16)  # x, h, y
        # largest backward working set: relu's dY + dh (the matmul's dW is a gradient)
        assert m.activations_bytes == m.saved_activations_bytes + s * (64 + 64)


def test_max_batch_that_fits_solves_the_affine_model():
    # inference total = 4e6 (weights) + 8000·b (two live [b,1000] fp32 tensors)
    hw = toy_device(capacity_bytes=4e6 + 8000 * 123 + 5000)
    assert max_batch_that_fits(batched_chain, hw, RunConfig()) == 123
    cap = hw.mem_capacity_bytes
    assert memory_footprint(batched_chain(123), RunConfig(), capacity_bytes=cap).fits
    over = memory_footprint(batched_chain(124), RunConfig(), capacity_bytes=cap)
    assert not over.fits
    assert over.over_bytes == 8000 - 5000
    small = toy_device(capacity_bytes=4e6)
    assert max_batch_that_fits(batched_chain, small, RunConfig()) == 0
    # training (adam): 4·4e6 (w, g, m, v) + saved 3·4000·b + working set 2·4000·b
    train = RunConfig(mode="train")
    hw = toy_device(capacity_bytes=16e6 + 20000 * 77 + 100)
    assert max_batch_that_fits(batched_chain, hw, train) == 77


def test_max_batch_is_none_when_memory_does_not_grow_with_batch():
    assert max_batch_that_fits(lambda b: chain(), toy_device(), RunConfig()) is None
