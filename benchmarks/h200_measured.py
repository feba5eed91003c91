"""roofcast against this project's own H200 and H100 measurements (PyTorch eager, 2026-11-27).

Run: ``python benchmarks/h200_measured.py [--gpu h200,h100] [--estimators time-roofline,auto]
[--format table|csv]``.
Data: ``training_data/measured/{h200,h100}_pytorch_2026-11-27/`` (their READMEs): whole-model
forward latency of bundled zoo models in PyTorch eager (``eager_ms``: host dispatch included)
and the same forwards replayed from a CUDA graph (``graph_ms``: GPU time only), fp32 / tf32 /
bf16 / fp16, batch 1, 8, 32, sequence 128 for text models. Each zoo model is predicted on the
catalog's device (``h200``, ``h100-sxm``) as the collector ran it (``RUN_AS``: its ``fp32``
rows set ``cudnn.allow_tf32 = False``, so they are the ``pytorch-eager-fp32-strict`` runtime;
its ``tf32`` rows switch TF32 on for convolutions and matmuls, precision ``tf32``) with each
estimator; the table gives the signed error ``pred / meas - 1`` against eager and against graph
replay, then the median and mean |error| per GPU and estimator. Nothing is fitted to these rows.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measured_gpus import add_gpu_option, chosen_gpus, gpu_folders

import roofcast

#: --gpu name -> (data folder, catalog device id)
GPUS = gpu_folders("pytorch_2026-11-27")
#: the collector's precision -> (roofcast precision, runtime) it ran as (tools/torch_eager.py
#: sets cudnn.allow_tf32 and cuda.matmul.allow_tf32 to ``precision == "tf32"``)
RUN_AS = {"fp32": ("fp32", "pytorch-eager-fp32-strict"), "tf32": ("tf32", "pytorch-eager"),
          "bf16": ("bf16", "pytorch-eager"), "fp16": ("fp16", "pytorch-eager")}
ZOO = {"resnet50", "vgg16", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "vit_b_16",
       "bert_base", "gpt2", "t5_encoder"}


def measured(gpu: str = "h200") -> pd.DataFrame:
    data, hw = GPUS[gpu]
    eager = pd.read_csv(data / "models.csv")
    graph = pd.read_csv(data / "models_graph.csv")
    keys = ["model", "precision", "batch", "seq"]
    df = eager.merge(graph, on=keys, how="outer", suffixes=("", "_g"))
    df = df[df["model"].isin(ZOO) & df["eager_ms"].notna()]
    return df[[*keys, "eager_ms", "graph_ms"]].assign(gpu=gpu, hw=hw).reset_index(drop=True)


def predict(df: pd.DataFrame, estimators: list[str]) -> pd.DataFrame:
    rows = []
    for rec in df.to_dict("records"):
        dims = {} if pd.isna(rec["seq"]) else {"sequence": int(rec["seq"])}
        out = dict(rec)
        precision, runtime = RUN_AS[rec["precision"]]
        for est in estimators:
            try:
                p = roofcast.predict(rec["model"], rec["hw"], batch=int(rec["batch"]), dims=dims,
                                     precision=precision, runtime=runtime, estimator=est)
                out[f"{est}_ms"] = p.total_ms
            except Exception as exc:  # reported, not hidden
                out[f"{est}_ms"] = np.nan
                out[f"{est}_error"] = str(exc)[:80]
        rows.append(out)
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame, estimators: list[str]) -> pd.DataFrame:
    out = []
    for gpu in [*df["gpu"].unique(), "all"]:
        part = df if gpu == "all" else df[df["gpu"] == gpu]
        for est in estimators:
            for ref in ("eager_ms", "graph_ms"):
                err = (part[f"{est}_ms"] / part[ref] - 1).dropna()
                out.append({"gpu": gpu, "estimator": est, "against": ref, "n": len(err),
                            "median_abs_%": 100 * err.abs().median(),
                            "mean_abs_%": 100 * err.abs().mean(),
                            "median_signed_%": 100 * err.median(),
                            "worst_abs_%": 100 * err.abs().max()})
    return pd.DataFrame(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpu_option(ap, "h200,h100")
    ap.add_argument("--estimators", default="time-roofline,auto")
    ap.add_argument("--format", choices=("table", "csv"), default="table")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    estimators = [e for e in args.estimators.split(",") if e]
    gpus = chosen_gpus(ap, args.gpu)
    df = predict(pd.concat([measured(g) for g in gpus], ignore_index=True), estimators)
    summ = summary(df, estimators)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
        return 0
    with pd.option_context("display.width", 200, "display.max_rows", 500,
                           "display.float_format", "{:.3f}".format):
        print(df.to_string(index=False))
        print()
        print(summ.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
