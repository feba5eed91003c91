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
    # today's purchases (issue 26): one headline figure each, as the vendor states it
    ("b300", "matrix", "fp4", 13500, 8000,
     "NVIDIA HGX B300 / 8: fp4 108 PF dense; Blackwell Ultra blog: 8 TB/s per GPU"),
    ("gb300", "matrix", "fp4", 15000, 8000,
     "NVIDIA Blackwell Ultra blog: 15 PF dense NVFP4; GB300 NVL72 576 TB/s / 72"),
    ("rtx-pro-6000-blackwell", "vector", "fp32", 125, 1792,
     "NVIDIA RTX PRO 6000 Blackwell datasheet: 125 TF fp32, 1792 GB/s GDDR7"),
    ("rtx-5090", "matrix", "fp4", 1676, 1792,
     "NVIDIA RTX Blackwell whitepaper, RTX 5090: 3352 AI TOPS fp4 sparse, 1792 GB/s"),
    ("mi325x", "matrix", "fp8", 2614.9, 6000,
     "AMD Instinct MI325X data sheet: fp8 2614.9 TF dense, 6 TB/s"),
    ("mi355x", "matrix", "fp4", 10066.3, 8000,
     "AMD Instinct MI355X: MXFP4 10066.3 TF dense, 8 TB/s"),
    ("gaudi3", "matrix", "bf16", 1835, 3700,
     "Intel Gaudi 3 white paper: bf16 MME 1835 TF, 3.7 TB/s"),
    ("tpu-v6e", "matrix", "bf16", 918, 1638,
     "Google Cloud TPU v6e docs: 918 TF bf16, 1638 GBps HBM"),
    ("trainium2", "matrix", "fp8", 1299, 2900,
     "AWS Neuron Trainium2 architecture: 1299 fp8 TF, 2.9 TB/s"),
    ("h20", "matrix", "fp8", 296, 4000,
     "NVIDIA H20 partner spec sheet (press): fp8 296 TF, 4.0 TB/s"),
    ("xeon-6980p", "matrix", "bf16", 262.1, 614.4,
     "Intel ARK 6980P: 128 cores, 2.0 GHz base, AMX 1024 bf16 FLOP/clk/core; 12 x DDR5-6400"),
    ("epyc-9755", "vector", "fp32", 22.1, 614.4,
     "AMD EPYC 9755: 128 Zen 5 cores at 2.7 GHz, 64 fp32 FLOP/clk; 12 x DDR5-6400"),
    ("grace", "vector", "fp64", 3.57, 512,
     "NVIDIA Grace: 7.1 TF fp64 per 144 cores (3.55 per 72); GH200: up to 512 GB/s LPDDR5X"),
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
