"""``roofcast sweep MODEL --hw A,B --batches 1,8,32``: devices x batches x precisions x modes.

One row per (device, batch, precision, mode) cell, from ``predictor.sweep.sweep`` (one
vectorised evaluation for every cell; ``roofcast.sweep`` in Python): the runtime modelled on the
device (``--runtime``, else the device kind's default), predicted step time, speedup over the
baseline device in the same cell, throughput (samples/s = batch / time), memory footprint and
whether it fits, throughput per list-price dollar and per TDP watt (empty where the catalog has
no price or TDP), and the dominant bound.
"""

from __future__ import annotations

import argparse
import math

from roofcast.app.argtypes import name_list, positive_int_list
from roofcast.app.commands.compare import (
    device_runtimes,
    fusion_summary,
    runtime_summary,
    split_devices,
)
from roofcast.app.commands.predict import GIB, add_execution_args, chosen_estimator
from roofcast.app.output import add_format_arg, context_columns, emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="predicted time over devices x batches x precisions x modes",
                       description=__doc__)
    p.add_argument("model", help="path to an .onnx file or a zoo model name (e.g. resnet50)")
    p.add_argument("--hw", required=True, metavar="A,B,C",
                   help="comma-separated device ids (what-if specs BASE:key=value allowed)")
    p.add_argument("--batches", type=positive_int_list, default=[1], metavar="N[,N...]",
                   help="batch sizes (default 1); the model is imported once per batch")
    p.add_argument("--precisions", type=name_list, default=["fp32"], metavar="P[,P...]",
                   help="compute precisions (default fp32)")
    p.add_argument("--modes", type=name_list, default=["infer"], metavar="M[,M...]",
                   help="infer and/or train (default infer)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="bind a symbolic dim other than the batch, e.g. sequence=128")
    add_execution_args(p)
    p.add_argument("--baseline", metavar="ID", help="device the speedups are relative to "
                   "(default: the first of --hw)")
    add_format_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from roofcast.app.model_ref import load_graph
    from roofcast.predictor.config import RunConfig
    from roofcast.predictor.sweep import sweep

    devices = split_devices(args.hw)
    runtimes = device_runtimes(devices, args.runtime)  # before any work
    dims = [s for s in args.dim if s.split("=", 1)[0].strip() != "batch"]
    df = sweep(lambda b: load_graph(args.model, dims, b), devices, args.batches,
               args.precisions, args.modes, chosen_estimator(args), baseline=args.baseline,
               fusion=args.fusion, inter_op=args.inter_op, optimizer=args.optimizer,
               threads=args.threads, allow_incomplete=args.allow_incomplete,
               runtime=args.runtime)
    table = pd.DataFrame({
        "device": df["device"], "runtime": df["device"].map(runtimes), "batch": df["batch"],
        "precision": df["precision"], "mode": df["mode"], "time_ms": df["time_s"] * 1e3,
        "speedup": df["speedup"], "throughput_per_s": df["throughput_samples_per_s"],
        "memory_GiB": df["memory_bytes"] / GIB, "fits": df["fits"],
        "throughput_per_dollar": df["throughput_per_usd"],
        "throughput_per_W": df["throughput_per_W"], "bound": df["dominant_bound"],
    })
    config = RunConfig(fusion=args.fusion, runtime=args.runtime)
    extra = {"model": str(df["model"].iloc[0]), "runtime": runtime_summary(runtimes.values()),
             "estimator": chosen_estimator(args), "fusion": fusion_summary(config, runtimes.values()),
             "inter_op": args.inter_op, "baseline": str(df["baseline"].iloc[0])}
    table = context_columns(table, args.format, estimator=chosen_estimator(args))
    emit({"cells": table}, args.format,
         extra={k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in extra.items()})
    return 0
