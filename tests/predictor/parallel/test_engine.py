"""predict_parallel on the fake source: the step equals the formulas of the engine's docstring
recomputed here from the evaluated rows and the collectives (1F1B, Narayanan et al. 2021;
bucketed DP sync; ZeRO traffic, Rajbhandari et al. 2020)."""

from __future__ import annotations

import numpy as np
import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.systems import get_system
from roofcast.predictor.collectives import collective_time_s
from roofcast.predictor.parallel.comm import group_time_s
from roofcast.predictor.parallel.engine import (
    DDP_BUCKET_BYTES,
    PARALLEL_ESTIMATOR,
    predict_parallel,
)
from roofcast.predictor.parallel.types import ParallelPlan, ParallelPlanError
from roofcast.predictor.simulate import evaluate
from tests.predictor.graph_helpers import AS_WRITTEN
from tests.predictor.parallel.engine_helpers import FakeSource

SYSTEM = get_system("hgx-h100")
CLUSTER = get_system("hgx-h100-x4")


def slot_times(work, col="time_s"):
    """(phase -> per-slot seconds) recomputed from evaluate."""
    ev = evaluate(work.rows, get_device("h100-sxm"), work.config, PARALLEL_ESTIMATOR,
                  AS_WRITTEN)
    out = {}
    wgrad = (work.rows["phase"] == "backward") & (work.rows["family"] == "matmul") \
        & work.rows["kernel"].str.startswith("grad_weight")
    for ph, sel in [(ph, work.rows["phase"] == ph) for ph in ("forward", "backward", "update")] \
            + [("wgrad", wgrad)]:
        t = ev.loc[sel, col] * work.rows.loc[sel, "count"]
        out[ph] = t.groupby(work.rows.loc[sel, "layer"]).sum().reindex(
            range(len(work.param_elems)), fill_value=0.0).to_numpy()
    return out


def test_single_device_is_the_sum_of_the_rows():
    src = FakeSource()
    pred = predict_parallel(src, "hgx-h100:nodes=1", ParallelPlan(dp=8), global_batch=8)
    work = src.build(tp=1, ep=1, micro_batch=1, sequence_parallel=False, mode="train")
    t = slot_times(work)
    assert pred.compute_s == pytest.approx(t["forward"].sum() + t["backward"].sum())
    assert pred.optimizer_s == pytest.approx(t["update"].sum())
    assert pred.bubble_s == 0.0
    assert src.builds[0] == (1, 1, 1, False, "train")


@pytest.mark.parametrize(("kw", "plan"), [
    ({}, ParallelPlan(dp=2, tp=2, pp=2, micro_batches=4)),
    # gradient sync longer than the backward: the exposed part depends on D_i
    ({"d": 1024, "param_scale": 20.0, "head_scale": 6.0},
     ParallelPlan(dp=4, tp=1, pp=2, micro_batches=2)),
])
def test_1f1b_tp_pp_dp_step_matches_formula(kw, plan):
    src = FakeSource(layers=4, **kw)
    pred = predict_parallel(src, SYSTEM, plan, global_batch=16)
    mb = 16 // (plan.dp * plan.micro_batches)
    work = src.build(tp=plan.tp, ep=1, micro_batch=mb, sequence_parallel=False, mode="train")
    t = slot_times(work)
    stages = [[0, 1, 2], [3, 4, 5]]
    t_ar = group_time_s("all_reduce", mb * 128 * src.d * 2.0, "tp", plan, SYSTEM)
    p2p = group_time_s("send_recv", work.boundary_bytes, "pp", plan, SYSTEM)
    per_mb, sync, opt, done_before = [], [], [], 0.0
    for s in stages:
        f, b = t["forward"][s].sum(), t["backward"][s].sum()
        blocks = [x for x in s if 1 <= x <= 4]
        # 2 fwd all-reduces per block, exposed; 2 bwd ones beside the weight-gradient GEMMs
        # (overlap.exposed_s with n = inf); 1 send
        hidden = sum(max(0.0, 2 * t_ar - t["wgrad"][x]) for x in blocks)
        comm = len(blocks) * 2 * t_ar + hidden + 1 * p2p
        per_mb.append(f + b + comm)
        grad = work.param_elems[s].sum() * 2.0
        t_dp = group_time_s("all_reduce", grad, "dp", plan, SYSTEM)
        # stage 1 ends its last backward stage 0's backward (done_before) before the step ends
        sync.append(max(0.0, t_dp - b - done_before,
                        t_dp * min(1.0, DDP_BUCKET_BYTES / grad) - done_before))
        done_before += b
        opt.append(t["update"][s].sum())
    m = plan.micro_batches
    expected = (m + 2 - 1) * max(per_mb) + max(sync) + max(opt)
    assert pred.step_s == pytest.approx(expected, rel=1e-12)
    assert pred.stage_s == pytest.approx(tuple(per_mb))
    assert pred.bubble_s == pytest.approx(max(per_mb))
    parts = pred.compute_s + pred.exposed_comm_s + pred.bubble_s + pred.optimizer_s
    assert parts == pytest.approx(pred.step_s)
    assert pred.lower_s <= pred.step_s <= pred.upper_s
    assert pred.comm_s_by_group["tp"] == pytest.approx(m * 2 * 2 * 2 * t_ar)
    assert pred.micro_batch == mb
    assert pred.samples_per_s == pytest.approx(16 / pred.step_s)
    assert pred.tokens_per_s == pytest.approx(pred.samples_per_s * 128)


