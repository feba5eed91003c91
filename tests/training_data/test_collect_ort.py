"""The ORT CPU collector on a tiny model: rows map back to the original nodes, times positive."""

from __future__ import annotations

import pytest

from roofcast.training_data.collectors.ort_cpu import MeasureConfig, measure_model
from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.schema import validate
from tests.training_data.collect_helpers import conv_matmul_model

ORIGINAL_NODES = {"conv", "relu", "residual", "matmul", "bias"}


@pytest.fixture(scope="module")
def measured_all():
    return measure_model(conv_matmul_model(), {"batch": 4},
                         MeasureConfig(repeats=3, warmup=1, opt_level="all"), name="tiny")


def test_fused_rows_cover_every_original_node_once(measured_all):
    rows = measured_all.rows
    covered = [n for group in rows["node"] for n in group.split("+")]
    assert sorted(covered) == sorted(ORIGINAL_NODES)
    groups = set(rows["node"])
    assert "matmul+bias" in groups  # MatMul + Add -> Gemm
    assert "conv+relu" in groups  # Conv + Relu -> FusedConv / NCHWc conv with activation
    assert (rows["latency_s"] > 0).all()
    assert (rows["latency_p10_s"] <= rows["latency_s"]).all()
    assert (rows["latency_s"] <= rows["latency_p90_s"]).all()


def test_rows_join_costs_and_pass_the_schema(measured_all):
    rows = measured_all.rows.set_index("node")
    # MatMul [4,32]x[32,16]: 2*4*32*16 FLOPs; Add of the bias: 4*16 FLOPs
    assert rows.loc["matmul+bias", "flops"] == 2 * 4 * 32 * 16 + 4 * 16
    assert rows.loc["matmul+bias", "gemm_m"] == 4
    assert rows.loc["matmul+bias", "op_type"] == "MatMul+Add"
    assert validate(measured_all.rows) == []
    s = measured_all.summary
    assert s["joined_fraction"] == 1.0
    assert s["rows"] == 3
    assert s["repeats"] == 3
    assert 0 < s["sum_ops_ms"] <= s["e2e_ms"] * 1.05  # kernels fit inside the run (+ rounding)


def test_opt_level_disable_gives_one_row_per_node():
    m = measure_model(conv_matmul_model(), {"batch": 2},
                      MeasureConfig(repeats=2, warmup=0, opt_level="disable"), name="tiny")
    assert set(m.rows["node"]) == ORIGINAL_NODES
    assert set(m.rows["opt_level"]) == {"disable"}


def test_unbound_dims_are_refused_with_the_flag_to_use():
    with pytest.raises(MeasurementError, match="--dim batch=N"):
        measure_model(conv_matmul_model(), {}, MeasureConfig(repeats=1, warmup=0))


@pytest.mark.parametrize("kwargs", [{"opt_level": "max"}, {"repeats": 0}, {"threads_intra": 0},
                                    {"warmup": -1}])
def test_bad_config_is_a_user_error(kwargs):
    with pytest.raises(MeasurementError):
        MeasureConfig(**kwargs)


def test_prepare_dims_equals_a_fresh_prepare_without_drawing_again():
    """advise --verify prepares one model at several batch sizes: re-binding the dims of the
    first preparation must give what a fresh one would (same proto, weights, feeds)."""
    import numpy as np

    from roofcast.training_data import zoo
    from roofcast.training_data.collectors.ort_cpu import prepare, prepare_dims
    from roofcast.training_data.collectors.random_inputs import INLINE_MAX_BYTES

    src = zoo.model_path("mobilenet_v2")
    first = prepare(src, {"batch": 1})
    assert first.weights  # some weights are big enough to stay out of the proto
    assert max(a.nbytes for a in first.weights.values()) > INLINE_MAX_BYTES
    again = prepare_dims(first, {"batch": 4})
    fresh = prepare(src, {"batch": 4})
    assert again.runnable.SerializeToString() == fresh.runnable.SerializeToString()
    assert again.weights is first.weights  # shared, not drawn again
    assert again.weights.keys() == fresh.weights.keys()
    assert all(np.array_equal(again.weights[k], fresh.weights[k]) for k in fresh.weights)
    assert again.feeds.keys() == fresh.feeds.keys()
    assert all(np.array_equal(again.feeds[k], fresh.feeds[k]) for k in fresh.feeds)
    assert next(iter(again.feeds.values())).shape[0] == 4
    assert again.graph.dims["batch"] == 4
