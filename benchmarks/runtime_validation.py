"""Execution-profile validation: whole models and per-op kernels against PyTorch eager on GPUs,
the CPU leave-one-model-out figures, and cross-GPU speedups against the physical bounds.

Run: ``ROOFCAST_SHARED_DATA=/work/shared/data .venv/bin/python benchmarks/runtime_validation.py
[--quick] [--runtime NAME|none] [--only whole,gap,cpu,ratios] [--format table|csv|json]``

Data: ``$ROOFCAST_SHARED_DATA/gpu_models`` (else ``../shared/data/gpu_models``), NeuSight's
PyTorch-eager measurements of HF GPT-3 XL, GPT-3 2.7B and Switch-XL (see its README); the zoo
holds ONNX exports of exactly the modules its harness timed (``tools/zoo/export_zoo.py``:
``gpt3_xl``, ``gpt3_27``, ``switchxl4``). Tables:

* ``whole_model`` (a): each row of ``neusight_model_latency.csv`` predicted with
  ``roofcast.predict(zoo model, device, batch=..., dims={"sequence": ...}, runtime=RUNTIME,
  estimator=E, precision="fp32")`` for every estimator E; ``err_pct`` = 100 (pred - meas) / meas.
  ``whole_model_summary``: per estimator, median and mean of ``|err_pct|`` and the median signed
  error. Devices: the CSV's ``gpu_dir`` resolved by the catalog (A100-PCIE-40GB ->
  ``a100-40gb-pcie``, V100-PCIE-32GB -> ``v100-pcie-32gb``).
* ``gap`` (b): per kernel group (``GROUPS``) the measured trace against roofcast's kernels for the
  same run. The trace (``neusight_model_op_traces.csv.gz``) times one transformer layer plus
  embeddings and head, node by node: a node of scope ``layer`` counts ``num_layer`` times (the
  latency CSV's column: 24 for GPT-3 XL, 32 for GPT-3 2.7B), nodes of scope ``model``,
  ``embedding`` and ``head`` once; ``meas_kernels`` is scaled the same way. Trace nodes are
  classified by ``classify_trace_node`` (FX op, target, module class, shapes, contiguity);
  roofcast's kernels (``Prediction.per_op`` rows) by ``classify_kernel`` (op family, weights);
  roofcast's ``no-kernel`` row counts the graph nodes no kernel row covers (views, shape
  arithmetic, constant-folded nodes) and prices per-op rows on the ``free`` engine.
* ``cpu_lomo`` (c): ``benchmarks/learned_accuracy.py``'s CPU leave-one-model-out rows (trained on
  the bundled CPU measurements only, exactly as that benchmark does): end-to-end median APE etc.
* ``ratios`` (d): ``roofcast.compare`` of resnet50 (batch 64), bert_base and gpt2 (batch 8,
  sequence 128) at fp32 and fp16, infer and train, over every GPU of the catalog against
  ``--baseline``. ``speedup`` must lie in [min(rc, rb), max(rc, rb)], with rc = the ratio of
  the devices' matrix-engine peaks at the run's precision (``HardwareSpec.peak("matrix",
  precision)``, with its documented fallback) and rb = the ratio of their memory bandwidths
  (computed here from the catalog: ``compare`` has no bound columns of its own).
  ``ratio_outside`` lists the cells outside, ``ratio_summary`` counts them per estimator;
  ``above_max_faster`` counts those above the bound on devices faster than the baseline in
  both compute and bandwidth (a slower device whose kernels sit on launch floors may come out
  less slow than both ratios: floors pull every speedup towards 1).

``--runtime none`` omits ``runtime=`` (roofcast before execution profiles: the "before"
figures). No timing is asserted; nothing is saved.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import roofcast
from roofcast.app.output import add_format_arg, emit
from roofcast.hw_catalog.catalog import get_device, list_devices, resolve_name
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.precision import peak_dtype
from roofcast.training_data import zoo
from roofcast.training_data.public_kernels import shared_data_dir

MODELS_DIR = "gpu_models"
LATENCY_FILE = "neusight_model_latency.csv"
TRACE_FILE = "neusight_model_op_traces.csv.gz"
ESTIMATORS = ("auto", "learned", "time-roofline", "roofline+eff", "traffic", "roofline")
QUICK_ESTIMATORS = ("auto", "time-roofline")
GROUPS = ("GEMM", "batched matmul", "softmax", "layernorm", "elementwise", "copies",
          "no-kernel", "other")
RATIO_MODELS: dict[str, dict[str, Any]] = {
    "resnet50": {"batch": 64, "dims": {}},
    "bert_base": {"batch": 8, "dims": {"sequence": 128}},
    "gpt2": {"batch": 8, "dims": {"sequence": 128}},
}
RATIO_PRECISIONS = ("fp32", "fp16")
RATIO_MODES = ("infer", "train")
QUICK_RATIO_DEVICES = ("a100-40gb-pcie", "h100-sxm", "b200", "v100-pcie-32gb", "t4", "mi300x")
RATIO_TOLERANCE = 1e-6
PARTS = ("whole", "gap", "cpu", "ratios")

# ------------------------------------------------------------------ trace classification
#: FX targets (call_function / call_method) by group; anything else tensor-valued is elementwise.
TRACE_TARGET_GROUP: dict[str, str] = {
    "addmm": "GEMM", "linear": "GEMM", "mm": "GEMM",
    "matmul": "batched matmul", "bmm": "batched matmul", "baddbmm": "batched matmul",
    "softmax": "softmax", "layer_norm": "layernorm",
    "contiguous": "copies", "index_select": "copies", "cat": "copies", "embedding": "copies",
    **dict.fromkeys(("full", "arange", "zeros", "ones", "empty"), "elementwise"),  # fills
    **dict.fromkeys(("size", "getitem", "getattr", "view", "permute", "transpose", "split",
                     "chunk", "unsqueeze", "squeeze", "expand", "t", "narrow", "select", "dim",
                     "torch.finfo", "to", "type"), "no-kernel"),
}
#: FX targets that copy only when their input is not contiguous (else a view).
VIEW_UNLESS_STRIDED = frozenset({"reshape", "flatten"})
#: ``call_module`` classes by group.
TRACE_MODULE_GROUP: dict[str, str] = {
    "Linear": "GEMM", "Conv1D": "GEMM", "LayerNorm": "layernorm", "Embedding": "copies",
    "Dropout": "no-kernel",  # eval mode: identity
    "Softmax": "softmax",
}
NOT_RUN = frozenset({"placeholder", "get_attr", "output"})


def _shapes(cell: Any) -> list[list[int]]:
    """``'[[2, 2048], [1]]'`` -> nested lists (empty for a blank cell)."""
    if not isinstance(cell, str) or not cell.strip():
        return []
    return ast.literal_eval(cell)


def classify_trace_node(row: Mapping[str, Any]) -> str | None:
    """The kernel group of one FX node of a NeuSight trace; None for nodes that are not run
    (placeholders, parameters, the output).

    ``to``/``type`` count as no-kernel: the traced models are fp32 throughout, so the casts are
    no-ops. Python scalar arithmetic on sizes (inputs and output all of shape ``[1]``, e.g.
    ``add`` of two sizes, ``pow`` of the head dim) launches nothing either.
    """
    fx_op = str(row["fx_op"])
    if fx_op in NOT_RUN:
        return None
    if fx_op == "call_module":
        return TRACE_MODULE_GROUP.get(str(row.get("module_class")), "other")
    target = str(row["target"])
    if target in TRACE_TARGET_GROUP:
        return TRACE_TARGET_GROUP[target]
    if target in VIEW_UNLESS_STRIDED:
        contiguous = str(row.get("input_contiguous", "[True]"))
        return "copies" if "False" in contiguous.split(",")[0] else "no-kernel"
    shapes = _shapes(row.get("input_shapes"))
    out = str(row.get("output_shape", ""))
    if out == "(1,)" and all(s == [1] for s in shapes):
        return "no-kernel"
    return "elementwise"


def trace_groups(trace: pd.DataFrame, num_layer: int) -> pd.DataFrame:
    """Measured ms and kernel counts per group of one trace (one model, GPU, batch, sequence):
    scope ``layer`` x ``num_layer``, every other scope x 1."""
    group = trace.apply(classify_trace_node, axis=1)
    run = trace[group.notna()].assign(group=group[group.notna()])
    weight = np.where(run["scope"].eq("layer"), num_layer, 1)
    out = pd.DataFrame({"group": run["group"], "meas_ms": run["fwd_ms"] * weight,
                        "meas_kernels": weight})
    return out.groupby("group").sum()


# ------------------------------------------------------------ roofcast kernel grouping
#: roofcast op family -> group (matmul splits by weights: see ``classify_kernel``).
FAMILY_GROUP: dict[str, str] = {
    "softmax": "softmax", "normalization": "layernorm", "elementwise": "elementwise",
    "data_movement": "copies", "attention": "batched matmul",
}


def classify_kernel(row: Mapping[str, Any]) -> str:
    """The group of one roofcast kernel (a ``Prediction.per_op`` row): a matmul with a weight
    operand is a GEMM (``addmm``/``linear`` in PyTorch), one between two activations a batched
    matmul; a row on the ``free`` engine launches nothing; other families by ``FAMILY_GROUP``."""
    if str(row.get("engine")) == "free":
        return "no-kernel"
    family = str(row["family"])
    if family == "matmul":
        return "GEMM" if float(row.get("weight_bytes") or 0) > 0 else "batched matmul"
    return FAMILY_GROUP.get(family, "other")


def kernel_groups(per_op: pd.DataFrame, graph_nodes: int) -> pd.DataFrame:
    """Predicted ms and kernel counts per group; ``no-kernel`` adds the graph nodes that no
    per-op row covers (``fused_nodes`` holds a kernel's members joined by ``+``)."""
    group = per_op.apply(classify_kernel, axis=1)
    out = pd.DataFrame({"group": group, "pred_ms": per_op["time_s"] * 1e3, "pred_kernels": 1})
    table = out.groupby("group").sum()
    covered = sum(len(str(f).split("+")) for f in per_op["fused_nodes"])
    uncovered = max(graph_nodes - covered, 0)
    if "no-kernel" not in table.index:
        table.loc["no-kernel"] = (0.0, 0)
    table.loc["no-kernel", "pred_kernels"] += uncovered
    return table


# ------------------------------------------------------------------------------ parts
def _settings(runtime: str) -> dict[str, Any]:
    """``runtime=`` for the API, or nothing with ``--runtime none`` (roofcast before profiles)."""
    return {} if runtime == "none" else {"runtime": runtime}


def _load(data_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    folder = data_dir / MODELS_DIR
    lat, trace = folder / LATENCY_FILE, folder / TRACE_FILE
    for path in (lat, trace):
        if not path.is_file():
            raise SystemExit(f"{path} not found: set ROOFCAST_SHARED_DATA to the folder "
                             f"holding {MODELS_DIR}/")
    latency = pd.read_csv(lat)
    latency["device"] = [resolve_name(g) for g in latency["gpu_dir"]]
    traces = pd.read_csv(trace)
    traces["device"] = [resolve_name(g) for g in traces["gpu_dir"]]
    return latency, traces


def _predict(model: str, device: str, batch: int, seq: int, estimator: str, runtime: str,
             cache: dict) -> roofcast.Prediction:
    key = (model, batch, seq)
    if key not in cache:
        cache[key] = roofcast.load_model(model, batch=batch, sequence=seq)
    return roofcast.predict(cache[key], device, estimator=estimator, precision="fp32",
                            **_settings(runtime))


def whole_model(latency: pd.DataFrame, estimators: Sequence[str], runtime: str,
                say) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    rows, notes, cache = [], [], {}
    available = set(zoo.list_models())
    for r in latency.itertuples():
        if r.model not in available:
            notes.append(f"{r.model} is not in the zoo: its {r.device} row is not predicted "
                         "(export it with tools/zoo/export_zoo.py)")
            continue
        for est in estimators:
            t0 = time.perf_counter()
            p = _predict(r.model, r.device, int(r.batch), int(r.seq), est, runtime, cache)
            say(f"  {r.model} {r.device} b{r.batch} s{r.seq} {est}: {p.total_ms:.1f} ms "
                f"({time.perf_counter() - t0:.1f} s)")
            rows.append({"model": r.model, "device": r.device, "batch": int(r.batch),
                         "seq": int(r.seq), "estimator": est,
                         "meas_ms": float(r.latency_ms), "pred_ms": p.total_ms,
                         "err_pct": 100 * (p.total_ms - r.latency_ms) / r.latency_ms})
    table = pd.DataFrame(rows)
    if table.empty:
        return table, table, notes
    summary = table.assign(ape=table["err_pct"].abs()).groupby("estimator", sort=False).agg(
        rows=("ape", "size"), median_ape_pct=("ape", "median"), mean_ape_pct=("ape", "mean"),
        median_err_pct=("err_pct", "median"), worst_ape_pct=("ape", "max")).reset_index()
    return table, summary, notes


def gap(latency: pd.DataFrame, traces: pd.DataFrame, estimators: Sequence[str], runtime: str,
        say) -> pd.DataFrame:
    layers = latency.drop_duplicates("model").set_index("model")["num_layer"]
    parts, cache = [], {}
    for (model, device, batch, seq), trace in traces.groupby(["model", "device", "batch", "seq"]):
        if model not in zoo.list_models():
            continue
        measured = trace_groups(trace, int(layers[model]))
        for est in estimators:
            p = _predict(model, device, int(batch), int(seq), est, runtime, cache)
            nodes = len(list(cache[(model, int(batch), int(seq))].graph.ops()))
            predicted = kernel_groups(p.per_op, nodes)
            t = measured.join(predicted, how="outer").reindex(GROUPS).fillna(0.0)
            t = t[(t != 0).any(axis=1)]
            t.loc["total"] = t.sum()
            say(f"  gap {model} {device} b{batch} {est}: measured {t.loc['total', 'meas_ms']:.0f} "
                f"ms, predicted {t.loc['total', 'pred_ms']:.0f} ms")
            parts.append(t.reset_index(names="group").assign(
                model=model, device=device, batch=int(batch), estimator=est))
    out = pd.concat(parts, ignore_index=True)
    out["pred_over_meas"] = out["pred_ms"] / out["meas_ms"].replace(0.0, np.nan)
    cols = ["model", "device", "batch", "estimator", "group", "meas_ms", "pred_ms",
            "pred_over_meas", "meas_kernels", "pred_kernels"]
    return out[cols]


def cpu_lomo(quick: bool, say) -> pd.DataFrame:
    """The CPU rows of ``benchmarks/learned_accuracy.py``'s acceptance table, trained on the
    bundled CPU measurements as that benchmark trains them."""
    path = Path(__file__).resolve().parent / "learned_accuracy.py"
    spec = importlib.util.spec_from_file_location("learned_accuracy", path)
    la = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(la)
    cap = la.DEFAULT_CAP // 5 if quick else la.DEFAULT_CAP
    ts = la.load_sources(["bundled"], cap=cap, say=say)
    res = la.train(ts, quick=quick, progress=say)
    table = la.acceptance(res, la.validation_tables(res))
    return table[table["metric"].str.startswith("CPU")].reset_index(drop=True)


def bounds(base: Any, dev: Any, precision: str) -> tuple[float, float, float, float]:
    """(compute ratio, bandwidth ratio, lower, upper) of ``dev`` over ``base``: the ratio of the
    matrix-engine peaks at ``precision`` and of the memory bandwidths; the speedup a roofline
    allows lies between their min and max."""
    dtype = peak_dtype("matrix", precision)
    rc = dev.peak("matrix", dtype).flops_per_s / base.peak("matrix", dtype).flops_per_s
    rb = dev.mem_bw_Bps / base.mem_bw_Bps
    return rc, rb, min(rc, rb), max(rc, rb)


def ratios(estimators: Sequence[str], baseline: str, devices: Sequence[str], runtime: str,
           say) -> tuple[pd.DataFrame, pd.DataFrame]:
    base = get_device(baseline)
    specs = [get_device(d) for d in devices]
    rows = []
    for model, cfg in RATIO_MODELS.items():
        loaded = roofcast.load_model(model, batch=cfg["batch"], **cfg["dims"])
        for precision in RATIO_PRECISIONS:
            for mode in RATIO_MODES:
                for est in estimators:
                    t0 = time.perf_counter()
                    df = roofcast.compare(loaded, specs, estimator=est, baseline=baseline,
                                          precision=precision, mode=mode, **_settings(runtime))
                    say(f"  compare {model} {precision} {mode} {est}: {len(df)} devices "
                        f"({time.perf_counter() - t0:.1f} s)")
                    for r in df.itertuples():
                        if r.device == base.id:
                            continue
                        rc, rb, lo, hi = bounds(base, get_device(r.device), precision)
                        rows.append({"model": model, "precision": precision, "mode": mode,
                                     "estimator": est, "device": r.device,
                                     "speedup": r.speedup, "compute_ratio": rc,
                                     "bandwidth_ratio": rb, "allowed_min": lo,
                                     "allowed_max": hi})
    t = pd.DataFrame(rows)
    t["above_max"] = t["speedup"] > t["allowed_max"] * (1 + RATIO_TOLERANCE)
    t["below_min"] = t["speedup"] < t["allowed_min"] * (1 - RATIO_TOLERANCE)
    t["excess"] = np.where(t["above_max"], t["speedup"] / t["allowed_max"],
                           np.where(t["below_min"], t["speedup"] / t["allowed_min"], 1.0))
    t["above_max_faster"] = t["above_max"] & (t["allowed_min"] > 1)
    summary = t.groupby("estimator", sort=False).agg(
        cells=("speedup", "size"), above_max=("above_max", "sum"),
        above_max_faster=("above_max_faster", "sum"), below_min=("below_min", "sum"),
        worst_over_max=("excess", "max"), worst_under_min=("excess", "min")).reset_index()
    outside = t[t["above_max"] | t["below_min"]].sort_values("excess", ascending=False)
    return summary, outside.drop(columns=["above_max", "below_min", "above_max_faster"])


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except PredictionError as exc:  # e.g. a roofcast without runtime=: say so, no traceback
        print(f"runtime_validation: {exc}\n(--runtime none runs roofcast without runtime=, as "
              "before execution profiles)", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer estimators and rows, six devices for the ratios, small "
                             "CPU ensembles")
    parser.add_argument("--runtime", default="pytorch-eager",
                        help="execution profile passed as runtime= (GPU parts); 'none' omits "
                             "it (roofcast before execution profiles)")
    parser.add_argument("--only", default=",".join(PARTS),
                        help=f"comma-separated parts to run: {', '.join(PARTS)}")
    parser.add_argument("--estimators", default=None,
                        help=f"comma-separated (default {','.join(ESTIMATORS)}; --quick "
                             f"{','.join(QUICK_ESTIMATORS)})")
    parser.add_argument("--gap-estimators", default="auto,time-roofline",
                        help="estimators of the per-op gap table")
    parser.add_argument("--ratio-estimators", default="auto,time-roofline",
                        help="estimators of the ratio checks")
    parser.add_argument("--baseline", default="a100-40gb-pcie", help="ratio baseline device")
    parser.add_argument("--data-dir", default=None,
                        help="folder holding gpu_models/ (default $ROOFCAST_SHARED_DATA, else "
                             "../shared/data)")
    add_format_arg(parser)
    args = parser.parse_args(argv)
    parts = [p for p in args.only.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}")
    t0 = time.perf_counter()
    say = ((lambda m: print(m, file=sys.stderr, flush=True)) if args.format == "table"
           else (lambda m: None))
    estimators = (args.estimators.split(",") if args.estimators
                  else list(QUICK_ESTIMATORS if args.quick else ESTIMATORS))
    tables: dict[str, pd.DataFrame] = {}
    extra: dict[str, Any] = {"runtime": args.runtime, "quick": args.quick}
    if "whole" in parts or "gap" in parts:
        latency, traces = _load(shared_data_dir(args.data_dir))
        if args.quick:
            latency = latency[latency["batch"] <= 2]
            traces = traces[traces["batch"] <= 2]
    if "whole" in parts:
        say("(a) whole models")
        table, summary, notes = whole_model(latency, estimators, args.runtime, say)
        tables["whole_model"] = table
        tables["whole_model_summary"] = summary
        extra.update({f"whole note {i + 1}": n for i, n in enumerate(notes)})
    if "gap" in parts:
        say("(b) per-op gap")
        gap_est = (
            args.gap_estimators.split(",")[:1] if args.quick else args.gap_estimators.split(",")
        )
        tables["gap"] = gap(latency, traces, gap_est, args.runtime, say)
        extra["gap scaling"] = ("measured: trace nodes of scope 'layer' x num_layer, embeddings, "
                                "head and model-level nodes x 1; predicted: the whole graph")
    if "cpu" in parts:
        say("(c) CPU leave-one-model-out (learned_accuracy.py, bundled CPU data)")
        tables["cpu_lomo"] = cpu_lomo(args.quick, say)
    if "ratios" in parts:
        say("(d) ratio checks")
        devices = (list(QUICK_RATIO_DEVICES) if args.quick
                   else [d.id for d in list_devices("gpu")])
        if args.baseline not in devices:
            devices.insert(0, args.baseline)
        summary, outside = ratios(args.ratio_estimators.split(","), args.baseline, devices,
                                  args.runtime, say)
        tables["ratio_summary"] = summary
        tables["ratio_outside"] = outside
    extra["elapsed_s"] = round(time.perf_counter() - t0, 1)
    emit({k: v.round(3) if len(v) else v for k, v in tables.items()}, args.format, extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
