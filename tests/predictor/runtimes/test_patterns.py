"""Every kernel-mapping pattern on a minimal graph: which rows the runtime launches, with what
work (expected values are the cost rules' arithmetic on the graph's shapes)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from roofcast.predictor.config import PRECISIONS, RunConfig
from roofcast.predictor.runtimes import ExecutionProfile
from roofcast.predictor.runtimes.patterns import PATTERNS, KernelPlan
from roofcast.predictor.runtimes.rules import build_plan
from roofcast.predictor.workload import forward_rows, workload_table
from tests.predictor.graph_helpers import AS_WRITTEN
from tests.predictor.runtimes import onnx_graphs as G  # noqa: N812  (short: every test builds one)


def profile(*patterns: str, **kw) -> ExecutionProfile:
    return ExecutionProfile(name="t", description="test", device_kinds=("gpu", "cpu"),
                            patterns=patterns, precisions=PRECISIONS, **kw)


def rows(graph, prof):
    return workload_table(graph, RunConfig(), prof).set_index("node", drop=False)


def plain(graph):
    return workload_table(graph, RunConfig(), AS_WRITTEN).set_index("node", drop=False)


def moved(df) -> float:
    return float((df["bytes_read"] + df["bytes_written"]).sum())


# ------------------------------------------------------------------------------- views-free
def test_views_free_drops_views_and_keeps_the_merge_heads_copy():
    g = G.views()
    before, after = plain(g), rows(g, profile("views-free"))
    assert set(before["node"]) == {"split", "tq", "tk", "tv", "qk", "softmax", "cast_same", "pv",
                                   "merge"}
    # Split, the three transposes read by a MatMul and the same-dtype Cast launch nothing;
    # the merge-heads Transpose feeds a Reshape: permute().contiguous() is one copy
    assert list(after["node"]) == ["qk", "softmax", "pv", "merge"]
    pd.testing.assert_series_equal(after.loc["merge"], before.loc["merge"])
    plan = build_plan(g, profile("views-free"), None)
    assert plan.free == {"split", "tq", "tk", "tv", "cast_same"}
    assert plan.notes == ("5 data-movement nodes run as views (no kernel)",)


def test_views_free_keeps_a_cast_that_changes_dtype():
    from onnx import TensorProto, helper
    g = G.build([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16, name="c")],
                [G.vi("x", 64)], [G.vi("y", 64, dtype=TensorProto.FLOAT16)])
    assert list(rows(g, profile("views-free"))["node"]) == ["c"]


# --------------------------------------------------------------------------- bias-into-gemm
def test_bias_add_joins_its_matmul_as_one_addmm():
    g = G.linear_bias(m=64, k=32, n=48)
    before, after = plain(g), rows(g, profile("bias-into-gemm"))
    assert len(before) == 2
    assert len(after) == 1
    row = after.iloc[0]
    assert row["op_type"] == "MatMul+Add"
    assert row["family"] == "matmul"
    assert row["flops"] == 2 * 64 * 32 * 48 + 64 * 48
    # x, W and the bias read, y written; h (64x48 fp32) never reaches memory
    assert row["bytes_read"] == 4 * (64 * 32 + 32 * 48 + 48)
    assert row["bytes_written"] == 4 * 64 * 48
    assert (row["gemm_m"], row["gemm_n"], row["gemm_k"]) == (64, 48, 32)


def test_a_residual_add_is_not_a_bias():
    g = G.residual_add()
    assert len(rows(g, profile("bias-into-gemm"))) == 2


# --------------------------------------------------------------------------------- gelu-erf
def test_erf_gelu_is_one_elementwise_kernel():
    n = 1024
    g = G.erf_gelu(n)
    after = rows(g, profile("gelu-erf"))
    assert list(after["node"]) == ["relu", "div"]
    gelu = after.loc["div"]
    assert gelu["op_type"] == "Div+Erf+Add+Mul+Mul"
    assert gelu["family"] == "elementwise"
    assert gelu["flops"] == 5 * n  # Gelu's formula count: div, erf, add, mul, mul
    # x read once (Div and Mul both read it) + the three fp32 scalar constants
    assert gelu["bytes_read"] == 4 * n + 3 * 4
    assert gelu["bytes_written"] == 4 * n


def test_tanh_gelu_stays_eight_kernels_under_gelu_erf():
    g = G.tanh_gelu()
    assert len(rows(g, profile("gelu-erf"))) == 8 == len(plain(g))


# --------------------------------------------------------------------- attention patterns
@pytest.mark.parametrize(("scale", "mask", "extra"), [(False, False, 2), (True, False, 1),
                                                      (True, True, 0)])
def test_score_passes_add_what_the_export_lacks(scale, mask, extra):
    b, h, s, d = 2, 4, 16, 8
    g = G.attention(b, h, s, d, scale=scale, mask=mask)
    prof = profile("attention-score-passes", attention_score_passes=2)
    before, after = plain(g), rows(g, prof)
    added = after[after["op_type"] == "AttentionScorePass"]
    assert len(after) == len(before) + extra == len(added) + len(before)
    assert (added["node"] == "qk").all()
    assert added["key"].is_unique
    assert not set(added["key"]) & set(before["key"])
    score_bytes = 4 * b * h * s * s
    assert (added["bytes_read"] == score_bytes).all()
    assert (added["bytes_written"] == score_bytes).all()
    assert (added["flops"] == b * h * s * s).all()
    # extra rows sit right after the score MatMul
    order = list(after["op_type"])
    assert order[:1 + extra] == ["MatMul"] + ["AttentionScorePass"] * extra


def test_fused_attention_prices_both_matmuls_and_q_k_v_o_only():
    b, h, s, d = 2, 4, 16, 8
    g = G.attention(b, h, s, d, scale=True, mask=True)
    prof = profile("fused-attention", attention="fused")
    after = rows(g, prof)
    assert len(after) == 1
    row = after.iloc[0]
    assert row["op_type"] == "FusedAttention"
    assert row["family"] == "attention"
    assert row["engine"] == "matrix"
    assert row["flops"] == 2 * (2 * b * h * s * s * d)
    assert row["bytes_read"] == 3 * 4 * b * h * s * d
    assert row["bytes_written"] == 4 * b * h * s * d
    assert row["fused_nodes"] == "qk+scale+mask+softmax+pv"
    before = plain(g)
    assert row["flops"] <= before["flops"].sum()


# --------------------------------------------------------------------------- inductor-chains
def test_inductor_fuses_pointwise_and_one_reduction_but_not_into_the_gemm():
    g = G.norm_chain(m=64, n=32)
    after = rows(g, profile("inductor-chains"))
    # mm stays a cuBLAS call; res + ln1 + relu one kernel (one reduction); ln2 + mul another
    assert list(after["fused_nodes"]) == ["mm", "res+ln1+relu", "ln2+mul"]
    before = plain(g)
    assert after["flops"].sum() == before["flops"].sum()
    assert moved(after) < moved(before)


def test_inductor_fuses_the_tanh_gelu_chain():
    g = G.tanh_gelu(1024)
    after = rows(g, profile("inductor-chains"))
    assert len(after) == 1
    # x once (five members read it) + five fp32 scalar constants; y written once
    assert after.iloc[0]["bytes_read"] == 4 * 1024 + 5 * 4
    assert after.iloc[0]["bytes_written"] == 4 * 1024


# --------------------------------------------------------------------------------- epilogue
def test_epilogue_composes_with_earlier_groups():
    g = G.linear_bias()
    prof = profile("bias-into-gemm", "epilogue")
    plan = build_plan(g, prof, None)
    assert plan.groups == {"mm": ("mm", "bias")}
    assert len(rows(g, prof)) == 1


#: patterns that add kernels by design: the eager score passes and ONNX Runtime's NCHWc reorders
#: (its optimised graph may hold them too); their own tests check what they add.
ADDS_KERNELS = frozenset({"attention-score-passes", "ort-nchwc-reorders", "ort-optimized"})


def test_every_registered_pattern_keeps_flops_or_lowers_them_on_every_tiny_graph():
    graphs = [G.linear_bias(), G.residual_add(), G.erf_gelu(), G.tanh_gelu(), G.views(),
              G.attention(), G.norm_chain(), G.conv_relu()]
    for name in PATTERNS:
        kw = {"attention": "fused"} if name == "fused-attention" else {}
        if name in ADDS_KERNELS:
            continue  # adds kernels on purpose: checked in their own tests
        for g in graphs:
            before, after = plain(g), rows(g, profile(name, **kw))
            assert len(after) <= len(before), (name, g.name)
            assert after["flops"].sum() <= before["flops"].sum() * (1 + 1e-12), name
            assert moved(after) <= moved(before) * (1 + 1e-12), name


def test_merged_joins_overlapping_groups_and_keeps_locked_kernels():
    order = {n: i for i, n in enumerate("abcde")}
    plan = KernelPlan().merged(["a", "b"], order).merged(["c", "d"], order)
    joined = plan.merged(["b", "c"], order)
    assert joined.groups == {"a": ("a", "b", "c", "d")}
    assert dataclasses.replace(plan, free=frozenset({"e"})).merged(["e"], order).groups == \
        plan.groups


def test_forward_rows_are_untouched_by_the_plan_for_the_graph_as_written():
    g = G.views()
    assert workload_table(g, RunConfig(), AS_WRITTEN).equals(forward_rows(g, RunConfig()))
