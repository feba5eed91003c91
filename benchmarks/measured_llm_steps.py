"""roofcast's serving step times against this project's engine-like H100/H200 steps (2026-11-27).

Run: ``python benchmarks/measured_llm_steps.py [--gpu h100,h200] [--runtimes vllm,tensorrt-llm]
[--format table|csv]``.
Data: ``training_data/measured/{h100,h200}_llm_steps_2026-11-27/`` (READMEs): a Llama-shaped
decoder in plain PyTorch, one CUDA-graph replay per step (``graph_ms``). Each row is predicted
through the public API on the catalog's ``h100-sxm`` / ``h200``: a prefill row of ``batch`` x
``context`` tokens is the TTFT of a static batch (``input_tokens=context``), a decode row the
TPOT of a static batch with ``input_tokens=context - 1`` and two output tokens (one decode
step over ``context`` keys). Printed: signed error ``pred / meas - 1`` per row, then median
|error| per GPU, runtime and phase.
The measured steps run unfused PyTorch kernels, so a tuned engine should be at or below them:
a prediction far above them is wrong, one somewhat below is expected. Nothing is fitted here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measured_gpus import add_gpu_option, chosen_gpus, gpu_folders

import roofcast

#: --gpu name -> (data folder, catalog device id)
GPUS = gpu_folders("llm_steps_2026-11-27")


def predict(df: pd.DataFrame, runtimes: list[str]) -> pd.DataFrame:
    rows = []
    for rec in df.to_dict("records"):
        cfg = GPUS[rec["gpu"]][0] / f"{rec['model']}.config.json"
        prefill = rec["phase"] == "prefill"
        n = int(rec["context"]) if prefill else int(rec["context"]) - 1
        out = dict(rec)
        for rt in runtimes:
            try:
                p = roofcast.llm(str(cfg), GPUS[rec["gpu"]][1], input_tokens=n, output_tokens=2,
                                 batch=int(rec["batch"]), weights=rec["weights"],
                                 kv_cache="bf16", activations="bf16", runtime=rt)
                out[rt] = (p.ttft_s if prefill else p.tpot_s) * 1e3
            except Exception as exc:  # reported, not hidden
                out[rt] = np.nan
                out[f"{rt}_error"] = str(exc)[:80]
        rows.append(out)
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame, runtimes: list[str]) -> pd.DataFrame:
    out = []
    for rt in runtimes:
        for (gpu, phase), g in df.groupby(["gpu", "phase"]):
            err = g[rt] / g["graph_ms"] - 1
            out.append({"gpu": gpu, "runtime": rt, "phase": phase, "rows": int(err.notna().sum()),
                        "median_abs_pct": 100 * err.abs().median(),
                        "median_signed_pct": 100 * err.median(),
                        "worst_pct": 100 * err.abs().max()})
    return pd.DataFrame(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpu_option(ap)
    ap.add_argument("--runtimes", default="vllm,tensorrt-llm,sglang")
    ap.add_argument("--format", choices=("table", "csv"), default="table")
    args = ap.parse_args(argv)
    runtimes = [r for r in args.runtimes.split(",") if r]
    gpus = chosen_gpus(ap, args.gpu)
    meas = pd.concat([pd.read_csv(GPUS[g][0] / "steps.csv").assign(gpu=g) for g in gpus],
                     ignore_index=True)
    meas = meas[meas["error"].isna() & meas["graph_ms"].notna()]
    df = predict(meas, runtimes)
    for rt in runtimes:
        df[f"{rt}_err_pct"] = 100 * (df[rt] / df["graph_ms"] - 1)
    cols = ["gpu", "model", "weights", "phase", "batch", "context", "graph_ms",
            *[c for rt in runtimes for c in (rt, f"{rt}_err_pct")]]
    if args.format == "csv":
        df[cols].to_csv(sys.stdout, index=False)
        return 0
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(df[cols].round(2).to_string(index=False))
        print()
        print(summary(df, runtimes).round(1).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
