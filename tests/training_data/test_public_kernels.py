"""Public kernel importer on tiny files in the published column layout."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from roofcast.graph_import.workload_schema import WORKLOAD_COLUMN_NAMES, check_workload
from roofcast.training_data.public_kernels import (
    ENV_VAR,
    PublicDataError,
    kernel_workload,
    load_kernels,
    shared_data_dir,
)

COMMON = {"kind": "kernel", "num_devices": 1, "unit": "ms", "framework": "PyTorch"}


def _write(folder, name, rows):
    (folder / "gpu_kernels").mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "gpu_kernels" / name, index=False, compression="gzip")


@pytest.fixture
def data(tmp_path):
    ns = dict(COMMON, precision="fp32", mode="infer(fwd only)", metric="latency", source="ns")
    _write(tmp_path, "neusight_gemm_kernels.csv.gz", [
        dict(ns, workload="bmm", hardware="Tesla V100-PCIE-32GB", value=0.5,
             notes="test_set; kernel=volta_sgemm_64x64_nn", B=8, M=64, N=32, K=16, batch=8),
        dict(ns, workload="linear", hardware="Tesla T4", value=1.0, notes="train_set; kernel=x",
             B=1, M=128, N=256, K=512, batch=1),
        dict(ns, workload="bmm", hardware="Imaginary GPU 9000", value=1.0, notes="",
             B=1, M=2, N=2, K=2, batch=1),
    ])
    _write(tmp_path, "neusight_conv_kernels.csv.gz", [
        dict(ns, workload="conv2d", hardware="Tesla P4", value=2.0, notes="train_set",
             conv_N=2, conv_C=3, conv_H=8, conv_W=8, conv_K=4, conv_R=3, conv_S=3, stride=1, pad=1),
    ])
    _write(tmp_path, "neusight_vec_kernels.csv.gz", [
        dict(ns, workload=w, hardware="Tesla P4", value=0.01, notes="train_set", B=4, H=8)
        for w in ("addu", "ln", "softmax")
    ])
    db = dict(COMMON, source="db", notes="", mode="train")
    _write(tmp_path, "deepbench_kernels.csv.gz", [
        dict(db, workload="gemm", hardware="NVIDIA T4", precision="int8 (int32 accum)",
             metric="time", value=0.1, M=16, N=8, K=32, transA="N", transB="T"),
        dict(db, workload="conv2d", hardware="NVIDIA V100", precision="fp32",
             metric="time_bwd_filter", value=0.3, conv_N=2, conv_C=3, conv_H=8, conv_W=8,
             conv_K=4, conv_R=3, conv_S=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1),
        dict(db, workload="lstm", hardware="NVIDIA V100", precision="fp32", metric="time",
             value=1.0),
    ])
    return tmp_path


def test_load_maps_devices_families_and_reports_what_is_left_out(data):
    t = load_kernels(data)
    k = t.kernels
    assert t.unmapped == {"Imaginary GPU 9000": 1}
    assert t.skipped == {"lstm": 1}
    assert len(k) == 8
    by = k.set_index(["workload", "device"])
    assert by.loc[("bmm", "v100-pcie-32gb"), "family"] == "matmul"
    assert by.loc[("bmm", "v100-pcie-32gb"), "latency_s"] == pytest.approx(0.5e-3)
    assert by.loc[("bmm", "v100-pcie-32gb"), "kernel_name"] == "volta_sgemm_64x64_nn"
    assert by.loc[("bmm", "v100-pcie-32gb"), "split"] == "test"
    assert by.loc[("conv2d", "p4"), "family"] == "conv"
    assert by.loc[("ln", "p4"), "family"] == "normalization"
    assert by.loc[("softmax", "p4"), "family"] == "softmax"
    assert by.loc[("addu", "p4"), "family"] == "elementwise"
    assert by.loc[("gemm", "t4"), "op_type"] == "MatMulInteger"


def test_workload_rows_follow_the_contract_and_the_formulas(data):
    k = load_kernels(data).kernels
    w = kernel_workload(k)
    check_workload(w)
    assert list(w.columns) == list(WORKLOAD_COLUMN_NAMES)
    r = w[k.workload.eq("bmm")].iloc[0]
    assert r.flops == 2 * 8 * 64 * 32 * 16
    assert (r.gemm_batch, r.gemm_m, r.gemm_n, r.gemm_k) == (8, 64, 32, 16)
    assert r.bytes_read == 8 * (64 * 16 + 16 * 32) * 4
    lin = w[k.workload.eq("linear")].iloc[0]  # y[M,N] = x[M,K] W[N,K]^T + b
    assert lin.flops == 2 * 128 * 256 * 512 + 128 * 256
    assert (lin.gemm_m, lin.gemm_n, lin.gemm_k) == (128, 256, 512)
    assert lin.weight_bytes == (256 * 512 + 256) * 4
    i8 = w[k.workload.eq("gemm")].iloc[0]
    assert i8["dtype"] == "int8"
    assert i8.bytes_read == 16 * 32 + 32 * 8
    assert i8.bytes_written == 16 * 8 * 4  # int32 output
    conv_f = w[k.workload.eq("conv2d") & k.direction.eq("fwd")].iloc[0]
    assert conv_f.flops == 2 * 2 * 4 * 8 * 8 * 3 * 9
    wgrad = w[k.direction.eq("bwd_filter")].iloc[0]
    assert wgrad.phase == "backward"
    assert (wgrad.gemm_m, wgrad.gemm_n, wgrad.gemm_k) == (4, 27, 2 * 64)
    assert wgrad.bytes_written == 4 * 3 * 9 * 4
    assert math.isnan(w[k.workload.eq("ln")].iloc[0].gemm_m)
    # inner_elems: the normalised row H of [B, H] softmax/LayerNorm, the conv window R*S
    assert w[k.workload.eq("ln")].iloc[0].inner_elems == 8
    assert w[k.workload.eq("softmax")].iloc[0].inner_elems == 8
    assert conv_f.inner_elems == 3 * 3
    assert wgrad.inner_elems == 3 * 3
    assert math.isnan(w[k.workload.eq("addu")].iloc[0].inner_elems)
    assert math.isnan(r.inner_elems)


def test_data_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert shared_data_dir() == tmp_path
    assert shared_data_dir("/x") == __import__("pathlib").Path("/x")
    monkeypatch.delenv(ENV_VAR)
    assert shared_data_dir().parts[-2:] == ("shared", "data")


def test_missing_folder_says_what_to_do(tmp_path):
    with pytest.raises(PublicDataError, match=ENV_VAR):
        load_kernels(tmp_path / "nowhere")
