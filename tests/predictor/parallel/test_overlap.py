"""Tensor-parallel communication hidden behind GEMMs: the per-slot formula and its use by the
engine on a small Llama-style model (sequence parallel, tp 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofcast.graph_import.llm.arch import LLMArch
from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.systems import get_system
from roofcast.predictor.parallel.comm import group_time_s
from roofcast.predictor.parallel.engine import predict_parallel, slot_comm_s, time_workload
from roofcast.predictor.parallel.llm_source import LLMParallelSource
from roofcast.predictor.parallel.overlap import chunks, exposed_s, hiding_key, overlappable
from roofcast.predictor.parallel.types import CommOp, ParallelPlan

SYSTEM = get_system("hgx-h100")


@pytest.fixture(scope="module")
def source() -> LLMParallelSource:
    arch = LLMArch(name="tiny-llama", family="llama", n_layers=4, d_model=1024, n_heads=8,
                   n_kv_heads=2, head_dim=128, d_ff=2816, vocab=1024, max_context=4096)
    return LLMParallelSource(arch, seq_tokens=2048)


def test_exposed_formula():
    total, hide, gemm = np.array([5.0, 5.0, 5.0]), np.array([4.0, 4.0, 4.0]), \
        np.array([1.0, 4.0, 8.0])
    # R = 1; C > G: C - G + G / n; C = G: the fill only; C < G: C / n
    assert exposed_s(total, hide, gemm, 4.0) == pytest.approx([1 + 3 + 0.25, 1 + 1, 1 + 1])
    assert exposed_s(total, hide, gemm, math.inf) == pytest.approx([4.0, 1.0, 1.0])


def test_which_collectives_hide_and_behind_what():
    plain = ParallelPlan(dp=4, tp=2)
    sp = ParallelPlan(dp=4, tp=2, sequence_parallel=True)
    sp_off = ParallelPlan(dp=4, tp=2, sequence_parallel=True, tp_comm_overlap=False)
    ar_b = CommOp("all_reduce", 1.0, "tp", "backward", 1)
    ar_f = CommOp("all_reduce", 1.0, "tp", "forward", 1)
    ag_f = CommOp("all_gather", 1.0, "tp", "forward", 1)
    rs_b = CommOp("reduce_scatter", 1.0, "tp", "backward", 1)
    a2a = CommOp("all_to_all", 1.0, "ep", "backward", 1)
    assert overlappable(ar_b, plain)
    assert not overlappable(ar_f, plain)
    assert not overlappable(ag_f, sp_off)
    assert overlappable(rs_b, sp_off)
    assert overlappable(ag_f, sp)
    assert overlappable(rs_b, sp)
    assert not overlappable(a2a, sp)
    assert (hiding_key("forward", plain), hiding_key("backward", plain)) == (None,
                                                                            "wgrad:backward")
    assert hiding_key("forward", sp) == "gemm:forward"
    assert chunks(sp) == 2.0
    assert chunks(sp_off) == math.inf
    assert "no-tp-overlap" in sp_off.label()
    assert "no-tp-overlap" not in sp.label()
    assert plain.overlaps_tp_comm is False
    assert sp.overlaps_tp_comm is True


def test_engine_hides_tp_comm_behind_gemms(source):
    on = ParallelPlan(dp=4, tp=2, sequence_parallel=True, micro_batches=2)
    off = ParallelPlan(dp=4, tp=2, sequence_parallel=True, micro_batches=2,
                       tp_comm_overlap=False)
    p_on = predict_parallel(source, SYSTEM, on, global_batch=16)
    p_off = predict_parallel(source, SYSTEM, off, global_batch=16)
    assert p_on.compute_s == pytest.approx(p_off.compute_s)
    assert p_on.comm_s_by_group["tp"] == pytest.approx(p_off.comm_s_by_group["tp"])
    # per slot and phase, the formula on the slot's collectives and GEMMs; the data-parallel
    # sync is the same in both (same backward) and cancels in the difference
    work = source.build(tp=2, ep=1, micro_batch=2, sequence_parallel=True, mode="train")
    timed = time_workload(work, get_device("h100-sxm"))
    n_slots = len(work.param_elems)
    delta = 0.0
    for ph in ("forward", "backward"):
        total = slot_comm_s(timed, on, SYSTEM)[(ph, "tp")]
        ag_rs, rs = np.zeros(n_slots), np.zeros(n_slots)
        for op in work.comms:
            if op.phase == ph and op.collective in ("all_gather", "reduce_scatter"):
                t = op.count * group_time_s(op.collective, op.size_bytes, "tp", on, SYSTEM)
                ag_rs[op.layer] += t
                rs[op.layer] += t if op.collective == "reduce_scatter" else 0.0
        with_ub = exposed_s(total, ag_rs, timed.slot_s[(f"gemm:{ph}", "time_s")], 2.0)
        without = exposed_s(total, rs, timed.slot_s[("wgrad:backward", "time_s")], math.inf) \
            if ph == "backward" else total
        delta += (without - with_ub).sum()
    assert delta > 0
    assert p_off.exposed_comm_s - p_on.exposed_comm_s == pytest.approx(
        on.micro_batches * delta, rel=1e-9)