def test_recompute_adds_a_forward_to_the_backward():
    src = FakeSource()
    base = predict_parallel(src, SYSTEM, ParallelPlan(dp=4, pp=2, micro_batches=4),
                            global_batch=16)
    rc = predict_parallel(src, SYSTEM, ParallelPlan(dp=4, pp=2, micro_batches=4, recompute=True),
                          global_batch=16)
    t = slot_times(src.build(tp=1, ep=1, micro_batch=1, sequence_parallel=False, mode="train"))
    fwd_stage0 = t["forward"][[0, 1, 2]].sum()
    assert rc.compute_s - base.compute_s == pytest.approx(4 * fwd_stage0)
    assert rc.memory.activations_bytes < base.memory.activations_bytes


def test_zero1_shards_optimizer_and_gathers_params():
    src = FakeSource()
    plan = ParallelPlan(dp=8, zero=1)
    pred = predict_parallel(src, SYSTEM, plan, global_batch=8)
    work = src.build(tp=1, ep=1, micro_batch=1, sequence_parallel=False, mode="train")
    t = slot_times(work)
    weights = work.param_elems.sum() * 2.0
    gather = group_time_s("all_gather", weights, "dp", plan, SYSTEM)
    assert pred.optimizer_s == pytest.approx(t["update"].sum() / 8 + gather)
    base = predict_parallel(src, SYSTEM, ParallelPlan(dp=8), global_batch=8)
    assert pred.memory.optimizer_bytes == pytest.approx(base.memory.optimizer_bytes / 8)
    rs = group_time_s("reduce_scatter", weights, "dp", plan, SYSTEM)
    assert pred.comm_s_by_group["dp"] == pytest.approx(rs + gather)


def test_zero3_gathers_every_micro_batch():
    src = FakeSource()
    plan = ParallelPlan(dp=8, micro_batches=2, zero=3)
    pred = predict_parallel(src, SYSTEM, plan, global_batch=16)
    work = src.build(tp=1, ep=1, micro_batch=1, sequence_parallel=False, mode="train")
    w = work.param_elems.sum() * 2.0
    ag = sum(group_time_s("all_gather", e * 2.0, "dp", plan, SYSTEM) for e in work.param_elems)
    rs = group_time_s("reduce_scatter", w, "dp", plan, SYSTEM)
    assert pred.comm_s_by_group["dp"] == pytest.approx(2 * (2 * ag + rs))
    assert pred.memory.weights_bytes == pytest.approx(w / 8)


