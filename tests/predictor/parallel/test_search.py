"""plan_search on the fake source: candidates, rejections, ranking, reuse of build."""

from __future__ import annotations

import pytest

from roofcast.predictor.parallel.engine import predict_parallel
from roofcast.predictor.parallel.search import plan_search
from roofcast.predictor.parallel.types import ParallelPlan, ParallelPlanError
from tests.predictor.parallel.engine_helpers import FakeSource


def test_search_ranks_fitting_plans_by_step_and_matches_predict_parallel():
    src = FakeSource(layers=4, heads=4)
    res = plan_search(src, "hgx-h100", global_batch=16)
    table = res.table
    assert list(table["rank"]) == list(range(1, len(table) + 1))
    assert table["fits"].all()
    assert table["step_s"].is_monotonic_increasing
    best = res.best
    assert best is not None
    assert best.plan.label() == table.loc[0, "plan"]
    again = predict_parallel(FakeSource(layers=4, heads=4), "hgx-h100", best.plan,
                             global_batch=16)
    assert again.step_s == pytest.approx(best.step_s, rel=1e-12)
    # tp=8 does not divide 4 heads; ZeRO with dp=1 and SP with tp=1 are duplicates
    assert res.rejected["tp=N does not divide the N attention heads of the model"] > 0
    assert res.rejected["zero needs dp > 1 (same as zero=0)"] > 0
    assert res.rejected["sequence parallelism needs tp > 1 (same as without)"] > 0
    # every pp in the table divides the 4 layers; build ran once per (tp, ep, mb, sp)
    assert set(table["pp"]) <= {1, 2, 4}
    assert len(src.builds) == len(set(src.builds))
    keys = {(r.tp, r.ep, r.micro_batch, r.sequence_parallel) for r in table.itertuples()}
    assert len(src.builds) == len(keys)


def test_nothing_fits_ranks_by_over_bytes():
    src = FakeSource(layers=4, heads=8, param_scale=3e5)
    res = plan_search(src, "hgx-h100", global_batch=8, zero=(0, 1, 3))
    assert res.best is None
    assert not res.table["fits"].any()
    assert res.table["over_bytes"].is_monotonic_increasing
    assert res.closest.memory.over_bytes == res.table["over_bytes"].min()


def test_some_fit_only_with_sharding():
    src = FakeSource(layers=4, heads=8, param_scale=3e3)
    res = plan_search(src, "hgx-h100", global_batch=8, zero=(0, 3))
    assert res.best is not None
    assert res.table["fits"].any()
    assert not res.table["fits"].all()
    n_fit = int(res.table["fits"].sum())
    assert res.table["fits"].iloc[:n_fit].all()
    assert res.best.step_s == res.table.loc[0, "step_s"]


def test_max_plans_and_infer_mode():
    res = plan_search(FakeSource(), "hgx-h100", global_batch=8, max_plans=5)
    assert len(res.table) == 5
    assert res.rejected["not evaluated (max_plans reached)"] > 0
    inf = plan_search(FakeSource(), "hgx-h100", global_batch=8, mode="infer")
    assert set(inf.table["zero"]) == {0}
    assert not inf.table["recompute"].any()
    assert (inf.table["optimizer_s"] == 0).all()


def test_bad_arguments():
    with pytest.raises(ParallelPlanError, match="mode must be one of"):
        plan_search(FakeSource(), "hgx-h100", global_batch=8, mode="serve")
    with pytest.raises(ParallelPlanError, match="max_plans must be a positive integer"):
        plan_search(FakeSource(), "hgx-h100", global_batch=8, max_plans=0)
    with pytest.raises(ParallelPlanError, match="zero stages must be 0, 1, 2 or 3"):
        plan_search(FakeSource(), "hgx-h100", global_batch=8, zero=(4,))


def test_plan_of_search_row_round_trips():
    res = plan_search(FakeSource(), "hgx-h100", global_batch=8, max_plans=3)
    row = res.table.iloc[0]
    plan = ParallelPlan(**{k: (bool(row[k]) if k in ("sequence_parallel", "recompute")
                               else int(row[k]))
                           for k in ("dp", "tp", "pp", "ep", "micro_batches", "zero",
                                     "sequence_parallel", "recompute")})
    assert plan.label() == row["plan"]
