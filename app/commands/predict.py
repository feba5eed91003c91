"""``roofcast predict MODEL --hw ID``: predicted time of one run of a model on one device.

Prints the per-op table (largest time first; ``--top N``), the totals by op type, by bound
(compute / memory / overhead) and by phase (forward / backward / update), and the memory
footprint with whether it fits the device. ``--mode train`` predicts one training step
(forward + backward + optimizer update) from the forward-only graph.

Several devices (``--system ID`` or ``--hw ID --devices N``, with ``--dp/--tp/--pp/--ep``,
``--micro-batches``, ``--zero``, ``--sequence-parallel``, ``--recompute``, ``--global-batch``):
one step of that plan — its time split into compute, exposed communication, pipeline bubble and
optimizer, each group's communication, each stage's micro-batch time, the memory of the most
loaded device and whether it fits (by how much it does not). MODEL may then also be a bundled
LLM config (``roofcast llm --list``). Without these flags nothing changes.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from roofcast.app.argtypes import positive_int, runtime_help, runtime_name, thread_count
from roofcast.app.output import (
    Table,
    add_format_arg,
    add_top_arg,
    context_columns,
    emit,
    top_rows,
)
from roofcast.app.parallel_args import add_training_plan_args
from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.predictor.config import MODES, OPTIMIZERS, PRECISIONS

if TYPE_CHECKING:
    import pandas as pd

    from roofcast.api import Prediction
    from roofcast.models import Model
    from roofcast.predictor.config import RunConfig

GIB = 2.0**30
#: the dim ``--seq`` binds on an ONNX model (the zoo's and the exporters' name)
SEQUENCE_DIM = "sequence"


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The model and its dims (``--dim``, ``--batch``): predict, compare and inspect."""
    p.add_argument("model", help="path to an .onnx file or a zoo model name (e.g. resnet50)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="bind a symbolic dim of the model: sequence=128, or INPUT:AXIS=N "
                        "(repeatable; a name the model lacks is an error listing its dims)")
    p.add_argument("--batch", type=positive_int, metavar="N",
                   help="batch size (shorthand for --dim batch=N; default 1)")


def add_run_args(p: argparse.ArgumentParser) -> None:
    """Options shared by predict and compare: the model, dims, precision, mode, then
    ``add_execution_args``."""
    add_model_args(p)
    p.add_argument("--precision", metavar="P",
                   help=f"compute precision: {'|'.join(PRECISIONS)} (default fp32; an LLM "
                        f"config on several devices: bf16)")
    p.add_argument("--mode", default="infer", metavar="MODE",
                   help=f"{'|'.join(MODES)}: inference or one training step (default infer)")
    add_execution_args(p)


def add_execution_args(p: argparse.ArgumentParser) -> None:
    """Options of how each cell runs, shared by predict, compare and sweep: optimizer, threads,
    inter-op, runtime and fusion, estimator, allow-incomplete."""
    p.add_argument("--optimizer", default="adam", metavar="OPT",
                   help=f"optimizer of a training step: {'|'.join(OPTIMIZERS)} (default adam)")
    p.add_argument("--threads", type=thread_count, metavar="N",
                   help="CPU threads (CPU devices only; default all cores)")
    p.add_argument("--inter-op", action="store_true",
                   help="let independent ops run concurrently (critical-path time)")
    add_runtime_args(p)
    p.add_argument("--estimator", metavar="NAME",
                   help=f"per-op estimator: analytical ({GRAPH_ESTIMATOR}, the default on "
                        "one device; roofline+eff on several, "
                        "roofline, ...) or learned/auto (an unknown name lists them all)")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="predict even when some ops have no cost (their time is left out)")


def chosen_estimator(args: argparse.Namespace) -> str:
    """The one-device estimator: ``--estimator`` or the default (``GRAPH_ESTIMATOR``); the
    multi-device path passes None on to the parallel engine's own default."""
    return args.estimator or GRAPH_ESTIMATOR


