"""``roofcast advise MODEL --hw ID``: the predicted-best run settings of a model on a device.

Searches intra-op threads (CPUs), inter-op parallelism, batch size (--objective throughput),
precision and graph optimisation level (runtimes with graph-optimiser fusions) with the
predictor, and prints the ranked settings with their predicted gain over the defaults of the
runtime that runs on the device (--runtime, else the device kind's default), the
recommendation and the reasons computed from the predictions. --verify (--hw local only)
measures the recommended and the default settings with ONNX Runtime on this machine and prints
predicted against measured gain.
"""

from __future__ import annotations

import argparse
import sys

from roofcast.app.argtypes import OneOf, name_list, positive_int, runtime_help, runtime_name
from roofcast.app.commands.predict import load_user_model
from roofcast.app.output import add_format_arg, add_top_arg, context_columns, emit, top_rows
from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.predictor.config import MODES


def objectives() -> tuple[str, ...]:
    from roofcast.api import OBJECTIVES

    return OBJECTIVES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("advise", help="best threads / batch / precision / optimisation settings",
                       description=__doc__)
    p.add_argument("model", help="path to an .onnx file or a zoo model name (e.g. resnet50)")
    p.add_argument("--hw", required=True, metavar="ID",
                   help="device id (roofcast hw list); 'local' after `roofcast hw calibrate`")
    p.add_argument("--objective", type=OneOf(objectives, "objective"), default="latency",
                   metavar="GOAL",
                   help="latency (batch fixed; the default) or throughput (samples/s; batch "
                        "searched)")
    p.add_argument("--batch", type=positive_int, metavar="N",
                   help="your batch size: the default setting's (and the latency objective's); "
                        "default 1")
    p.add_argument("--max-batch", type=positive_int, default=64, metavar="N",
                   help="largest batch tried for --objective throughput (default 64)")
    p.add_argument("--precisions", type=name_list, default=None, metavar="P[,P...]",
                   help="precisions to consider (default fp32,tf32,fp16,bf16; only those the "
                        "device runs are kept)")
    p.add_argument("--mode", choices=MODES, default="infer",
                   help="inference or training step (training: batch against memory)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="bind a symbolic dim other than the batch, e.g. sequence=128")
    p.add_argument("--estimator", default=GRAPH_ESTIMATOR, metavar="NAME",
                   help=f"predictor (default {GRAPH_ESTIMATOR}: roofcast/defaults.py)")
    p.add_argument("--runtime", type=runtime_name, metavar="NAME", help=runtime_help())
    add_top_arg(p, "settings (the default and the recommendation always shown)", default=10)
    p.add_argument("--verify", action="store_true",
                   help="measure the recommended and default settings with ONNX Runtime "
                        "(--hw local only)")
    p.add_argument("--repeats", type=positive_int, default=5, metavar="N",
                   help="timed runs per setting for --verify (default 5)")
    p.add_argument("--warmup", type=positive_int, default=1, metavar="N",
                   help="untimed runs per setting for --verify (default 1)")
    add_format_arg(p)
    p.set_defaults(func=run)


def check_measured_runtime(runtime: str) -> None:
    """``--verify`` measures with ONNX Runtime's CPU provider: a prediction for another runtime
    cannot be checked against it (PredictionError saying what to change)."""
    from roofcast.predictor.errors import PredictionError
    from roofcast.training_data.collectors.rows import RUNTIME_OF_PROVIDER

    measured = RUNTIME_OF_PROVIDER["CPUExecutionProvider"]
    if runtime != measured:
        raise PredictionError(f"--verify measures the run with {measured}, not {runtime}: drop "
                              f"--runtime {runtime} (or --verify) to check the advice")


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from roofcast import api
    from roofcast.app.model_ref import resolve_model_path
    from roofcast.predictor.advisor_verify import check_local, verify
    from roofcast.predictor.runtimes import resolve_runtime

    hw = api.device(args.hw)
    runtime = resolve_runtime(args.runtime, hw.kind).name  # refused here, before any work
    if args.verify:
        check_local(hw.id)  # fail before any work
        check_measured_runtime(runtime)
    model, batch = load_user_model(args)
    dims = {k: v for k, v in model.dims.items() if k != "batch"}  # bound once, at import
    advice = api.advise(model, hw, args.objective, batch=batch, max_batch=args.max_batch,
                        precisions=args.precisions, modes=(args.mode,),
                        estimator=args.estimator, runtime=args.runtime)
    tables = {"settings": context_columns(advice.shown(top_rows(args)), args.format,
                                          runtime=runtime, estimator=advice.estimator),
              "reasons": pd.DataFrame({"reason": list(advice.reasons)})}
    extra = {"model": advice.model, "device": advice.device, "objective": advice.objective,
             "runtime": runtime, "estimator": advice.estimator, "default": advice.default.label(),
             "recommended": advice.recommended.label(),
             "predicted_gain": advice.predicted_gain}
    if advice.notes:
        tables["notes"] = pd.DataFrame({"note": list(advice.notes)})
    if args.verify:
        if args.format == "table":
            print(f"roofcast advise: measuring {advice.default.label()} and "
                  f"{advice.recommended.label()} ({args.repeats} repeats)…", file=sys.stderr)
        v = verify(advice, resolve_model_path(args.model), dims, repeats=args.repeats,
                   warmup=args.warmup)
        tables["verify"] = v.table
        if v.notes:
            tables["verify_notes"] = pd.DataFrame({"note": list(v.notes)})
        extra.update({"measured_gain": v.measured_gain,
                      "measured_noise": v.noise,
                      "session_noise": v.session_noise,
                      "gain_error": v.error,
                      "at_least_as_fast_as_default": bool(v.at_least_as_fast),
                      "load_average": f"{v.load_before:.2f} before, {v.load_after:.2f} after"})
    if args.format == "table":
        reasons = tables.pop("reasons")
        emit(tables, args.format, extra=extra)
        print("\n== reasons ==")
        print("\n".join(f"- {r}" for r in reasons["reason"]))
    else:
        emit(tables, args.format, extra=extra)
    return 0
