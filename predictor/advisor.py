"""Configuration advisor: the predicted-best run settings of a model on a device, with reasons.

``advise(graph_loader, hw, objective, ...)`` searches what a user controls without touching the
model — intra-op threads (CPUs), inter-op parallelism, batch (throughput objective), precision
(``runnable_precisions``), graph optimisation (only for a runtime with graph-optimiser fusions;
ONNX Runtime's opt level ``all``/``basic``) — and ranks it against the defaults of the runtime
that runs on the device (``default_setting``). Step time: ``run_overhead_s`` + the sequential
sum ``W``, or with inter-op on a CPU ``max(L, W_c)`` (``packed_time``), ``L`` elsewhere.
Gain: latency ``time_default / time``; throughput ``throughput / throughput_default``. The
recommendation (``pick_recommended``): among fitting settings within ``TIE`` of the best gain,
the fewest changes from the default; the default when no gain reaches ``MIN_GAIN``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.graph_import.types import Graph
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.advisor_cells import (
    MIN_GAIN,
    PER_OP_COLUMNS,
    Cell,
    packed_time,
    predict_cells,
    run_overhead_s,
    step_time,
)
from roofcast.predictor.advisor_reasons import reasons_for
from roofcast.predictor.config import MODES, PRECISIONS, RunConfig, run_config
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import as_estimator, is_learned
from roofcast.predictor.precision import peak_dtype
from roofcast.predictor.runtimes import resolve_runtime

OBJECTIVES: tuple[str, ...] = ("latency", "throughput")
#: settings within this relative gain of the best count as ties (the simplest one is chosen).
TIE = 0.02
#: CPU thread counts are listed one by one up to this many units, else powers of two + units.
ALL_THREADS_UP_TO = 16
#: ONNX Runtime graph optimisation level of each fusion setting (None: the runtime has no
#: graph-optimiser fusions, so there is no such setting: "n/a", as in the training data).
OPT_LEVEL = {True: "all", False: "basic", None: "n/a"}
#: op types that mark a model as quantised (ONNX Runtime runs them as int8 on CPU).
QUANTISED_OPS: frozenset[str] = frozenset({
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
    "QLinearMatMul", "MatMulInteger", "ConvInteger", "QLinearAdd", "QLinearMul",
    "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QAttention", "QGemm",
})
TABLE_COLUMNS: tuple[str, ...] = (
    "rank", "setting", "intra_threads", "inter_op", "inter_op_threads", "batch", "precision",
    "opt_level", "fusion", "mode", "time_ms", "sequential_ms", "critical_path_ms",
    "throughput_samples_per_s", "gain", "memory_MB", "fits", "dominant_bound",
    "compute_share", "memory_share", "overhead_share", "is_default", "recommended",
)

GraphLoader = Callable[[int], Graph]


@dataclass(frozen=True)
class Setting:
    """One run configuration the advisor considers (see module docstring)."""

    threads: int | None
    inter_op: bool
    batch: int
    precision: str = "fp32"
    fusion: bool | None = True
    mode: str = "infer"
    inter_op_threads: int = 1

    @property
    def opt_level(self) -> str:
        return OPT_LEVEL[self.fusion]

    def label(self) -> str:
        """``intra=T inter=parallel×C batch=B fp32 opt=all`` on a CPU; elsewhere (``threads``
        None: the framework picks, there is no thread setting) ``inter=parallel batch=B ...``."""
        cpu = self.threads is not None
        intra = f"intra={self.threads} " if cpu else ""
        inter = (f"parallel×{self.inter_op_threads}" if cpu else "parallel") if self.inter_op \
            else "sequential"
        opt = "" if self.fusion is None else f" opt={self.opt_level}"
        return (f"{intra}inter={inter} batch={self.batch} {self.precision}{opt}"
                + (" train" if self.mode == "train" else ""))

    def run_config(self, graph: Graph) -> RunConfig:
        """The RunConfig of this setting for ``graph`` (imported at ``self.batch``)."""
        return run_config(graph, precision=self.precision, mode=self.mode,
                          threads=self.threads, inter_op=self.inter_op, fusion=self.fusion)


@dataclass(frozen=True)
class Advice:
    """The ranked settings, the default, the recommendation and why.

    ``table``: one row per setting (``TABLE_COLUMNS``), best first. ``cells``: predicted per-op
    frames keyed by (batch, precision, mode, fusion, threads) for the reasons and the app's
    roofline trajectories.
    """

    model: str
    device: str
    device_kind: str
    units: int
    objective: str
    estimator: str
    table: pd.DataFrame
    default: Setting
    recommended: Setting
    reasons: tuple[str, ...]
    notes: tuple[str, ...] = ()
    cells: Mapping[tuple, Cell] = field(default_factory=dict, repr=False)
    runtime: str = ""

    @property
    def predicted_gain(self) -> float:
        """Gain of the recommended setting over the default (objective's measure)."""
        row = self.table[self.table["recommended"]]
        return float(row["gain"].iloc[0])

    def row(self, setting: Setting) -> pd.Series:
        """The table row of ``setting``."""
        match = self.table[self.table["setting"] == setting.label()]
        if match.empty:
            raise PredictionError(f"setting {setting.label()!r} is not in the advice table")
        return match.iloc[0]

    def cell(self, setting: Setting) -> Cell:
        return self.cells[cell_key(setting)]

    def shown(self, top: int | None = None) -> pd.DataFrame:
        """The table without internal columns: the ``top`` best rows, always keeping the
        default and the recommended rows."""
        df = self.table
        if top is not None and top < len(df):
            df = df[(df["rank"] <= top) | df["is_default"] | df["recommended"]]
        return df[list(TABLE_COLUMNS)].reset_index(drop=True)


def cell_key(s: Setting) -> tuple:
    return (s.batch, s.precision, s.mode, s.fusion, s.threads)


# ----------------------------------------------------------------------------- search space
def thread_candidates(hw) -> list[int | None]:
    """Intra-op thread counts to try (module docstring); ``[None]`` for non-CPU devices."""
    if hw.kind != "cpu":
        return [None]
    units = int(hw.units)
    if units <= ALL_THREADS_UP_TO:
        return list(range(1, units + 1))
    powers = [2**k for k in range(int(math.log2(units)) + 1)]
    return sorted(set(powers) | {units})


def batch_candidates(objective: str, batch: int, max_batch: int) -> list[int]:
    """The user's batch (latency), or powers of two up to ``max_batch`` plus it (throughput)."""
    if objective == "latency":
        return [batch]
    if max_batch < 1:
        raise PredictionError(f"max_batch must be >= 1, got {max_batch}")
    powers = [2**k for k in range(int(math.log2(max_batch)) + 1)]
    return sorted(set(powers) | {batch})


def is_quantised(graph: Graph) -> bool:
    return any(node.op_type in QUANTISED_OPS for node in graph.ops())


def runnable_precisions(graph: Graph, hw, requested: Sequence[str],
                        keep_default: str = "fp32") -> tuple[list[str], list[str]]:
    """(precisions to search, notes on the ones left out).

    CPU (ONNX Runtime's CPU provider): an fp32 graph runs in fp32 — its fp16/bf16 kernels cover
    few ops and a conversion is a model change, not a setting; int8 only when the model is
    already quantised (then it is the model's own precision). Other devices: a precision is kept
    when the device has a native matrix unit for it (``hw.peak`` without a fallback note);
    ``keep_default`` (the default setting's precision) is always kept.
    """
    bad = [p for p in requested if p not in PRECISIONS]
    if bad:
        raise PredictionError(f"unknown precision(s) {bad}; choose from {', '.join(PRECISIONS)}")
    notes = []
    if hw.kind == "cpu":
        own = "int8" if is_quantised(graph) else "fp32"
        keep = [own]
        dropped = [p for p in requested if p != own]
        if dropped:
            notes.append(
                f"precisions {', '.join(dropped)} left out: on a CPU, ONNX Runtime runs this "
                f"{'quantised' if own == 'int8' else 'fp32'} model as {own}; another precision "
                "needs a converted or quantised model, not a run setting")
        return keep, notes
    keep = [keep_default]
    for p in requested:
        if p == keep_default:
            continue
        look = hw.peak("matrix", peak_dtype("matrix", p))
        if look.note:
            notes.append(f"precision {p} left out: {hw.id} has no native {p} matrix unit "
                         f"({look.note})")
        else:
            keep.append(p)
    if len(keep) > 1:
        notes.append(f"precisions other than {keep_default} ({', '.join(keep[1:])}) assume the "
                     "model is converted or quantised for them and still accurate enough; "
                     "validate accuracy before adopting one")
    return keep, notes


def default_setting(hw, batch: int, precision: str, profile=None) -> Setting:
    """The runtime's defaults: intra-op = units (physical cores) on a CPU, sequential, its
    graph-optimiser fusions on (ONNX Runtime's opt level all; ``fusion`` None when the
    runtime ``profile`` has none)."""
    fusion = True if profile is None or profile.fusion_patterns else None
    return Setting(threads=int(hw.units) if hw.kind == "cpu" else None, inter_op=False,
                   batch=batch, precision=precision, fusion=fusion, mode="infer")


def resolve_estimator(estimator: Any) -> tuple[Any, list[str]]:
    """The estimator object to use and a note when a learned one (``auto``/``learned``) has no
    trained model (then the analytical ``time-roofline`` is used, and the note says so)."""
    est = as_estimator(estimator)
    if not is_learned(est):
        return est, []
    try:
        est.model()
    except PredictionError as exc:
        fallback = est.fallback_estimator()  # its analytical road, named in the note
        return fallback, [f"estimator {est.name!r} unavailable ({exc}); used {fallback.name}"]
    return est, []


def settings_of(cells: Mapping[tuple, Cell], hw) -> list[Setting]:
    """All settings over the cells: each thread count sequential, plus inter-op parallel where
    the cores hold at least two concurrent ops (CPU) or always (other devices)."""
    out = []
    for batch, precision, mode, fusion, t in cells:
        out.append(Setting(t, False, batch, precision, fusion, mode))
        conc = int(hw.units) // t if (hw.kind == "cpu" and t) else 0
        if hw.kind != "cpu":
            out.append(Setting(t, True, batch, precision, fusion, mode, inter_op_threads=2))
        elif conc >= 2:
            out.append(Setting(t, True, batch, precision, fusion, mode, inter_op_threads=conc))
    return out


def _shares(per_op: pd.DataFrame) -> dict[str, float]:
    total = float(per_op["time_s"].sum())
    by = per_op.groupby("bound")["time_s"].sum()
    return {f"{b}_share": (float(by.get(b, 0.0)) / total if total > 0 else 0.0)
            for b in ("compute", "memory", "overhead")}


def build_table(cells: Mapping[tuple, Cell], settings: Sequence[Setting], default: Setting,
                objective: str, hw) -> pd.DataFrame:
    """One row per setting with times, throughput, gain over ``default`` and shares, ranked."""
    cap = float(hw.mem_capacity_bytes)
    records = []
    for s in settings:
        cell = cells[cell_key(s)]
        t = step_time(cell, s.inter_op, s.inter_op_threads, hw)
        shares = _shares(cell.per_op)
        dominant = max(("compute", "memory", "overhead"), key=lambda b: shares[f"{b}_share"])
        records.append({
            "setting": s.label(), "intra_threads": s.threads, "inter_op": s.inter_op,
            "inter_op_threads": s.inter_op_threads, "batch": s.batch,
            "precision": s.precision, "opt_level": s.opt_level, "fusion": s.fusion,
            "mode": s.mode, "time_ms": t * 1e3, "sequential_ms": cell.sequential_s * 1e3,
            "critical_path_ms": cell.critical_path_s * 1e3,
            "throughput_samples_per_s": s.batch / t if t > 0 else math.inf,
            "memory_MB": cell.memory_bytes / 1e6, "fits": cell.memory_bytes <= cap,
            "dominant_bound": dominant, **shares, "is_default": s == default,
            "_setting": s,
        })
    df = pd.DataFrame.from_records(records)
    base = df[df["is_default"]]
    if base.empty:
        raise PredictionError(f"the default setting {default.label()} is not in the search "
                              "space; include its batch, precision and mode")
    b = base.iloc[0]
    if objective == "latency":
        df["gain"] = b["time_ms"] / df["time_ms"]
    else:
        df["gain"] = df["throughput_samples_per_s"] / b["throughput_samples_per_s"]
    # rank: fitting settings first, larger gain first; ties keep the default first
    df = df.sort_values(["fits", "gain", "is_default"], ascending=[False, False, False],
                        kind="stable").reset_index(drop=True)
    df.insert(0, "rank", np.arange(1, len(df) + 1))
    pick = pick_recommended(df, default)
    df["recommended"] = [s == pick for s in df["_setting"]]
    return df


def changes_from(s: Setting, default: Setting) -> int:
    """How many fields of ``s`` differ from the default (a simpler change is preferred)."""
    return sum(getattr(s, f) != getattr(default, f)
               for f in ("threads", "inter_op", "batch", "precision", "fusion", "mode"))


def pick_recommended(ranked: pd.DataFrame, default: Setting) -> Setting:
    """The recommendation: among fitting settings within ``TIE`` of the best predicted gain, the
    one with the fewest changes from the default (then the smaller batch, then the larger gain);
    the default when that gain is below ``MIN_GAIN``."""
    fit = ranked[ranked["fits"]]
    if fit.empty:
        return default
    best = float(fit["gain"].max())
    if best < MIN_GAIN:
        return default
    near = fit[(fit["gain"] >= best / (1 + TIE)) & (fit["gain"] >= MIN_GAIN)]
    order = sorted(zip(near["_setting"], near["gain"], strict=True),
                   key=lambda sg: (changes_from(sg[0], default), sg[0].batch, -sg[1]))
    return order[0][0]


# ----------------------------------------------------------------------------- entry point
def advise(graph_loader: GraphLoader, hw, objective: str = "latency", *, batch: int = 1,
           max_batch: int = 64, precisions: Sequence[str] | None = None,
           modes: Sequence[str] = ("infer",), estimator: Any = GRAPH_ESTIMATOR,
           fusions: Sequence[bool | None] = (True, False), runtime: str | None = None) -> Advice:
    """Search and rank run settings of the model ``graph_loader(batch)`` on ``hw`` (module
    docstring). ``graph_loader(batch)`` imports the model at that batch, its other dims bound
    by the import; ``hw``: catalog id, what-if spec or HardwareSpec; ``estimator``: a name or
    an estimator object; ``runtime``: the execution profile (None: the device kind's
    default); precisions it does not run are left out with a note."""
    hw = get_device(hw)
    profile = resolve_runtime(runtime, hw.kind)
    if objective not in OBJECTIVES:
        raise PredictionError(f"objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    bad_modes = [m for m in modes if m not in MODES]
    if bad_modes or not modes:
        raise PredictionError(f"modes {list(modes)}: choose from {', '.join(MODES)}")
    if batch < 1:
        raise PredictionError(f"batch must be >= 1, got {batch}")
    est, notes = resolve_estimator(estimator)
    batches = batch_candidates(objective, batch, max_batch)
    graphs = {b: graph_loader(b) for b in batches}
    g0 = graphs[batch]
    if objective == "throughput" and len(batches) > 1:
        f1 = sum(n.cost.flops for n in graphs[batches[0]].ops() if n.cost)
        f2 = sum(n.cost.flops for n in graphs[batches[-1]].ops() if n.cost)
        if math.isclose(f1, f2):
            raise PredictionError(
                f"model {g0.name!r}: its work does not grow with the batch (no batch dim bound "
                "by the loader); bind the batch dim (e.g. --dim NAME=N for the model's dim) or "
                "use --objective latency")
    requested = list(precisions) if precisions else ["fp32", "tf32", "fp16", "bf16"]
    default = replace(default_setting(hw, batch, "int8" if is_quantised(g0) else "fp32",
                                      profile), mode=modes[0])
    precs, pnotes = runnable_precisions(g0, hw, requested, default.precision)
    notes += pnotes
    skipped = [p for p in precs if p not in profile.precisions]
    if skipped:
        notes.append(f"{', '.join(skipped)} left out: runtime {profile.name} does not run it")
        precs = [p for p in precs if p in profile.precisions]
        if not precs:
            raise PredictionError(f"runtime {profile.name!r} runs none of the precisions "
                                  f"searched; it runs {', '.join(profile.precisions)}")
    modes = list(dict.fromkeys(modes))
    if not profile.fusion_patterns:  # fusion on or off would change nothing: not a setting
        fusions = [None]
        notes.append(f"graph optimisation not searched: {profile.name} has no graph-optimiser "
                     "fusions beyond its kernel mapping")
    cells = predict_cells(graphs, hw, precs, modes, list(dict.fromkeys(fusions)) or [True],
                          thread_candidates(hw), est, profile)
    settings = settings_of(cells, hw)
    if len(modes) > 1:
        notes.append("training-step settings are ranked with inference ones; compare gains "
                     "within one mode")
    table = build_table(cells, settings, default, objective, hw)
    recommended = table.loc[table["recommended"], "_setting"].iloc[0]
    advice = Advice(model=g0.name, device=hw.id, device_kind=hw.kind, units=int(hw.units),
                    objective=objective, estimator=est.name, table=table, default=default,
                    recommended=recommended, reasons=(), notes=tuple(notes), cells=cells,
                    runtime=profile.name)
    return replace(advice, reasons=tuple(reasons_for(advice, hw)))


def public_table(advice: Advice, top: int | None = None) -> pd.DataFrame:
    """The advice table without internal columns (``top`` rows, always keeping the default and
    the recommended rows)."""
    return advice.shown(top)


__all__ = ["MIN_GAIN", "OBJECTIVES", "PER_OP_COLUMNS", "TABLE_COLUMNS", "Advice", "Cell",
           "Setting", "advise", "batch_candidates", "build_table", "default_setting",
           "packed_time", "pick_recommended", "predict_cells", "public_table",
           "resolve_estimator", "run_overhead_s", "runnable_precisions", "settings_of",
           "step_time", "thread_candidates"]
