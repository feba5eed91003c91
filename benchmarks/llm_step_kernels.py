"""A decode step's GEMM + attention time from the step model vs aiconfigurator's measured rows.

    ROOFCAST_SHARED_DATA=../shared/data .venv/bin/python benchmarks/llm_step_kernels.py

For today's engines (vllm, tensorrt-llm, sglang profiles) on H100, H200 and B200: one decoder
layer of a decode step of ``B`` sequences at context ``L`` (``phases.time_steps``) — its four
projection GEMMs (qkv, o_proj, fused gate/up, down) and its attention kernel — against the sum of
the aiconfigurator rows measured for the same shapes in that engine's container (CUDA graphs;
a shape timed by several kernels: the fastest). Shapes on the tables' GEMM grid (hidden 4096 /
5120 / 8192, 8 KV heads of 128, FFN 8192), B in 1..128, L in 1024 / 4096; bf16 weights + bf16
KV, fp8 (B200: also nvfp4) weights + fp8 KV. These rows are the learned model's training data
(in-sample: this checks the step model's assembly, not transfer); the estimator the step model
used before (roofline+eff) beside it. Median |predicted / measured - 1| and signed.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.graph_import.llm.load import load_llm
from roofcast.hw_catalog import get_device
from roofcast.predictor.estimator_registry import as_estimator
from roofcast.predictor.llm.kernels import Segment
from roofcast.predictor.llm.phases import Step, engine_profile, time_steps
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.training_data.public_kernels import shared_data_dir

DEVICES = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm"}
ENGINES = {"vllm": "vllm", "tensorrt-llm": "trtllm", "sglang": "sglang"}
#: (hidden, query heads, KV heads, head dim, FFN): shapes on the tables' GEMM grid.
SHAPES = ((4096, 32, 8, 128, 8192), (5120, 40, 8, 128, 8192), (8192, 64, 8, 128, 8192))
BATCHES = (1, 8, 32, 128)
CONTEXTS = (1024, 4096)
#: (weights, KV cache) -> (table gemm_dtype, table kv_cache_dtype)
DTYPES = {("bf16", "bf16"): ("bfloat16", "bfloat16"), ("fp8", "fp8"): ("fp8", "fp8"),
          ("nvfp4", "fp8"): ("nvfp4", "fp8")}
KERNELS = ("qkv", "o_proj", "up", "down", "attn0")
ESTIMATORS = ("engine-tables", "learned", "roofline+eff")


def _table(root: Path, folder: str, family: str, engine: str, name: str) -> pd.DataFrame:
    """One engine's table on one device (its only version folder)."""
    versions = sorted((root / "data" / folder / family / engine).glob(f"*/{name}.parquet"))
    if not versions:
        return pd.DataFrame()
    return pd.read_parquet(versions[-1]).assign(table_version=versions[-1].parent.name)


def _gemm_ms(g: pd.DataFrame, m: int, n: int, k: int, dtype: str) -> float:
    hit = g[(g["m"] == m) & (g["n"] == n) & (g["k"] == k) & (g["gemm_dtype"] == dtype)]
    return float(hit["latency"].min()) if len(hit) else np.nan


def _attn_ms(a: pd.DataFrame, b: int, ctx: int, h: int, kv: int, hd: int, kvd: str) -> float:
    hit = a[(a["batch_size"] == b) & (a["isl"] == 1) & (a["step"] == ctx - 1)
            & (a["num_heads"] == h) & (a["num_key_value_heads"] == kv) & (a["head_dim"] == hd)
            & (a["kv_cache_dtype"] == kvd) & (a["attn_dtype"] == "bfloat16")]
    if "window_size" in hit:
        hit = hit[hit["window_size"] == 0]
    return float(hit["latency"].min()) if len(hit) else np.nan


def measured(root: Path) -> pd.DataFrame:
    """One row per (device, engine, dtypes, shape, B, L) whose five kernels were all measured."""
    rows = []
    for dev, folder in DEVICES.items():
        for eng, efolder in ENGINES.items():
            g = _table(root, folder, "gemm", efolder, "gemm_perf")
            a = _table(root, folder, "attention", efolder, "generation_attention_perf")
            if g.empty or a.empty:
                continue
            for (w, kvd), (gd, ad) in DTYPES.items():
                for d, h, kv, hd, ff in SHAPES:
                    for b in BATCHES:
                        for ctx in CONTEXTS:
                            parts = [_gemm_ms(g, b, (h + 2 * kv) * hd, d, gd),
                                     _gemm_ms(g, b, d, h * hd, gd),
                                     _gemm_ms(g, b, 2 * ff, d, gd), _gemm_ms(g, b, d, ff, gd),
                                     _attn_ms(a, b, ctx, h, kv, hd, ad)]
                            if np.isfinite(parts).all():
                                rows.append({"device": dev, "engine": eng, "weights": w,
                                             "kv": kvd, "shape": (d, h, kv, hd, ff),
                                             "batch": b, "context": ctx,
                                             "version": g["table_version"].iloc[0],
                                             "measured_s": sum(parts) * 1e-3})
    return pd.DataFrame(rows)


def predicted(meas: pd.DataFrame, estimator: str) -> np.ndarray:
    """The step model's per-layer GEMM + attention seconds of every measured row."""
    base = load_llm("llama-3.1-8b")
    out = np.full(len(meas), np.nan)
    hws = {d: get_device(d) for d in DEVICES}
    for (eng, w, kvd, shape), grp in meas.groupby(["engine", "weights", "kv", "shape"]):
        d, h, kv, hd, ff = shape
        arch = dataclasses.replace(base, d_model=d, n_heads=h, n_kv_heads=kv, head_dim=hd,
                                   d_ff=ff)
        steps = {(b, c): Step(f"b{b}@{c}", (Segment(int(b), 1, int(c)),))
                 for b, c in set(zip(grp["batch"], grp["context"], strict=True))}
        st = time_steps(arch, list(hws.values()), list(steps.values()),
                        TensorDtypes(w, kvd, "bf16"), engine_profile(eng, hws["h100-sxm"]),
                        as_estimator(estimator))  # an object: used as given
        for i, r in grp.iterrows():
            k = st.kernels(steps[(r["batch"], r["context"])].label, r["device"])
            mine = k[k["node"].isin(KERNELS)]
            out[meas.index.get_loc(i)] = float((mine["kernel_s"] / mine["count"]).sum())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    meas = measured(shared_data_dir() / "aiconfigurator").reset_index(drop=True)
    if meas.empty:
        raise SystemExit("no aiconfigurator tables found (set ROOFCAST_SHARED_DATA)")
    for est in ESTIMATORS:
        meas[f"{est} signed"] = (predicted(meas, est) / meas["measured_s"] - 1) * 100
        meas[est] = meas[f"{est} signed"].abs()
    keys = ["device", "engine", "version", "weights"]
    table = meas.groupby(keys).agg(n=("measured_s", "size"),
                                   **{f"{e} med %": (e, "median") for e in ESTIMATORS},
                                   **{f"{e} signed %": (f"{e} signed", "median")
                                      for e in ESTIMATORS})
    pd.set_option("display.width", 160)
    print(table.round(1).to_string())
    print(f"\nall {len(meas)} decode-step layers: median |error| " + ", ".join(
        f"{e} {meas[e].median():.1f} %" for e in ESTIMATORS))
    for dev in DEVICES:
        mine = meas[meas["device"] == dev]
        print(f"  {dev:9s} n={len(mine):3d}  " + ", ".join(
            f"{e} {mine[e].median():.1f} %" for e in ESTIMATORS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
