"""The kernels of the zoo's HF exports under each GPU runtime: the sequence of one layer, and
the whole model's kernel count and work (fewer kernels than eager, never more flops)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofcast.graph_import import import_model
from roofcast.predictor.config import RunConfig
from roofcast.predictor.workload import kernel_plan, workload_table

ZOO = Path(__file__).resolve().parents[3] / "training_data" / "zoo"
RUNTIMES = ("pytorch-eager", "torch-compile", "tensorrt")


@pytest.fixture(scope="module")
def zoo():
    graphs = {m: import_model(ZOO / f"{m}.onnx", dims={"batch": 1, "sequence": 128})
              for m in ("bert_base", "gpt2")}
    return {(m, rt): workload_table(g, RunConfig(dims=g.dims), rt)
            for m, g in graphs.items() for rt in RUNTIMES} | {"graphs": graphs}


def layer(w, tag: str) -> list[str]:
    return list(w.loc[w["node"].str.contains(tag, regex=False), "op_type"])


def test_bert_layer_under_each_runtime(zoo):
    eager = layer(zoo[("bert_base", "pytorch-eager")], "layer.3/")
    # Q, K, V linears with their bias in addmm; the export's scale and mask already there
    # (no extra pass); the merge-heads transpose a copy; erf GELU one kernel
    assert eager == ["MatMul+Add"] * 3 + ["MatMul", "Mul", "Add", "Softmax", "MatMul",
                                          "Transpose", "MatMul+Add", "Add", "LayerNormalization",
                                          "MatMul+Add", "Div+Erf+Add+Mul+Mul", "MatMul+Add", "Add",
                                          "LayerNormalization"]
    fused = ["MatMul+Add"] * 3 + ["FusedAttention", "Transpose", "MatMul+Add",
                                  "Add+LayerNormalization", "MatMul+Add", "Div+Erf+Add+Mul+Mul",
                                  "MatMul+Add", "Add+LayerNormalization"]
    assert layer(zoo[("bert_base", "torch-compile")], "layer.3/") == fused
    assert layer(zoo[("bert_base", "tensorrt")], "layer.3/") == fused


def test_gpt2_keeps_the_tanh_gelu_as_eight_eager_kernels(zoo):
    eager = layer(zoo[("gpt2", "pytorch-eager")], "h.3/")
    assert eager[-11:] == ["Gemm", "Mul", "Pow", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Gemm",
                           "Add"]
    assert "Split" not in eager
    compiled = layer(zoo[("gpt2", "torch-compile")], "h.3/")
    assert "Mul+Pow+Mul+Add+Mul+Tanh+Add+Mul" in compiled
    assert "FusedAttention" in compiled


@pytest.mark.parametrize("model", ["bert_base", "gpt2"])
def test_fewer_kernels_never_more_flops(zoo, model):
    g = zoo["graphs"][model]
    written = workload_table(g, RunConfig(dims=g.dims), "onnxruntime-cpu")  # fusion default on
    eager = zoo[(model, "pytorch-eager")]
    for rt in ("torch-compile", "tensorrt"):
        other = zoo[(model, rt)]
        assert len(other) < len(eager), rt
        assert other["flops"].sum() <= eager["flops"].sum() * (1 + 1e-12), rt
        moved = (other["bytes_read"] + other["bytes_written"]).sum()
        assert moved < (eager["bytes_read"] + eager["bytes_written"]).sum(), rt
    assert eager["flops"].sum() <= written["flops"].sum() * (1 + 1e-12)
    assert not eager["key"].duplicated().any()


def test_the_plan_summary_names_what_changed(zoo):
    g = zoo["graphs"]["bert_base"]
    plan = kernel_plan(g, RunConfig(dims=g.dims), "pytorch-eager")
    assert plan.notes == ("38 data-movement nodes run as views (no kernel)",
                          "72 bias adds in addmm", "12 erf-GELU chains as one kernel")
