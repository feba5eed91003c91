"""One aggregation of kernel rows: one error for a model without work, one sum per cell shared
by predict, sweep, compare and advise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from roofcast.graph_import.types import Engine
from roofcast.predictor.advisor import advise
from roofcast.predictor.compare import compare_devices
from roofcast.predictor.config import RunConfig
from roofcast.predictor.kernel_rows import NoWorkError, cell_sums
from roofcast.predictor.simulate import predict_graph
from roofcast.predictor.sweep import sweep
from tests.predictor.graph_helpers import graph, op, priced_devices, t, toy_device

DEVICES = priced_devices()


def _views_only(batch: int = 1):
    x, r = t("x", batch, 8), t("r", 8 * batch)
    return graph([op("reshape", "Reshape", [x], [r], engine=Engine.FREE)], [x], [r], name="views")


@pytest.mark.parametrize("run", [
    lambda: predict_graph(_views_only(), toy_device(), RunConfig()),
    lambda: sweep(_views_only, DEVICES, [1]),
    lambda: compare_devices(_views_only, DEVICES, RunConfig()),
    lambda: advise(_views_only, toy_device(), estimator="roofline"),
])
def test_every_road_raises_the_one_no_work_error(run):
    with pytest.raises(NoWorkError, match="'views' has no op that does work"):
        run()


def _long_chain(batch: int):
    """300 element-wise ops of uneven sizes: enough rows for a sequential and a pairwise sum to
    differ in the last bits."""
    xs = [t(f"x{i}", batch, 100 + 37 * (i % 11)) for i in range(301)]
    nodes = [op(f"n{i}", "Exp" if i % 2 else "Relu", [xs[i]], [xs[i + 1]], flops=7 * i + 1)
             for i in range(300)]
    return graph(nodes, [xs[0]], [xs[-1]], name="chain", dims={"batch": batch})


def test_compare_and_predict_agree_bit_for_bit():
    """The same cell summed by the same function: equal, not merely close."""
    df = compare_devices(_long_chain, DEVICES, RunConfig(dims={"batch": 4}), "time-roofline")
    for rec in df.to_dict("records"):
        hw = next(d for d in DEVICES if d.id == rec["device"])
        p = predict_graph(_long_chain(4), hw, RunConfig(dims={"batch": 4}), "time-roofline")
        assert rec["time_s"] == p.time_s


def test_cell_sums_per_cell_and_device():
    # two devices (device-major) x two cells of 2 and 1 rows
    timed = pd.DataFrame({
        "time_s": [1.0, 2.0, 4.0, 10.0, 20.0, 40.0],
        "bound": ["compute", "memory", "memory", "overhead", "compute", "compute"],
        **{c: np.ones(6) for c in ("compute_s", "memory_s", "overhead_s", "lower_s", "upper_s")},
    })
    sums = cell_sums(timed, [2, 1], n_dev=2)
    assert sums["time_s"].tolist() == [3.0, 30.0, 4.0, 40.0]  # (cell 0: d0, d1), (cell 1: ...)
    assert sums["kernels"].tolist() == [2, 2, 1, 1]
    assert sums["compute_bound_s"].tolist() == [1.0, 20.0, 0.0, 40.0]
    assert sums["overhead_bound_s"].tolist() == [0.0, 10.0, 0.0, 0.0]
    assert sums["upper_s"].tolist() == [2.0, 2.0, 1.0, 1.0]