def add_runtime_args(p: argparse.ArgumentParser) -> None:
    """``--runtime NAME`` and ``--fusion``/``--no-fusion`` (None when neither is given: the
    runtime's own default)."""
    p.add_argument("--runtime", type=runtime_name, metavar="NAME", help=runtime_help())
    p.add_argument("--fusion", action=argparse.BooleanOptionalAction, default=None,
                   help="apply (or not) the runtime's graph-optimiser fusions (default: the "
                        "runtime's own, its fusion_default in `roofcast runtimes show NAME`)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predicted time, bottlenecks and memory on one device",
                       description=__doc__)
    add_run_args(p)
    p.add_argument("--hw", metavar="ID",
                   help="device id, name or what-if spec BASE:key=value,... (roofcast hw list)")
    add_top_arg(p, "kernels")
    p.add_argument("--max-batch", action="store_true",
                   help="also find the largest batch that fits the device memory (re-imports)")
    add_format_arg(p)
    add_training_plan_args(p, several=False)
    p.set_defaults(func=run)


def user_dim_specs(args: argparse.Namespace) -> list[str]:
    """The --dim specs plus ``batch=N`` for an explicit --batch: the bindings the user asked
    for, each of which must name a dim of the model."""
    from roofcast.app.model_ref import bind_dims

    bind_dims(args.dim, args.batch)  # --batch against --dim batch=: one value
    batch = [] if args.batch is None else [f"batch={args.batch}"]
    return [*args.dim, *batch]


def load_user_model(args: argparse.Namespace) -> tuple[Model, int]:
    """The model with the user's dims (batch 1 unless told), and its batch: the bound
    ``batch`` dim, 1 for a model without one."""
    from roofcast.app.model_ref import bind_dims
    from roofcast.graph_import.dims import BATCH_DIM, DEFAULT_BATCH
    from roofcast.models import load_model

    model = load_model(args.model, {**bind_dims(args.dim, args.batch), **seq_dim(args)})
    return model, int(model.dims.get(BATCH_DIM, DEFAULT_BATCH))


def seq_dim(args: argparse.Namespace) -> dict[str, int]:
    """``--seq N`` on an ONNX model: its ``sequence`` dim (as on several devices); one value
    when ``--dim sequence=`` gives it too."""
    from roofcast.app.model_ref import bind_dims
    from roofcast.predictor.errors import PredictionError

    seq = getattr(args, "seq", None)
    if seq is None:
        return {}
    given = bind_dims(args.dim).get(SEQUENCE_DIM)
    if given is not None and given != seq:
        raise PredictionError(f"--seq {seq} contradicts --dim {SEQUENCE_DIM}={given}; give one "
                              "of them")
    return {SEQUENCE_DIM: seq}


def settings(args: argparse.Namespace) -> dict:
    """The run's execution settings as ``roofcast.api`` keywords (``roofcast.api.SETTINGS``)."""
    return {"precision": args.precision or "fp32", "mode": args.mode, "threads": args.threads,
            "inter_op": args.inter_op, "fusion": args.fusion, "optimizer": args.optimizer,
            "runtime": args.runtime}


def execution(config: RunConfig, hw) -> dict:
    """What the run modelled besides the estimator: the runtime resolved for ``hw``'s kind
    (``predictor.runtimes.resolve_runtime``: a runtime that does not run there is refused,
    naming those that do) and the fusion setting in force (the runtime's default when the
    run gave none)."""
    from roofcast.predictor.runtimes import resolve_runtime

    prof = resolve_runtime(config.runtime, hw.kind)
    return {"runtime": prof.name,
            "fusion": prof.fusion_default if config.fusion is None else config.fusion}


def op_table(pred: Prediction, top: int | None) -> pd.DataFrame:
    """One row per kernel, slowest first; ``top``: only the N slowest."""
    import pandas as pd

    df = pred.per_op
    total = pred.total_s
    out = pd.DataFrame({
        "node": df["fused_nodes"], "op_type": df["op_type"], "phase": df["phase"],
        "kernel": df["kernel"], "engine": df["engine"], "gflop": df["flops"] / 1e9,
        "mb_moved": (df["bytes_read"] + df["bytes_written"]) / 1e6,
        "intensity": df["intensity_flop_per_byte"], "time_us": df["time_s"] * 1e6,
        "compute_us": df["compute_s"] * 1e6, "memory_us": df["memory_s"] * 1e6,
        "overhead_us": df["overhead_s"] * 1e6, "bound": df["bound"],
        "lower_us": df["lower_s"] * 1e6, "upper_us": df["upper_s"] * 1e6,
        "share": df["time_s"] / total if total > 0 else 0.0,
    })
    if "predictor" in df.columns:  # learned / auto: which predictor timed the row, OOD flags
        out["predictor"] = df["predictor"].to_numpy()
        out["ood"] = df["ood"].to_numpy()
        out["ood_reason"] = df["ood_reason"].to_numpy()
    out = out.sort_values("time_us", ascending=False, kind="stable", ignore_index=True)
    return out.head(top) if top else out


