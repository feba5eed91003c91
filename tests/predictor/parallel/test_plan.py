"""check_plan / complete_plan: refusals name the degree and the values that work."""

from __future__ import annotations

import pytest

from roofcast.predictor.parallel.plan import check_model_degrees, check_plan, complete_plan
from roofcast.predictor.parallel.types import ModelFacts, ParallelPlan, ParallelPlanError

LLAMA = ModelFacts(name="llama-3.1-70b", layers=80, heads=64, kv_heads=8, hidden=8192,
                   seq_tokens=4096)
MOE = ModelFacts(name="moe", layers=8, heads=8, kv_heads=8, experts=8)


def check(plan, facts=LLAMA, n=32, gb=1024, mode="train", dpn=8):
    return check_plan(plan, facts, n_devices=n, global_batch=gb, mode=mode, devices_per_node=dpn)


def test_tp_not_dividing_heads_names_degree_and_choices():
    facts = ModelFacts(name="llama-3.1-8b", layers=32, heads=32)
    with pytest.raises(ParallelPlanError) as e:
        check(ParallelPlan(dp=1, tp=3, pp=1), facts, n=3, gb=3)
    assert str(e.value) == ("tp=3 does not divide the 32 attention heads of llama-3.1-8b; "
                            "use 1, 2, 4, 8, 16 or 32")


def test_pp_not_dividing_layers():
    with pytest.raises(ParallelPlanError, match=r"pp=3 does not divide the 80 layers of "
                       r"llama-3.1-70b .*use 1, 2, 4, 5, 8, 10, 16, 20, 40 or 80"):
        check(ParallelPlan(dp=1, tp=8, pp=3), n=24, gb=24)


def test_pp_above_layers():
    facts = ModelFacts(name="tiny", layers=2, heads=4)
    with pytest.raises(ParallelPlanError, match="pp=4 does not divide the 2 layers"):
        check(ParallelPlan(dp=2, pp=4), facts, n=8, gb=8)


def test_devices_must_match():
    with pytest.raises(ParallelPlanError, match=r"dp=2 x tp=8 x pp=1 = 16 devices but the "
                       r"system has 32; use dp=4"):
        check(ParallelPlan(dp=2, tp=8))


def test_batch_must_split_over_dp_and_micro_batches():
    with pytest.raises(ParallelPlanError, match="dp=4 does not divide the global batch 6"):
        check(ParallelPlan(dp=4, tp=8), gb=6)
    with pytest.raises(ParallelPlanError, match=r"micro_batches=3 does not divide the 256 "
                       r"samples .*use micro_batches in 1, 2, 4, 8, 16, 32, 64, 128 or 256"):
        check(ParallelPlan(dp=4, tp=8, micro_batches=3))


def test_ep_rules():
    with pytest.raises(
        ParallelPlanError,
        match=r"ep=2 needs a mixture-of-experts model; llama-3\.1-70b is dense",
    ):
        check(ParallelPlan(dp=4, tp=8, ep=2))
    with pytest.raises(ParallelPlanError, match="ep=3 does not divide the 8 experts"):
        check(ParallelPlan(dp=3, ep=3), MOE, n=3, gb=3)
    with pytest.raises(ParallelPlanError, match=r"ep=8 does not divide dp x tp = 4"):
        check(ParallelPlan(dp=2, tp=2, pp=2, ep=8), MOE, n=8, gb=8)
    assert check(ParallelPlan(dp=2, tp=2, pp=2, ep=4, micro_batches=2), MOE, n=8, gb=8) == ()


def test_notes_kv_replication_and_tp_across_nodes():
    notes = check(ParallelPlan(dp=2, tp=16))
    assert any("replicated on 2 tensor ranks" in n for n in notes)
    assert any("tp=16 spans more than the 8 devices of a node" in n for n in notes)
    assert check(ParallelPlan(dp=4, tp=8)) == ()


def test_unknown_facts_noted_not_checked():
    notes = check(ParallelPlan(dp=1, tp=4, pp=8), ModelFacts(name="g"))
    assert any("heads unknown" in n for n in notes)
    assert any("layer count unknown" in n for n in notes)


def test_infer_refuses_training_options():
    with pytest.raises(ParallelPlanError, match="in infer mode use zero=0"):
        check(ParallelPlan(dp=4, tp=8, zero=1), mode="infer")
    with pytest.raises(ParallelPlanError, match="leave recompute off"):
        check(ParallelPlan(dp=4, tp=8, recompute=True), mode="infer")
    with pytest.raises(ParallelPlanError, match="mode must be one of"):
        check(ParallelPlan(dp=4, tp=8), mode="serve")


def test_small_m_notes_bubble():
    notes = check(ParallelPlan(dp=1, tp=8, pp=4, micro_batches=2))
    assert any("(p-1)/(m+p-1) = 60%" in n for n in notes)


def test_bad_global_batch():
    with pytest.raises(ParallelPlanError, match="global batch must be a positive integer"):
        check(ParallelPlan(dp=4, tp=8), gb=0)


def test_complete_plan_fills_dp():
    assert complete_plan(32, tp=8, pp=2, dp=None) == ParallelPlan(dp=2, tp=8, pp=2)
    assert complete_plan(8) == ParallelPlan(dp=8)
    assert complete_plan(32, tp=8, zero=1).zero == 1


def test_complete_plan_refusals():
    with pytest.raises(ParallelPlanError, match=r"tp=3 x pp=1 = 3 does not divide the 32 "
                       r"devices"):
        complete_plan(32, tp=3)
    with pytest.raises(ParallelPlanError, match="unknown plan field"):
        complete_plan(8, dq=2)
    with pytest.raises(ParallelPlanError, match="= 16 devices but the system has 32"):
        complete_plan(32, dp=2, tp=8)
    with pytest.raises(ParallelPlanError, match="tp must be a positive integer"):
        complete_plan(8, tp=0)


def test_the_models_reason_comes_before_the_devices_and_the_batch():
    facts = ModelFacts("m", layers=12, heads=12, kv_heads=12)
    # tp=5 fails the heads, the 8 devices and the batch of 7 at once: the heads are named
    with pytest.raises(ParallelPlanError, match="tp=5 does not divide the 12 attention heads"):
        check_plan(ParallelPlan(dp=1, tp=5), facts, n_devices=8, global_batch=7, mode="train")
    with pytest.raises(ParallelPlanError, match="pp=5 does not divide the 12 layers"):
        check_model_degrees(facts, pp=5)
    with pytest.raises(
        ParallelPlanError, match="ep=2 needs a mixture-of-experts model; m is dense"
    ):
        check_model_degrees(facts, ep=2)
    check_model_degrees(facts, tp=4, pp=3)  # degrees the model takes pass


def test_api_names_the_heads_not_the_devices_for_a_tp_that_fits_neither():
    import roofcast

    with pytest.raises(ParallelPlanError, match="tp=3 does not divide the 64 attention heads"):
        roofcast.predict("llama-3.1-70b", system="hgx-h100", tp=3, global_batch=8, mode="train")
