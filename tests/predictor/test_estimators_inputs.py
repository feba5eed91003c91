"""Inputs of the per-op estimators.

RunConfig, precision, GEMM dims, featurize, efficiency curves.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from roofcast.graph_import.costs.gemm_dims import gemm_dims
from roofcast.graph_import.types import Engine, OpCost, OpNode, TensorInfo
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.config import RunConfig, run_config
from roofcast.predictor.efficiency import EfficiencyCurves, default_curves
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.features import bw_saturation_threads, thread_factors
from roofcast.predictor.precision import compute_dtype, peak_dtype, rescale_bytes, rescale_cost
from tests.predictor.estimator_helpers import features, gemm_row
from tests.predictor.graph_helpers import batched_chain


def t(name: str, *shape: int, dtype: str = "float") -> TensorInfo:
    return TensorInfo(name, tuple(shape), dtype)


def node(op_type: str, inputs, outputs, attrs=None, weights=(), cost=None) -> OpNode:
    return OpNode(name="n", op_type=op_type, domain="", inputs=tuple(inputs),
                  outputs=tuple(outputs), attrs=attrs or {}, cost=cost,
                  weight_inputs=frozenset(weights))


# ---------------------------------------------------------------------------- RunConfig
@pytest.mark.parametrize("kwargs", [
    {"precision": "fp12"}, {"mode": "serve"}, {"optimizer": "lamb"}, {"overlap": "half"},
    {"threads": 0}, {"threads": True}, {"dims": {"batch": 0}}, {"dims": {"": 2}},
    {"fusion": "yes"},
])
def test_runconfig_rejects_bad_values(kwargs):
    with pytest.raises(PredictionError):
        RunConfig(**kwargs)


def test_runconfig_is_hashable_and_replaceable():
    c = RunConfig(dims={"batch": 4}, precision="bf16")
    assert dataclasses.replace(c, mode="train").mode == "train"
    assert hash(c) == hash(RunConfig(dims={"batch": 4}, precision="bf16"))
    assert c.batch == 4


def test_runconfig_dims_are_immutable_and_the_dataclass_hash_covers_them():
    a = RunConfig(dims={"batch": 4, "sequence": 128})
    b = RunConfig(dims={"sequence": 128, "batch": 4})
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != RunConfig(dims={"batch": 4, "sequence": 64})
    assert hash(a) != hash(RunConfig(dims={"batch": 8, "sequence": 128}))
    assert a.dims == {"batch": 4, "sequence": 128}
    assert dict(a.dims)["sequence"] == 128
    with pytest.raises(TypeError):
        a.dims["batch"] = 8  # type: ignore[index]


def test_run_config_takes_the_dims_the_import_bound():
    graph = batched_chain(8)
    cfg = run_config(graph, precision="fp16")
    assert cfg.dims == graph.dims
    assert cfg.batch == 8
    assert cfg.precision == "fp16"
    with pytest.raises(PredictionError, match="bound when the model is imported"):
        run_config(graph, dims={"batch": 2})


# ---------------------------------------------------------------------------- precision
def test_rescale_float_and_keep_integer_bytes():
    assert rescale_bytes(400, "float", "fp16") == 200
    assert rescale_bytes(400, "float", "int8") == 100
    assert rescale_bytes(400, "float16", "fp32") == 800
    assert rescale_bytes(400, "int64", "fp16") == 400
    assert compute_dtype("bf16") == "bf16"
    assert peak_dtype("vector", "tf32") == "fp32"
    assert peak_dtype("matrix", "tf32") == "tf32"


def test_rescale_cost_weights_activations_and_indices():
    x, w, idx = t("x", 8, 16), t("w", 16, 16), t("i", 8, dtype="int64")
    y = t("y", 8, 16)
    read = x.nbytes + w.nbytes + idx.nbytes
    n = node("Op", [x, w, idx], [y], weights=("w",),
             cost=OpCost(100.0, read, y.nbytes, w.nbytes, Engine.MATRIX))
    c = rescale_cost(n, "fp16")
    assert c.flops == 100.0
    assert c.weight_bytes == w.nbytes / 2
    # activations: x (float, halved) and idx (int64, kept), byte-weighted
    act_scale = (x.nbytes / 2 + idx.nbytes) / (x.nbytes + idx.nbytes)
    assert c.bytes_read == pytest.approx((x.nbytes + idx.nbytes) * act_scale + w.nbytes / 2)
    assert c.bytes_written == y.nbytes / 2
    assert rescale_cost(n, "int8").weight_bytes == w.nbytes / 4


def test_bad_precision_raises():
    with pytest.raises(PredictionError, match="fp12"):
        rescale_bytes(1, "float", "fp12")


# ---------------------------------------------------------------------------- GEMM dims
def test_matmul_batched_broadcast_and_linear_fold():
    bmm = node("MatMul", [t("a", 4, 3, 32, 64), t("b", 4, 3, 64, 16)], [t("y", 4, 3, 32, 16)])
    assert gemm_dims(bmm) == (12, 32, 16, 64)
    lin = node("MatMul", [t("a", 8, 128, 512), t("w", 512, 256)], [t("y", 8, 128, 256)])
    assert gemm_dims(lin) == (1, 8 * 128, 256, 512)
    vec = node("MatMul", [t("a", 64), t("b", 64, 10)], [t("y", 10)])
    assert gemm_dims(vec) == (1, 1, 10, 64)


def test_gemm_transposes():
    g = node("Gemm", [t("a", 64, 32), t("b", 10, 64)], [t("y", 32, 10)], {"transA": 1, "transB": 1})
    assert gemm_dims(g) == (1, 32, 10, 64)


def test_conv_implicit_gemm_with_groups():
    conv = node("Conv", [t("x", 2, 32, 28, 28), t("w", 64, 8, 3, 3)], [t("y", 2, 64, 14, 14)],
                {"group": 4, "strides": [2, 2]})
    assert gemm_dims(conv) == (4, 2 * 14 * 14, 64 / 4, 32 / 4 * 9)


def test_conv_transpose_col2im():
    ct = node("ConvTranspose", [t("x", 2, 16, 7, 7), t("w", 16, 8, 4, 4)], [t("y", 2, 8, 14, 14)],
              {"strides": [2, 2]})
    assert gemm_dims(ct) == (1, 8 * 16, 2 * 49, 16)


def test_recurrent_steps_are_skinny_gemms():
    # LSTM, 2 directions, S=10 steps, B=3, I=16, H=8, G=4: 20 steps of [3, 24] x [24, 32]
    lstm = node("LSTM", [t("x", 10, 3, 16), t("w", 2, 32, 16), t("r", 2, 32, 8)],
                [t("y", 10, 2, 3, 8)], {"direction": "bidirectional"})
    assert gemm_dims(lstm) == (2 * 10, 3, 4 * 8, 16 + 8)
    batch_first = node("GRU", [t("x", 3, 10, 16), t("w", 1, 24, 16), t("r", 1, 24, 8)],
                       [t("y", 3, 10, 1, 8)], {"layout": 1})
    assert gemm_dims(batch_first) == (10, 3, 3 * 8, 16 + 8)


def test_einsum_plain_contraction_and_not():
    e = node("Einsum", [t("a", 5, 6, 7), t("b", 5, 7, 8)], [t("y", 5, 6, 8)],
             {"equation": "bij,bjk->bik"})
    assert gemm_dims(e) == (5, 6, 8, 7)
    ell = node("Einsum", [t("a", 2, 3, 6, 7), t("b", 2, 3, 7, 8)], [t("y", 2, 3, 6, 8)],
               {"equation": "...ij,...jk->...ik"})
    assert gemm_dims(ell) == (6, 6, 8, 7)
    diag = node("Einsum", [t("a", 6, 6)], [t("y", 6)], {"equation": "ii->i"})
    assert gemm_dims(diag) is None
    assert gemm_dims(node("Relu", [t("x", 4)], [t("y", 4)])) is None


# ---------------------------------------------------------------------------- featurize
def _cpu(units=8):
    v100 = get_device("v100-pcie-32gb")
    return dataclasses.replace(v100, id="fake-cpu", kind="cpu", units=units,
                               peak_flops={("vector", "fp32"): 1e12}, mem_bw_Bps=100e9,
                               l2_bw_Bps=None, shared_mem_per_unit_bytes=None)


def test_cpu_thread_scaling():
    hw = _cpu(8)
    assert bw_saturation_threads(hw) == math.ceil(8 / 4)
    assert thread_factors(hw, 2) == (2 / 8, 1.0, 2)
    assert thread_factors(hw, 1) == (1 / 8, 0.5, 1)
    assert thread_factors(hw, 64) == (1.0, 1.0, 8)
    X = features([gemm_row(64, 64, 64)], hw=hw, config=RunConfig(threads=1))
    assert X.peak_flops_per_s.iloc[0] == pytest.approx(1e12 / 8)
    assert X.mem_bw_Bps.iloc[0] == pytest.approx(50e9)
    assert X.units.iloc[0] == 1


def test_gpu_ignores_threads():
    X = features([gemm_row(64, 64, 64)], config=RunConfig(threads=1))
    assert X.mem_bw_Bps.iloc[0] == 900e9
    assert X.units.iloc[0] == 80


def test_device_without_dtype_raises_prediction_error():
    hw = dataclasses.replace(_cpu(), peak_flops={("vector", "fp32"): 1e12})
    with pytest.raises(PredictionError, match="fake-cpu"):
        features([gemm_row(8, 8, 8, dtype="fp64")], hw=hw)


# ---------------------------------------------------------------------------- efficiency curves
def test_default_curves_have_basis_and_most_specific_match():
    c = default_curves()
    assert c.curve("gpu", "matrix", "fp32").dtype == "fp32"
    assert c.curve("gpu", "matrix", "bf16").dtype == "*"
    assert c.curve("accelerator", "memory", "fp16").scope == "*"
    frac = c.fraction(np.array(["x"]), np.array(["gpu"]), np.array(["memory"]),
                      np.array(["fp32"]), np.array([1e12]))
    assert 0 < frac[0] <= 1


def test_device_curve_beats_kind_curve(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[[curve]]\nkind="gpu"\nengine="matrix"\ndtype="*"\nx="log10_flops"\n'
                 'points=[[6.0, 0.5]]\nbasis="t"\n'
                 '[[curve]]\ndevice="t4"\nkind="gpu"\nengine="matrix"\ndtype="*"\n'
                 'x="log10_flops"\npoints=[[6.0, 0.25]]\nbasis="t"\n')
    c = EfficiencyCurves.load(p)
    got = c.fraction(
        np.array(["t4", "v100"]),
        np.array(["gpu", "gpu"]),
        np.array(["matrix", "matrix"]),
        np.array(["fp32", "fp32"]),
        np.array([1e9, 1e9]),
    )
    assert list(got) == [0.25, 0.5]


def test_curve_interpolates_in_log10(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[[curve]]\nkind="*"\nengine="matrix"\ndtype="*"\nx="log10_flops"\n'
                 'points=[[6.0, 0.2],[8.0, 0.6]]\nbasis="t"\n')
    c = EfficiencyCurves.load(p).curve("gpu", "matrix", "fp16")
    assert np.allclose(c(np.array([1e5, 1e6, 1e7, 1e9])), [0.2, 0.2, 0.4, 0.6])


@pytest.mark.parametrize("bad", [
    'points=[[6.0, 1.5]]\nbasis="t"', 'points=[[8.0, 0.5],[6.0, 0.6]]\nbasis="t"',
    'points=[[6.0, 0.5]]\nbasis=""', 'points=[[6.0, 0.5]]',
])
def test_curve_file_validation(tmp_path, bad):
    p = tmp_path / "c.toml"
    p.write_text(f'[[curve]]\nkind="*"\nengine="matrix"\ndtype="*"\nx="log10_flops"\n{bad}\n')
    with pytest.raises(PredictionError):
        EfficiencyCurves.load(p)


def test_missing_curve_is_an_error(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[[curve]]\nkind="gpu"\nengine="matrix"\ndtype="*"\nx="log10_flops"\n'
                 'points=[[6.0, 0.5]]\nbasis="t"\n')
    with pytest.raises(PredictionError, match="no efficiency curve"):
        EfficiencyCurves.load(p).curve("cpu", "matrix", "fp32")
