"""``roofcast sweep MODEL --hw A,B --batches 1,8,32``: devices x batches x precisions x modes;
``roofcast sweep SPEC.toml [--scheduler local|dask-local:N|dask://HOST:PORT] [--output DIR]``:
a design-space sweep from a spec file, written as a Parquet dataset.

MODEL: one row per (device, batch, precision, mode) cell: the runtime modelled on the device,
step time, speedup over the baseline device, throughput (samples/s), memory and whether it
fits, throughput per list-price dollar and per TDP watt (empty where the catalog has neither),
and the dominant bound. SPEC.toml: its grid (models, LLM configs, devices and ``system:``
entries, runtimes, batches, precisions, modes, plans, tokens) runs on the scheduler (``local``:
this process; ``dask-local:N``: N worker processes; ``dask://HOST:PORT``: a running Dask
scheduler) with a progress bar; cells stream to a Parquet folder (``--output``, default
``NAME.parquet``), then the summary per model x family x hardware and the Pareto front
(latency vs $ per sample/s or per token/s) are printed. A cell that cannot be predicted is a
row with ``error`` set; the sweep still completes.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from roofcast.app.argtypes import name_list, positive_int, positive_int_list
from roofcast.app.commands.compare import fusion_summary, runtime_summary, split_devices
from roofcast.app.commands.predict import GIB, add_execution_args, chosen_estimator
from roofcast.app.output import add_format_arg, context_columns, emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="predicted time over devices x batches x precisions x modes",
                       description=__doc__)
    p.add_argument("model", help="path to an .onnx file or a zoo model name (e.g. resnet50), "
                   "or a sweep spec file ending in .toml")
    p.add_argument("--hw", metavar="A,B,C",
                   help="comma-separated device ids (what-if specs BASE:key=value allowed); "
                   "required with MODEL, not with SPEC.toml (the file lists the devices)")
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
    model_only = {a.dest: (a.option_strings[0], a.default) for a in p._actions
                  if a.option_strings and a.dest not in ("help", "hw")}
    add_format_arg(p)
    g = p.add_argument_group("sweep spec file (SPEC.toml)")
    g.add_argument("--scheduler", metavar="S", help="local (default: in this process), "
                   "dask-local:N (a Dask LocalCluster of N workers) or dask://HOST:PORT")
    g.add_argument(
        "--output",
        metavar="DIR",
        help="Parquet dataset folder to write (default NAME.parquet; refused if it is not "
        "empty and not a sweep; written as the cells arrive, renamed into place at the end)",
    )
    g.add_argument("--cells-per-task", type=positive_int, metavar="N",
                   help=f"minimum cells per task (default {CELLS_PER_TASK_TEXT})")
    p.set_defaults(func=run, model_only=model_only)


CELLS_PER_TASK_TEXT = "sized so a task runs for at least 100 ms"
SPEC_ONLY = ("scheduler", "output", "cells_per_task")


def run(args: argparse.Namespace) -> int:
    from roofcast.predictor.errors import PredictionError

    if args.model.endswith(".toml"):
        if args.hw is not None:
            raise PredictionError("--hw is for `roofcast sweep MODEL`; a spec file lists its "
                                  "devices under [sweep] devices = [...]")
        given = [flag for dest, (flag, default) in args.model_only.items()
                 if getattr(args, dest) != default]
        if given:
            raise PredictionError(f"{', '.join(given)}: only for `roofcast sweep MODEL`; a spec "
                                  "file sets batches, precisions, modes, runtimes, estimator "
                                  "and dims under [sweep]")
        return run_spec(args)
    given = [f"--{k.replace('_', '-')}" for k in SPEC_ONLY if getattr(args, k) is not None]
    if given:
        raise PredictionError(f"{', '.join(given)}: only for a sweep spec file "
                              "(roofcast sweep SPEC.toml), not for roofcast sweep MODEL")
    if args.hw is None:
        raise PredictionError("roofcast sweep MODEL needs --hw A,B (device ids), or give a "
                              "sweep spec file ending in .toml")
    return run_model(args)


class ProgressBar:
    """A plain-text progress line on ``out`` (stderr): ``LABEL [####......] DONE/TOTAL cells
    PCT RATE cells/s ETA H:MM:SS`` (at 100 %: the elapsed time instead of the ETA).

    RATE = cells done / seconds since the first call (``progress(0, total)``: the sweep has
    been planned); ETA = cells left / RATE ("?" until a cell is done). On a terminal the line
    is redrawn in place (``\\r``) at most every ``redraw_s``; elsewhere (a log file, a CI job)
    one line is printed at the start, then at most one every ``interval_s`` (10 s), and one at
    100 %, so a sweep of hours logs a few hundred lines, not one per task. ``clock``: seconds,
    monotonic (tests pass a fake one)."""

    WIDTH = 30

    def __init__(self, out: TextIO, label: str, *, interval_s: float = 10.0,
                 redraw_s: float = 0.1, clock: Callable[[], float] = time.monotonic) -> None:
        self.out, self.label, self.clock = out, label, clock
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.every_s = redraw_s if self.tty else interval_s
        self.start: float | None = None
        self.last_s: float | None = None
        self.finished = False
        self.shown = 0  # length of the line on the terminal

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.start is None:
            self.start = now
        complete = done >= total
        if self.finished or (not complete and self.last_s is not None
                             and now - self.last_s < self.every_s):
            return
        self.last_s, self.finished = now, complete
        text = self.line(done, total, now - self.start)
        if self.tty:  # over the previous line: pad so a shorter line leaves no tail
            text, self.shown = "\r" + text.ljust(self.shown), len(text)
        self.out.write(text + ("\n" if not self.tty or complete else ""))
        self.out.flush()

    def line(self, done: int, total: int, elapsed_s: float) -> str:
        """The text of one line after ``elapsed_s`` seconds (class docstring)."""
        share = min(done / total, 1.0) if total else 1.0
        fill = int(share * self.WIDTH)
        rate = done / elapsed_s if elapsed_s > 0 and done else None
        speed = "- cells/s" if rate is None else f"{rate:,.0f} cells/s"
        if done >= total:
            when = f"in {_clock_text(elapsed_s)}"
        else:
            when = "ETA ?" if rate is None else f"ETA {_clock_text((total - done) / rate)}"
        return (f"{self.label} [{'#' * fill}{'.' * (self.WIDTH - fill)}] "
                f"{done:,}/{total:,} cells {share:4.0%} {speed} {when}")


def _clock_text(seconds: float) -> str:
    """``H:MM:SS`` of ``seconds`` (rounded up, so a short wait never reads 0:00:00)."""
    s = math.ceil(max(seconds, 0.0))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


#: the front's columns (``output.pareto_front``), in order; ``_dropped`` names the LLM ones for a
#: sweep without LLM cells and ``speedup`` without a baseline
FRONT_COLUMNS = ("model", "family", "mode", "hardware", "n_devices", "plan", "runtime", "batch",
                 "precision", "input_tokens", "output_tokens", "time_s", "cost_usd_per_rate",
                 "rate_unit", "throughput_samples_per_s", "tokens_per_s", "ttft_s", "tpot_s",
                 "memory_bytes", "speedup")
LLM_ONLY = ("input_tokens", "output_tokens", "tokens_per_s", "ttft_s", "tpot_s",
            "best_tokens_per_s_per_dollar")
BASELINE_ONLY = ("speedup", "best_speedup")


def run_spec(args: argparse.Namespace) -> int:
    from roofcast.predictor.sweeps.output import DatasetWriter
    from roofcast.predictor.sweeps.schedulers import run_sweep
    from roofcast.predictor.sweeps.spec import read_spec

    spec = read_spec(args.model)
    folder = Path(args.output or f"{spec.name}.parquet")
    # streamed: each task's cells go to the folder as they arrive (never all in this process)
    writer = DatasetWriter(folder, name=spec.name, spec=spec)
    result = run_sweep(spec, args.scheduler or "local", cells_per_task=args.cells_per_task,
                       progress=ProgressBar(sys.stderr, f"sweep {spec.name}"), sink=writer)
    extra = {"sweep": spec.name, "cells": result.n_cells, "errors": result.n_errors,
             "scheduler": result.scheduler, "elapsed_s": round(result.elapsed_s, 3),
             "cells_per_s": round(result.cells_per_s, 1),
             **({} if spec.baseline is None else {"baseline": spec.baseline}),
             "output": str(folder)}
    drop = _dropped(spec.llms, spec.baseline)
    tables = {"summary": result.summary, "pareto": result.front[list(FRONT_COLUMNS)]}
    emit({name: t[[c for c in t.columns if c not in drop]] for name, t in tables.items()},
         args.format, extra=extra)
    return 0


def _dropped(llms: tuple[str, ...], baseline: str | None) -> set[str]:
    """Columns that say nothing for this sweep: the LLM ones without LLM configs, the speedups
    without a baseline (NaN in every row)."""
    return {*(() if llms else LLM_ONLY), *(() if baseline else BASELINE_ONLY)}


def run_model(args: argparse.Namespace) -> int:
    import pandas as pd

    from roofcast import api
    from roofcast.app.model_ref import bind_dims
    from roofcast.predictor.config import RunConfig

    dims = {k: v for k, v in bind_dims(args.dim).items() if k != "batch"}
    df = api.sweep(args.model, split_devices(args.hw), args.batches,
                   precisions=args.precisions, modes=args.modes, dims=dims,
                   estimator=chosen_estimator(args), baseline=args.baseline,
                   runtime=args.runtime, fusion=args.fusion, inter_op=args.inter_op,
                   optimizer=args.optimizer, threads=args.threads,
                   allow_incomplete=args.allow_incomplete)
    runtimes = dict(zip(df["device"], df["runtime"], strict=False))
    table = pd.DataFrame({
        "device": df["device"], "runtime": df["device"].map(runtimes), "batch": df["batch"],
        "precision": df["precision"], "mode": df["mode"], "time_ms": df["time_s"] * 1e3,
        "speedup": df["speedup"], "throughput_per_s": df["throughput_samples_per_s"],
        "memory_GiB": df["memory_bytes"] / GIB, "fits": df["fits"],
        "throughput_per_dollar": df["throughput_per_usd"],
        "throughput_per_W": df["throughput_per_W"], "bound": df["dominant_bound"],
    })
    config = RunConfig(fusion=args.fusion, runtime=args.runtime)
    extra = {
        "model": str(df["model"].iloc[0]),
        "runtime": runtime_summary(runtimes.values()),
        "estimator": chosen_estimator(args),
        "fusion": fusion_summary(config, runtimes.values()),
        "inter_op": args.inter_op,
        "baseline": str(df["baseline"].iloc[0]),
    }
    table = context_columns(table, args.format, estimator=chosen_estimator(args))
    emit({"cells": table}, args.format,
         extra={k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in extra.items()})
    return 0
