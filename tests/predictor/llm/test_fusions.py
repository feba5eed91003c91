"""llm.fusions: an engine's decoder-layer fusions change the step's rows as documented."""

from __future__ import annotations

import dataclasses

import pytest

from roofcast.graph_import.llm.load import load_llm
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.fusions import FUSIONS, fuse
from roofcast.predictor.llm.kernels import Segment, step_workload
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.runtimes import get_runtime
from roofcast.predictor.runtimes.profile import SERVING_FUSIONS

ARCH = load_llm("llama-3.1-8b")


def _rows(*fusions: str):
    base = get_runtime("tensorrt-llm")
    profile = dataclasses.replace(base, serving=dataclasses.replace(
        base.serving, fused_kernels=fusions))
    return step_workload(ARCH, [Segment(16, 1, 1024)], TensorDtypes("bf16", "bf16", "bf16"),
                         profile).set_index("node")


def test_profiles_name_exactly_the_registered_fusions():
    assert set(SERVING_FUSIONS) == set(FUSIONS)
    with pytest.raises(PredictionError, match="unknown serving fusion"):
        fuse(_rows().reset_index(), ["add-everything"])


def test_add_norm_folds_each_residual_into_the_next_norm_without_rereading_the_sum():
    plain, fused = _rows(), _rows("add-norm")
    assert {"residual1", "residual2"} <= set(plain.index)
    assert not {"residual1", "residual2"} & set(fused.index)
    for add, norm in (("residual1", "norm2"), ("residual2", "norm1")):
        a, n = plain.loc[add], plain.loc[norm]
        assert fused.loc[norm, "bytes_read"] == pytest.approx(
            a["bytes_read"] + n["bytes_read"] - a["bytes_written"])
        assert fused.loc[norm, "bytes_written"] == pytest.approx(
            a["bytes_written"] + n["bytes_written"])
        assert fused.loc[norm, "count"] == n["count"] == ARCH.n_layers
    moved = lambda r: (r["bytes_read"] + r["bytes_written"]).sum()  # noqa: E731
    assert moved(fused) < moved(plain)  # one tensor write and read fewer per residual
    assert fused.loc["final_norm", "bytes_read"] == plain.loc["final_norm", "bytes_read"]


def test_rope_and_kv_write_run_inside_a_fused_attention_op():
    plain, fused = _rows(), _rows("rope-kv-in-attention")
    assert {"rotary", "kv_write"} <= set(plain.index)
    assert not {"rotary", "kv_write"} & set(fused.index)
    assert fused.loc["attn0", "flops"] == plain.loc["attn0", "flops"]
    assert len(plain) - len(fused) == 2
