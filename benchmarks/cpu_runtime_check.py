"""CPU acceptance of the ``onnxruntime-cpu`` execution profile: models never in the bundled CPU
training data, measured here with ONNX Runtime and predicted by roofcast, before and after.

Run (after ``roofcast hw calibrate``, which writes the ``local`` device)::

    .venv/bin/python benchmarks/cpu_runtime_check.py [--models a,b] [--threads 1,2]
        [--rounds 5] [--repeats 20] [--measured FILE] [--format table|csv|json]

Models: the weightless graphs in ``benchmarks/data/cpu_check/`` (exported by
``benchmarks/data/export_cpu_check.py``: HF MobileNetV2 with its 52 explicit Pads, HF
ResNet-50, HF ViT-S/16, HF DistilBERT, torchvision ShuffleNetV2, SqueezeNet 1.1,
RegNetY-400MF; none is in ``training_data/bundled/cpu_summary.csv``), batch 1 (DistilBERT
sequence 128).

**Measured**: ONNX Runtime's CPU provider at level ``all``, one inter-op thread, sequential,
profiler off, random weights and inputs (``training_data.collectors.ort_cpu.prepare``); every
(model, threads) session is built first, then ``--rounds`` rounds each run every session
``WARMUP`` times untimed and ``--repeats`` times timed, so all configurations see the same
load; the figure is the median of all timed runs (p10 beside it). The machine is shared: the
load average is printed before and after; compare the variants (all predicted against the
same measurement), not runs on different days. Beside the wall time, ``cpu_ms``: the median
CPU time of the process per run (``time.process_time``); at one thread it is the run's time
without the waits for a core that other processes cause, and the summary also scores the
one-thread runs against it (``err_vs_cpu``; two threads spin-wait, so theirs is not a time).
``--measured FILE`` reuses a CSV of an earlier measurement when it exists, else writes it.

**Predicted** on ``local`` with ``--threads`` of the run, by ``--estimator learned``
(``e2e_estimate_ms``: the learned end-to-end figure ``roofcast predict`` prints) and ``auto``
(its total), for four kernel plans:

* ``as-written``: ``onnxruntime-cpu`` with fusion off (one kernel per costed node);
* ``epilogue``: the rule before execution profiles (fusion on = ``epilogue`` only);
* ``rules``: ``ort_plan.FALLBACK_PATTERNS``, what the profile does without ONNX Runtime;
* ``ort``: ``onnxruntime-cpu`` (fusion on: ONNX Runtime's own optimised graph).

``epilogue`` and ``rules`` are user profiles written to a temporary runtime folder
(``ROOFCAST_RUNTIME_DIR``), like any user's. Error = predicted / measured - 1; the summary
gives median and worst |error| per (plan, estimator). Targets (issue 14): median <= 5 %,
worst <= 20 %.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from roofcast.app.output import add_format_arg, emit

DATA_DIR = Path(__file__).resolve().parent / "data" / "cpu_check"
MODELS: dict[str, dict[str, int]] = {
    "hf_mobilenet_v2": {"batch": 1}, "hf_resnet50": {"batch": 1}, "hf_vit_small": {"batch": 1},
    "hf_distilbert": {"batch": 1, "sequence": 128}, "tv_shufflenet_v2": {"batch": 1},
    "tv_squeezenet1_1": {"batch": 1}, "tv_regnet_y_400mf": {"batch": 1},
}
WARMUP = 3
ESTIMATORS = ("learned", "auto")
#: plan name -> (runtime, fusion); runtimes starting ``cpucheck-`` are written as user profiles.
PLANS: dict[str, tuple[str, bool]] = {
    "as-written": ("onnxruntime-cpu", False), "epilogue": ("cpucheck-epilogue", True),
    "rules": ("cpucheck-rules", True), "ort": ("onnxruntime-cpu", True),
}


def write_profiles(folder: Path) -> None:
    """The ``epilogue`` and ``rules`` plans as user runtime profiles in ``folder``."""
    from roofcast.predictor.runtimes.ort_plan import FALLBACK_PATTERNS

    for name, patterns in (("cpucheck-epilogue", ("epilogue",)),
                           ("cpucheck-rules", FALLBACK_PATTERNS)):
        listed = ", ".join(f'"{p}"' for p in patterns)
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\ndescription = "cpu_runtime_check: {name}"\n'
            f'device_kinds = ["cpu"]\nfusion_patterns = [{listed}]\nfusion_default = true\n'
            f'learned_from = "onnxruntime-cpu"\n')


def measure(models: list[str], threads: list[int], rounds: int, repeats: int) -> pd.DataFrame:
    """Measured wall time per (model, threads) (module docstring), milliseconds."""
    import onnxruntime as ort

    from roofcast.training_data.collectors.ort_cpu import prepare

    sessions = {}
    for name in models:
        prep = prepare(DATA_DIR / f"{name}.onnx", MODELS[name], name=name)
        for t in threads:
            so = ort.SessionOptions()
            so.intra_op_num_threads, so.inter_op_num_threads = t, 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.log_severity_level = 3
            if prep.weights:
                so.add_external_initializers(
                    list(prep.weights),
                    [ort.OrtValue.ortvalue_from_numpy(a) for a in prep.weights.values()])
            sess = ort.InferenceSession(prep.runnable.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
            sessions[(name, t)] = (sess, prep.feeds)
    times: dict[tuple[str, int], list[float]] = {k: [] for k in sessions}
    cpu: dict[tuple[str, int], list[float]] = {k: [] for k in sessions}
    for _ in range(rounds):
        for key, (sess, feeds) in sessions.items():
            for i in range(WARMUP + repeats):
                c0, t0 = time.process_time(), time.perf_counter()
                sess.run(None, feeds)
                if i >= WARMUP:
                    times[key].append(time.perf_counter() - t0)
                    cpu[key].append(time.process_time() - c0)
    return pd.DataFrame([{"model": m, "threads": t, "measured_ms": float(np.median(v)) * 1e3,
                          "measured_p10_ms": float(np.percentile(v, 10)) * 1e3,
                          "cpu_ms": float(np.median(cpu[(m, t)])) * 1e3, "runs": len(v)}
                         for (m, t), v in times.items()])


def predicted_ms(graph, threads: int, plan: str, estimator: str) -> float:
    """roofcast's prediction (ms) of ``graph`` on ``local`` under ``plan`` (module docstring)."""
    from roofcast.hw_catalog import get_device
    from roofcast.predictor.config import RunConfig
    from roofcast.predictor.estimator_registry import as_estimator
    from roofcast.predictor.simulate import predict_graph

    runtime, fusion = PLANS[plan]
    config = RunConfig(threads=threads, fusion=fusion, runtime=runtime)
    pred = predict_graph(graph, get_device("local"), config, as_estimator(estimator))
    if estimator == "learned":
        return float(pred.summary["e2e_s"]) * 1e3
    return pred.total_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--measured", type=Path, help="CSV: reused when it exists, else written")
    add_format_arg(parser)
    args = parser.parse_args(argv)
    from roofcast.graph_import import import_model

    models = [m for m in args.models.split(",") if m] or list(MODELS)
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        raise SystemExit(f"cpu_runtime_check: unknown models {unknown}; choose from {list(MODELS)}")
    threads = [int(t) for t in args.threads.split(",")]
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if args.format == "table" else None
    if args.measured is not None and args.measured.exists():
        measured = pd.read_csv(args.measured)
        measured = measured[measured["model"].isin(models) & measured["threads"].isin(threads)]
    else:
        load = os.getloadavg()[0]
        measured = measure(models, threads, args.rounds, args.repeats)
        if say:
            say(f"measured with load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
        if args.measured is not None:
            measured.to_csv(args.measured, index=False)
    rows = []
    with tempfile.TemporaryDirectory(prefix="roofcast-cpucheck-") as tmp:
        write_profiles(Path(tmp))
        os.environ["ROOFCAST_RUNTIME_DIR"] = tmp
        for name in models:
            graph = import_model(DATA_DIR / f"{name}.onnx", dims=MODELS[name], name=name)
            for r in measured[measured["model"] == name].itertuples():
                row = {"model": name, "threads": r.threads, "measured_ms": r.measured_ms,
                       "cpu_ms": r.cpu_ms}
                for plan in PLANS:
                    for est in ESTIMATORS:
                        t0 = time.perf_counter()
                        ms = predicted_ms(graph, int(r.threads), plan, est)
                        row[f"{plan}/{est}_ms"] = ms
                        row[f"{plan}/{est}_err_pct"] = (ms / r.measured_ms - 1) * 100
                        row[f"{plan}/{est}_err_vs_cpu_pct"] = (
                            (ms / r.cpu_ms - 1) * 100 if r.threads == 1 else np.nan)
                        row[f"{plan}/{est}_s"] = time.perf_counter() - t0
                rows.append(row)
    table = pd.DataFrame(rows)
    summary = pd.DataFrame([
        {"plan": plan, "estimator": est,
         "median_abs_err_pct": float(table[f"{plan}/{est}_err_pct"].abs().median()),
         "worst_abs_err_pct": float(table[f"{plan}/{est}_err_pct"].abs().max()),
         "median_abs_err_vs_cpu_1t_pct": float(
             table[f"{plan}/{est}_err_vs_cpu_pct"].abs().median()),
         "worst_abs_err_vs_cpu_1t_pct": float(table[f"{plan}/{est}_err_vs_cpu_pct"].abs().max()),
         "predict_s_max": float(table[f"{plan}/{est}_s"].max())}
        for plan in PLANS for est in ESTIMATORS])
    show = table[["model", "threads", "measured_ms", "cpu_ms"]
                 + [c for c in table.columns if c.endswith("_err_pct")
                    and "vs_cpu" not in c]]
    one = table[table["threads"] == 1]
    vs_cpu = one[["model", "cpu_ms"] + [c for c in table.columns if "vs_cpu" in c]]
    emit({"per_model": show, "one_thread_vs_cpu": vs_cpu, "summary": summary}, args.format)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
