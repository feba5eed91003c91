"""``roofcast compare MODEL --hw A,B,C``: the same run predicted on several devices.

One row per device: the runtime modelled on it (``--runtime``, else the device kind's default),
predicted step time, speedup over the baseline device (default: the first), throughput
(samples/s = batch / time), memory footprint and whether it fits, list price and TDP per unit
of throughput (USD and W per sample/s; empty where the catalog has no price or TDP), and the
dominant bound. The app's Compare page and ``roofcast.compare`` in Python give the same numbers.

Several systems (``--system A,B``, or ``--hw A,B --devices N``: N of each device), with the plan
flags of ``roofcast predict`` (``--tp``, ``--pp``, ``--global-batch``, ...): one row per system,
the same plan's step and its parts (compute, exposed communication, bubble, optimizer),
``speedup`` over the first system, per-device memory and whether it fits (``over_GiB``: by how
much it does not).
"""

from __future__ import annotations

import argparse
import math

from roofcast.app.commands.predict import (
    GIB,
    add_run_args,
    chosen_estimator,
    load_user_model,
    settings,
)
from roofcast.app.output import add_format_arg, context_columns, emit
from roofcast.app.parallel_args import add_training_plan_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="predicted time, speedup and cost on several devices",
                       description=__doc__)
    add_run_args(p)
    p.add_argument("--hw", metavar="A,B,C",
                   help="comma-separated device ids (what-if specs BASE:key=value allowed)")
    p.add_argument("--baseline", metavar="ID", help="device the speedups are relative to "
                   "(default: the first of --hw)")
    add_format_arg(p)
    add_training_plan_args(p, several=True)
    p.set_defaults(func=run)


def split_devices(text: str) -> list[str]:
    """Split --hw on commas, keeping what-if specs (``h100-sxm:mem_bw_GBps=6700,l2_MB=100``)
    whole: a part with '=' but no ':' continues the previous what-if spec."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if out and "=" in part and ":" not in part and ":" in out[-1]:
            out[-1] += "," + part
        else:
            out.append(part)
    if not out:
        from roofcast.predictor.errors import PredictionError

        raise PredictionError("--hw lists no device; give ids like --hw a100-40gb-sxm,h100-sxm")
    return out


def runtime_summary(names) -> str:
    """The distinct runtimes of a comparison, in order, comma-separated."""
    return ", ".join(dict.fromkeys(names))


def fusion_summary(config, runtimes) -> bool | str:
    """The fusion setting in force: the run's, else the runtimes' default when they share one,
    else each runtime's (``"per runtime: onnxruntime-cpu on, pytorch-eager off"``)."""
    from roofcast.predictor.runtimes import get_runtime

    if config.fusion is not None:
        return config.fusion
    defaults = {name: get_runtime(name).fusion_default for name in dict.fromkeys(runtimes)}
    if len(set(defaults.values())) == 1:
        return next(iter(defaults.values()))
    return "per runtime: " + ", ".join(f"{n} {'on' if on else 'off'}"
                                       for n, on in defaults.items())


def run_parallel(args: argparse.Namespace) -> int:
    """The same plan on several systems (module docstring); every system is resolved before
    any work."""
    import sys

    from roofcast.app.commands.predict import parallel_options
    from roofcast.app.output_file import render
    from roofcast.app.parallel_args import placement
    from roofcast.app.parallel_report import systems_output
    from roofcast.parallel_api import predict_parallel, target_system
    from roofcast.predictor.errors import PredictionError

    if args.baseline is not None:
        raise PredictionError("--baseline names a device of --hw; with several systems the "
                              "first one is the baseline (reorder --system)")
    where = placement(args, "compare")
    if args.system is not None:
        targets = [target_system(s) for s in where["system"]]
    else:
        targets = [target_system(hw=h, devices=args.devices) for h in split_devices(args.hw)]
    options = parallel_options(args, "compare")
    preds = [predict_parallel(args.model, system=t, **options) for t in targets]
    tables, extra = systems_output(preds, args.format)
    sys.stdout.write(render(tables, args.format, extra))
    for note in extra.get("_notes", ()):
        print(f"roofcast compare: note: {note}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from roofcast import api
    from roofcast.app.parallel_args import is_parallel
    from roofcast.predictor.config import RunConfig
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.kernel_rows import NOTE_SEP

    if is_parallel(args):
        return run_parallel(args)
    if args.hw is None:
        raise PredictionError("give --hw A,B,C (devices; roofcast hw list), or --system A,B / "
                              "--hw A,B --devices N to compare multi-device systems")
    devices = split_devices(args.hw)
    estimator = chosen_estimator(args)
    model, batch = load_user_model(args)
    df = api.compare(model, devices, estimator=estimator, baseline=args.baseline,
                     allow_incomplete=args.allow_incomplete, **settings(args))
    config = RunConfig(**settings(args))
    runtimes = dict(zip(df["device"], df["runtime"], strict=True))
    table = pd.DataFrame(
        {
            "device": df["device"],
            "runtime": df["device"].map(runtimes),
            "time_ms": df["time_s"] * 1e3,
            "speedup": df["speedup"],
            "throughput_per_s": df["throughput_samples_per_s"],
            "memory_GiB": df["memory_bytes"] / GIB,
            "capacity_GiB": df["mem_capacity_bytes"] / GIB,
            "fits": df["fits"],
            "price_usd": df["price_usd"],
            "tdp_W": df["tdp_W"],
            "usd_per_throughput": df["usd_per_throughput"],
            "W_per_throughput": df["W_per_throughput"],
            "bound": df["dominant_bound"],
            "compute_ratio": df["compute_ratio"],
            "bandwidth_ratio": df["bandwidth_ratio"],
            "within_bounds": df["within_bounds"],
            "road": df["road"],
        }
    )
    notes = sorted({n for cell in df["peak_notes"] for n in cell.split(NOTE_SEP) if n})
    extra = {
        "model": str(df["model"].iloc[0]), "batch": batch, "precision": config.precision,
        "mode": config.mode, "runtime": runtime_summary(runtimes.values()),
        "estimator": estimator, "fusion": fusion_summary(config, runtimes.values()),
        "inter_op": config.inter_op, "baseline": str(df["baseline"].iloc[0]),
    }
    if args.format != "table":
        extra["notes"] = notes
    else:
        extra.update({f"note {i + 1}": n for i, n in enumerate(notes)})
    table = context_columns(table, args.format, estimator=estimator)
    emit({"devices": table}, args.format,
         extra={k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in extra.items()})
    return 0