def breakdown_table(df: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({
        df.columns[0]: df.iloc[:, 0], "time_ms": df["time_s"] * 1e3, "share": df["share"],
        "kernels": df["kernels"], "gflop": df["flops"] / 1e9, "mb_moved": df["bytes"] / 1e6,
    })


def critical_path_table(pred: Prediction, top: int | None) -> pd.DataFrame:
    """The kernels on the critical path (inter-op), in execution order; ``top``: the slowest N."""
    import pandas as pd

    df = pred.per_op
    phase_of = {"F": "forward", "B": "backward", "U": "update"}
    time_of = df.groupby(["phase", "node"])["time_s"].sum()
    update_time = df[df["phase"] == "update"].set_index("key")["time_s"]
    rows = []
    for step in pred.critical_path:
        kind, name = step.split(":", 1)
        phase = phase_of[kind]
        t = update_time.get(name, 0.0) if kind == "U" else time_of.get((phase, name), 0.0)
        if t > 0:
            rows.append({"phase": phase, "node": name, "time_us": t * 1e6})
    out = pd.DataFrame(rows, columns=["phase", "node", "time_us"])
    return out.nlargest(top, "time_us").sort_index() if top else out


def memory_table(pred: Prediction, hw) -> pd.DataFrame:
    import pandas as pd

    m = pred.memory
    parts = [("weights", m.weights_bytes), ("activations (peak)", m.activations_bytes),
             ("gradients", m.gradients_bytes), ("optimizer state", m.optimizer_bytes),
             ("total", m.total_bytes), ("device capacity", float(hw.mem_capacity_bytes))]
    if pred.config.mode == "train":
        parts.insert(2, ("  of which saved for backward", m.saved_activations_bytes))
    return pd.DataFrame({"component": [p[0] for p in parts], "GiB": [p[1] / GIB for p in parts]})


def run(args: argparse.Namespace) -> int:
    from roofcast import api
    from roofcast.app.parallel_args import is_parallel
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.memory.batch import max_batch_that_fits

    if is_parallel(args):
        return run_parallel(args)
    if args.hw is None:
        raise PredictionError("give --hw ID (one device; roofcast hw list), or --system ID / "
                              "--hw ID --devices N for several")
    hw = api.device(args.hw)
    estimator = chosen_estimator(args)
    model, batch = load_user_model(args)
    pred = api.predict(model, hw, estimator=estimator, allow_incomplete=args.allow_incomplete,
                       **settings(args))
    resolved = execution(pred.config, hw)
    tables = _tables(pred, hw, args, runtime=resolved["runtime"], estimator=estimator)
    extra = _summary(pred, model.graph, hw, batch, estimator, resolved)
    if args.max_batch:
        extra["max_batch_that_fits"] = max_batch_that_fits(model.graph_at, hw, pred.config)
    _emit(pred, tables, extra, args.format)
    return 0


def _tables(pred: Prediction, hw, args: argparse.Namespace, runtime: str,
            estimator: str) -> dict:
    """predict's tables: the kernels (``--top``), the breakdowns, memory, the critical path."""
    top = top_rows(args)
    tables = {
        "ops": Table.of(context_columns(op_table(pred, None), args.format,
                                        runtime=runtime, estimator=estimator)).head(top),
        "by_op_type": breakdown_table(pred.by_op_type),
        "by_bound": breakdown_table(pred.by_bound),
        "by_phase": breakdown_table(pred.by_phase),
        "memory": memory_table(pred, hw),
    }
    if pred.critical_path:
        full, shown = critical_path_table(pred, None), Table.of(critical_path_table(pred, top))
        tables["critical_path"] = (replace(shown, total_rows=len(full))
                                   if len(shown.rows) < len(full) else shown)
    return tables


def _summary(pred: Prediction, graph, hw, batch: int, estimator: str, resolved: dict) -> dict:
    """predict's key/value summary: the run's settings, totals, memory and completeness."""
    config = pred.config
    extra: dict = {
        "model": graph.name, "device": hw.id, "dims": dict(graph.dims), "batch": batch,
        "precision": config.precision, "mode": config.mode, "runtime": resolved["runtime"],
        "estimator": estimator, "road": pred.road, "fusion": resolved["fusion"],
        "inter_op": config.inter_op,
        "total_ms": pred.total_s * 1e3,
        "critical_path_ms": None if pred.critical_path_s is None else pred.critical_path_s * 1e3,
        "time_ms": pred.time_s * 1e3,
        # an all-empty model (a 0-size dim) does no work: 0 s, and no throughput to speak of
        "throughput_samples_per_s": batch / pred.time_s if pred.time_s > 0 else None,
        "memory_GiB": pred.memory.total_bytes / GIB, "fits": pred.memory.fits,
        "complete": not (graph.unresolved or graph.unsupported),
    }
    if config.mode == "train":
        extra["optimizer"] = config.optimizer
    if "e2e_s" in pred.summary:  # a learned road answered (learned, auto, best-measured's part)
        extra.update(_learned_summary(pred))
    return extra


def _learned_summary(pred: Prediction) -> dict:
    """The learned estimator's end-to-end summary (same model as the ops) and its folder."""
    from roofcast.predictor.learned.estimator import model_folder

    s = pred.summary
    return {"e2e_estimate_ms": s["e2e_s"] * 1e3, "e2e_lower_ms": s["e2e_lower_s"] * 1e3,
            "e2e_upper_ms": s["e2e_upper_s"] * 1e3, "interval": s["interval_method"],
            "ops_learned": s["ops_learned"], "ops_analytical": s["ops_analytical"],
            "out_of_distribution": s["ood"], "ood_reason": s["ood_reason"],
            "learned_model": str(model_folder())}  # which trained model answered


def _emit(pred: Prediction, tables: dict, extra: dict, fmt: str) -> None:
    """Print the tables and summary; the notes go in the document, or to stderr for a table."""
    if fmt != "table":
        extra["notes"] = list(pred.notes)
    emit(tables, fmt, extra={k: _plain(v) for k, v in extra.items()})
    if fmt == "table":
        for note in pred.notes:
            print(f"roofcast predict: note: {note}", file=sys.stderr)


#: predict's one-device options refused on the multi-device path.
ONE_DEVICE_OPTIONS = ("batch", "max_batch", "inter_op", "threads", "allow_incomplete")


def parallel_options(args: argparse.Namespace, command: str) -> dict:
    """``roofcast.parallel_api.predict_parallel`` keywords of a multi-device predict/compare
    (placement aside): the plan flags given, the global batch, mode, estimator and the
    model's settings; a one-device-only flag is refused."""
    from roofcast.app.model_ref import bind_dims
    from roofcast.app.parallel_args import one_device_only, plan_flags_given

    one_device_only(args, command, ONE_DEVICE_OPTIONS)
    options = {**plan_flags_given(args), "global_batch": args.global_batch, "mode": args.mode,
               "estimator": args.estimator, "precision": args.precision,
               "optimizer": args.optimizer, "runtime": args.runtime}
    if args.seq is not None:
        options["seq_tokens"] = args.seq
    dims = bind_dims(args.dim)
    if dims:
        options["dims"] = dims
    if args.fusion is not None:
        options["fusion"] = args.fusion
    return options


def run_parallel(args: argparse.Namespace) -> int:
    """One step of a plan on several devices (module docstring)."""
    from roofcast.app.output_file import render
    from roofcast.app.parallel_args import placement
    from roofcast.app.parallel_report import step_output
    from roofcast.parallel_api import predict_parallel

    where = placement(args, "predict")
    options = parallel_options(args, "predict")
    pred = predict_parallel(args.model, **where, **options)
    tables, extra = step_output(pred, args.format)
    sys.stdout.write(render(tables, args.format, extra))
    for note in extra.get("_notes", ()):
        print(f"roofcast predict: note: {note}", file=sys.stderr)
    return 0


def _plain(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
