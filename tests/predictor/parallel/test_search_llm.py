"""Acceptance: the plan search for llama-3.1-70b on 4 HGX H100 nodes (32 GPUs), global batch
1024 x 4096 tokens: its best plan fits and is physically possible (issue 16). Its speed is a
benchmark (``benchmarks/plan_search_speed.py``), not a timed test."""

from __future__ import annotations

import pytest

llm_source = pytest.importorskip("roofcast.predictor.parallel.llm_source")


def test_llama_70b_on_four_h100_nodes_best_fits():
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.predictor.parallel.search import plan_search

    src = llm_source.LLMParallelSource(load_llm("llama-3.1-70b"), seq_tokens=4096)
    res = plan_search(src, "hgx-h100-x4", global_batch=1024)
    assert res.best is not None
    assert res.best.fits
    assert res.best.plan.n_devices == 32
    assert res.table.loc[0, "plan"] == res.best.plan.label()
    # 6 N T (N = 70.6e9 parameters) per step over 32 GPUs cannot beat the H100's dense bf16
    # peak (989 TFLOP/s): a floor on the step that a broken schedule would break
    floor_s = 6 * 70.6e9 * 1024 * 4096 / (32 * 989e12)
    assert res.best.step_s > floor_s
    # nothing unsplittable was tried: tp divides 64 heads, pp divides 80 layers
    assert set(res.table["tp"]) <= {1, 2, 4, 8, 16, 32}
    assert set(res.table["pp"]) <= {1, 2, 4, 8, 16}