def test_zero2_reduces_every_micro_batch():
    src = FakeSource()
    plan = ParallelPlan(dp=8, micro_batches=2, zero=2)
    pred = predict_parallel(src, SYSTEM, plan, global_batch=16)
    work = src.build(tp=1, ep=1, micro_batch=1, sequence_parallel=False, mode="train")
    w = work.param_elems.sum() * 2.0
    ag = group_time_s("all_gather", w, "dp", plan, SYSTEM)
    rs = group_time_s("reduce_scatter", w, "dp", plan, SYSTEM)
    assert pred.comm_s_by_group["dp"] == pytest.approx(2 * rs + ag)
    assert pred.memory.gradients_bytes == pytest.approx(w / 8)
    assert pred.memory.weights_bytes == pytest.approx(w)


def test_expert_all_to_all_on_the_ep_group():
    src = FakeSource(experts=8)
    plan = ParallelPlan(dp=8, ep=4, micro_batches=2)
    pred = predict_parallel(src, SYSTEM, plan, global_batch=16)
    a2a = group_time_s("all_to_all", 128 * 256 * 2.0, "ep", plan, SYSTEM)
    assert a2a > 0
    assert pred.comm_s_by_group["ep"] == pytest.approx(2 * 4 * 2 * 2 * a2a)  # m x L x 2 x 2
    assert pred.comm_s_by_group["tp"] == 0.0


def test_infer_is_a_forward_pipeline():
    src = FakeSource()
    plan = ParallelPlan(dp=4, pp=2, micro_batches=2)
    pred = predict_parallel(src, SYSTEM, plan, global_batch=16, mode="infer")
    work = src.build(tp=1, ep=1, micro_batch=2, sequence_parallel=False, mode="infer")
    t = slot_times(work)
    p2p = group_time_s("send_recv", work.boundary_bytes, "pp", plan, SYSTEM)
    per = [t["forward"][[0, 1, 2]].sum() + p2p, t["forward"][[3, 4, 5]].sum()]
    assert pred.step_s == pytest.approx((2 + 2 - 1) * max(per))
    assert pred.optimizer_s == 0.0
    assert pred.memory.gradients_bytes == 0.0


def test_refusal_and_does_not_fit():
    with pytest.raises(ParallelPlanError, match="tp=4 does not divide the 6 attention heads of "
                       "fake; use 1, 2, 3 or 6"):
        predict_parallel(FakeSource(heads=6), SYSTEM, ParallelPlan(dp=2, tp=4), global_batch=8)
    big = FakeSource(param_scale=1e6)
    pred = predict_parallel(big, SYSTEM, ParallelPlan(dp=8), global_batch=8)
    assert not pred.fits
    assert pred.memory.over_bytes > 0
    assert any("over by" in n for n in pred.notes)
    assert pred.as_dict()["over_bytes"] == pred.memory.over_bytes


def test_group_placement_on_a_cluster():
    plan = ParallelPlan(dp=4, tp=8)
    strided = group_time_s("all_reduce", 2**30, "dp", plan, CLUSTER)
    assert strided == collective_time_s("all_reduce", 2**30, 4, CLUSTER, ranks_per_node=1,
                                        concurrent_per_node=8)
    assert group_time_s("all_reduce", 2**30, "tp", ParallelPlan(dp=32), CLUSTER) == 0.0
    assert group_time_s("all_reduce", 2**30, "tp", plan, CLUSTER) == collective_time_s(
        "all_reduce", 2**30, 8, CLUSTER)
    assert np.isfinite(strided)
    assert strided > 0


def test_tight_fit_is_noted():
    src = FakeSource()
    base = predict_parallel(src, SYSTEM, ParallelPlan(dp=8), global_batch=8)
    assert not any("to spare" in n for n in base.notes)
    # scale the parameters so the plan uses 97 % of the 80 GiB
    per_param = (
        base.memory.weights_bytes + base.memory.gradients_bytes + base.memory.optimizer_bytes
    )
    scale = (0.97 * base.memory.capacity_bytes - base.memory.activations_bytes
             - base.memory.other_bytes) / per_param
    tight = predict_parallel(FakeSource(param_scale=scale), SYSTEM, ParallelPlan(dp=8),
                             global_batch=8)
    assert tight.fits
    assert any("less than 5% of the device's memory to spare" in n for n in tight.notes)
