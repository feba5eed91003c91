"""Spot tests of built-in device files against vendor datasheet figures (dense peaks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofcast.hw_catalog import BUILTIN_DIR, load_catalog

# (id, engine, dtype, expected TFLOP/s or TOPS, expected GB/s, source)
DATASHEET = [
    ("h100-sxm", "matrix", "bf16", 989.4, 3350,
     "NVIDIA H100 Tensor Core GPU datasheet / Hopper whitepaper, SXM5: 3.35 TB/s, 989.4 TF "
     "bf16 dense (1979 with sparsity)"),
    ("a100-40gb-pcie", "matrix", "fp16", 312, 1555,
     "NVIDIA A100 datasheet (2020), PCIe 40GB: 1,555 GB/s, 312 TF fp16 tensor dense"),
    ("v100-sxm2-16gb", "matrix", "fp16", 125, 900,
     "NVIDIA Tesla V100 datasheet (2017), SXM2: 900 GB/s, 125 TF tensor"),
    ("t4", "matrix", "fp16", 65, 320,
     "NVIDIA T4 datasheet (2018): 320 GB/s, 65 TF fp16 mixed precision"),
    ("mi300x", "matrix", "fp16", 1307.4, 5300,
     "AMD Instinct MI300X data sheet (2023): 5.3 TB/s, 1307.4 TF fp16 dense"),
    ("rtx-4090", "vector", "fp32", 82.6, 1008,
     "NVIDIA Ada Lovelace whitepaper (2022), RTX 4090: 1008 GB/s, 82.6 TF fp32 shader"),
    ("a100-80gb-sxm", "matrix", "tf32", 156, 2039,
     "NVIDIA A100 datasheet (2021), SXM 80GB: 2,039 GB/s, 156 TF tf32 dense"),
    ("h200", "matrix", "fp8", 1978.9, 4800,
     "NVIDIA H200 datasheet (2024): 4.8 TB/s, fp8 3,958 TF with sparsity (1979 dense)"),
    ("b200", "matrix", "fp4", 9000, 7700,
     "NVIDIA HGX B200 per GPU (2024-25): 7.7 TB/s, fp4 18 PF with sparsity (9 PF dense)"),
    ("gb200", "matrix", "fp4", 10000, 8000,
     "NVIDIA GB200 NVL72, per superchip / 2 GPUs: 8 TB/s, fp4 40 PF sparse (10 PF dense)"),
]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(BUILTIN_DIR, Path("/nonexistent-roofcast-user-folder"))


@pytest.mark.parametrize(("dev_id", "engine", "dtype", "tera", "GBps", "source"), DATASHEET,
                         ids=[d[0] for d in DATASHEET])
def test_datasheet_figures(catalog, dev_id, engine, dtype, tera, GBps, source):
    spec = catalog.devices[dev_id]
    assert spec.peak_flops[(engine, dtype)] == pytest.approx(tera * 1e12, rel=0.01), source
    assert spec.mem_bw_Bps == pytest.approx(GBps * 1e9, rel=0.01), source


def test_h100_capacity_is_80_gib(catalog):
    # "80GB" HBM3 = 80 GiB (nvidia-smi reports 81559 MiB usable of 81920 MiB).
    assert catalog.devices["h100-sxm"].mem_capacity_bytes == 80 * 2**30


def test_p4_has_no_fp16_matrix_unit_and_falls_back_with_a_note(catalog):
    # Tesla P4 datasheet (2016): 5.5 TF fp32, 22 TOPS int8 (dp4a), no tensor cores.
    lookup = catalog.devices["p4"].peak("matrix", "float16")
    assert lookup.engine_used == "vector"
    assert "no fp16 matrix unit" in lookup.note
    assert lookup.flops_per_s <= 5.5e12 * 1.01
