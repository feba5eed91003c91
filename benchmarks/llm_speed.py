"""Speed and decode-integration error of the LLM serving predictor (no timed assertions in the
tests: the figures are printed here).

Part 1, speed: wall time of ``serving_table`` for a few requests (in-process, after imports;
the import time of ``roofcast.predictor.llm.serving`` is printed separately), e.g. the issue's
"Llama-3.1-70B, 2048 in / 256 out, fp8, on H100 vs H200 vs MI300X".

Part 2, decode integration: ``request_model_times`` times the decode steps at
``phases.DECODE_POINTS`` contexts and interpolates; the table compares its ``decode_total_s``
with timing every one of the ``M - 1`` steps (``points`` = M), relative error in %.

    python benchmarks/llm_speed.py [--repeats 5] [--runtime tensorrt]

The architectures are typed in (HF config figures) so the benchmark needs no config reader.
"""

from __future__ import annotations

import argparse
import time

t0 = time.perf_counter()
import pandas as pd  # noqa: E402

from roofcast.graph_import.llm.arch import LLMArch  # noqa: E402
from roofcast.hw_catalog.catalog import get_device  # noqa: E402
from roofcast.predictor.llm.phases import request_model_times  # noqa: E402
from roofcast.predictor.llm.serving import serving_table  # noqa: E402
from roofcast.predictor.llm.types import ServingConfig  # noqa: E402

IMPORT_S = time.perf_counter() - t0

ARCHS = {
    "llama-2-7b": LLMArch("llama-2-7b", "llama", 32, 4096, 32, 32, 128, 11008, 32000, 4096),
    "llama-2-70b": LLMArch("llama-2-70b", "llama", 80, 8192, 64, 8, 128, 28672, 32000, 4096),
    "llama-3.1-70b": LLMArch("llama-3.1-70b", "llama", 80, 8192, 64, 8, 128, 28672, 128256,
                             131072),
    "mixtral-8x7b": LLMArch("mixtral-8x7b", "mixtral", 32, 4096, 32, 8, 128, 14336, 32000,
                            32768, n_experts=8, experts_per_token=2),
}
SPEED_CASES = [
    (
        "llama-3.1-70b",
        ("h100-sxm", "h200", "mi300x"),
        {"input_tokens": 2048, "output_tokens": 256, "weights": "fp8"},
        [1],
    ),
    (
        "llama-3.1-70b",
        ("h100-sxm", "h200", "mi300x"),
        {"input_tokens": 2048, "output_tokens": 256, "weights": "fp8"},
        [1, 2, 4, 8, 16, 32, 64],
    ),
    (
        "llama-2-7b",
        ("a100-80gb-sxm", "h100-sxm"),
        {"input_tokens": 1024, "output_tokens": 1024},
        [1, 64],
    ),
    (
        "mixtral-8x7b",
        ("h200", "mi300x"),
        {"input_tokens": 512, "output_tokens": 512, "concurrency": "max"},
        ["max"],
    ),
]
ERROR_CASES = [
    ("llama-2-7b", "a100-80gb-sxm", 1024, 1024, 1),
    ("llama-2-7b", "a100-80gb-sxm", 1024, 1024, 64),
    ("llama-2-7b", "h100-sxm", 2048, 256, 16),
    ("llama-2-70b", "mi300x", 1024, 1024, 1),
    ("llama-2-70b", "mi300x", 1024, 1024, 64),
    ("mixtral-8x7b", "h200", 2048, 256, 8),
]


def speed(repeats: int, runtime: str | None) -> pd.DataFrame:
    rows = []
    for name, devices, kw, batches in SPEED_CASES:
        hws = [get_device(d) for d in devices]
        cfg = ServingConfig(runtime=runtime, **kw)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            serving_table(ARCHS[name], hws, cfg, batches)
            times.append(time.perf_counter() - t)
        rows.append({"model": name, "devices": ",".join(devices), "batches": len(batches),
                     "cells": len(batches) * len(devices), "best_ms": min(times) * 1e3,
                     "median_ms": sorted(times)[len(times) // 2] * 1e3})
    return pd.DataFrame(rows)


def integration_error(runtime: str | None) -> pd.DataFrame:
    rows = []
    for name, dev, n, m, b in ERROR_CASES:
        cfg = ServingConfig(n, m, runtime=runtime)
        hw = get_device(dev)
        t = time.perf_counter()
        few = request_model_times(ARCHS[name], hw, cfg, b)
        few_s = time.perf_counter() - t
        t = time.perf_counter()
        every = request_model_times(ARCHS[name], hw, cfg, b, points=m)
        every_s = time.perf_counter() - t
        rows.append({"model": name, "device": dev, "in": n, "out": m, "batch": b,
                     "points": len(few.contexts), "decode_s": few.decode_total_s,
                     "all_steps_s": every.decode_total_s,
                     "error_pct": 100 * (few.decode_total_s / every.decode_total_s - 1),
                     "ms_points": few_s * 1e3, "ms_all_steps": every_s * 1e3})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--runtime", default=None, help="engine profile (default: the device's)")
    args = ap.parse_args()
    print(f"import of the serving predictor: {IMPORT_S * 1e3:.0f} ms")
    with pd.option_context("display.width", 200, "display.float_format", "{:.4g}".format):
        print(speed(args.repeats, args.runtime).to_string(index=False))
        print()
        print(integration_error(args.runtime).to_string(index=False))


if __name__ == "__main__":
    main()
