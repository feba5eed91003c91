"""Build the bundled CPU dataset: per-op measurements of every zoo model plus microbenchmarks.

``python tools/bundled/build_dataset.py [--budget-s 1500] [--repeats 5] [--quick]`` writes
``cpu_measurements.csv.gz`` (tidy rows), ``cpu_summary.csv`` (one line per measured model,
dims and threads) and ``cpu_metadata.json`` (CPU, software, the local calibration taken just
before) to ``training_data/bundled/`` (or ``--out-dir``). Microbenchmarks first, then the zoo
breadth first at threads 1 and 2; a config whose estimated time exceeds the budget is skipped
and listed; files are rewritten after every model. The plan and ``--quiet-below`` in full:
``docs/design/module-notes.md`` (tools.bundled.build_dataset).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from roofcast.training_data.bundled.recount_work import write_atomically

HERE = Path(__file__).resolve().parents[2] / "training_data" / "bundled"
EFFICIENCY = 0.5  # assumed fraction of GEMM peak a whole model reaches (for the time estimate)
CNN_BATCHES = (1, 4, 16)
SEQ_CONFIGS = ((1, 128), (4, 128), (1, 512), (4, 512))
THREADS = (1, 2)


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def cpu_seconds() -> float | None:
    """Busy CPU-seconds of the whole machine so far (/proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    ticks = [int(v) for v in fields[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def other_share(before: tuple[float | None, float, float], n_cpu: int) -> float | None:
    """Fraction of all CPUs' time other processes used since ``before``."""
    busy0, own0, wall0 = before
    busy1 = cpu_seconds()
    wall = time.perf_counter() - wall0
    if busy0 is None or busy1 is None or wall <= 0:
        return None
    return max(0.0, ((busy1 - busy0) - (own_cpu_seconds() - own0)) / (wall * n_cpu))


def wait_for_quiet(threshold: float | None, max_wait_s: float, n_cpu: int,
                   quiet_s: int = 3) -> float:
    """Wait until other processes use < ``threshold`` of all CPUs for ``quiet_s`` consecutive
    1-s windows, or ``max_wait_s`` passed; return the seconds waited (0 when ``threshold`` is
    None)."""
    if threshold is None:
        return 0.0
    t0 = time.perf_counter()
    calm = 0
    while calm < quiet_s and time.perf_counter() - t0 < max_wait_s:
        before = (cpu_seconds(), own_cpu_seconds(), time.perf_counter())
        time.sleep(1.0)
        share = other_share(before, n_cpu)
        calm = calm + 1 if share is not None and share < threshold else 0
    return round(time.perf_counter() - t0, 1)


def quiet_attempts(work, threshold: float | None, max_wait_s: float, retries: int, n_cpu: int,
                   say, what: str):
    """Run ``work()`` after waiting for quiet; again (at most ``retries`` times) while other
    processes used more than ``threshold`` of the CPUs meanwhile. Returns (result of the least
    disturbed attempt, its other-CPU share, attempts, seconds waited)."""
    best = None
    waited = 0.0
    attempts = 0
    for attempt in range(1 + (retries if threshold is not None else 0)):
        waited += wait_for_quiet(threshold, max_wait_s, n_cpu)
        before = (cpu_seconds(), own_cpu_seconds(), time.perf_counter())
        result = work()
        share = other_share(before, n_cpu)
        attempts = attempt + 1
        if best is None or (share is not None and (best[1] is None or share < best[1])):
            best = (result, share)
        if threshold is None or share is None or share < threshold:
            break
        say(f"  {what}: other processes used {share:.0%} of the CPUs meanwhile; again")
    return best[0], best[1], attempts, waited


def cpuinfo() -> dict[str, Any]:
    from roofcast.hw_catalog.calibrate import cpu_model

    facts: dict[str, Any] = {"model_name": cpu_model(), "logical_cpus": os.cpu_count()}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return facts
    first = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in first:
            first[key.strip()] = value.strip()
    for key in ("vendor_id", "cpu family", "model", "stepping", "cpu MHz", "cache size"):
        if key in first:
            facts[key.replace(" ", "_")] = first[key]
    flags = set(first.get("flags", "").split())
    facts["simd_flags"] = sorted(f for f in flags if f.startswith(("avx", "fma", "sse4")))
    return facts


def gemm_rate(calibration: dict[str, Any] | None, threads: int) -> float:
    """Calibrated fp32 GEMM FLOP/s at ``threads`` (10 GFLOP/s per thread if unknown)."""
    try:
        g = calibration["calibration"]["gemm"]["fp32"]  # type: ignore[index]
        return float(dict(zip(g["threads"], g["GFLOPs"], strict=True))[threads]) * 1e9
    except (KeyError, TypeError, ValueError):
        return 10e9 * threads


def model_configs(name: str, seq_configs=SEQ_CONFIGS) -> list[dict[str, int]]:
    from roofcast.training_data import zoo

    symbolic = set(zoo.model_meta(name).get("symbolic_dims", []))
    if "sequence" in symbolic:
        return [{"batch": b, "sequence": s} for b, s in seq_configs]
    return [{"batch": b} for b in CNN_BATCHES]


def seq_configs_arg(text: str) -> tuple[tuple[int, int], ...]:
    """``"1x32,4x32"`` -> ((1, 32), (4, 32)): (batch, sequence) pairs of the sequence models."""
    try:
        pairs = tuple(tuple(int(v) for v in item.split("x")) for item in text.split(","))
    except ValueError:
        pairs = ()
    if not pairs or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise argparse.ArgumentTypeError(f"{text!r}: give BATCHxSEQUENCE pairs, e.g. 1x32,4x32")
    return pairs


def run_calibration(say) -> dict[str, Any] | None:
    try:
        from roofcast.hw_catalog.calibrate import run_calibration as calibrate
    except ImportError as exc:
        say(f"calibration unavailable: {exc}")
        return None
    try:
        return calibrate(quick=False, progress=say)
    except Exception as exc:  # the dataset is still useful without it; say so in metadata
        say(f"calibration failed: {type(exc).__name__}: {exc}")
        return None


def acceptance(summary: pd.DataFrame) -> pd.DataFrame:
    """Per zoo measurement: e2e and per-op sums, where the rest goes, joined share, and the
    repeat agreement (relative difference of a second session's e2e and per-op medians).

    ``binding_ms`` = wall time - ORT's ``model_run`` (Python <-> ORT conversion);
    ``executor_ms`` = ``model_run`` - kernel time (scheduling, allocation, profiler fences)."""
    zoo = summary[summary["kind"] == "zoo"].copy()
    if "binding_ms" not in zoo:  # summaries written before the collector reported them
        zoo["binding_ms"] = zoo["e2e_ms"] - zoo["ort_run_ms"]
        zoo["executor_ms"] = zoo["ort_run_ms"] - zoo["sum_ops_ms"]
    zoo["joined_pct"] = 100 * zoo["joined_fraction"]
    rep = summary[summary["kind"] == "zoo-repeat"].set_index("repeat_of")
    first = zoo.set_index("run_id")
    common = first.index.intersection(rep.index)
    zoo["repeat_e2e_diff_pct"] = float("nan")
    zoo["repeat_op_medians_diff_pct"] = float("nan")
    for run_id in common:
        mask = zoo["run_id"] == run_id
        a, b = first.loc[run_id], rep.loc[run_id]
        zoo.loc[mask, "repeat_e2e_diff_pct"] = 100 * abs(b["e2e_ms"] - a["e2e_ms"]) / a["e2e_ms"]
        zoo.loc[mask, "repeat_op_medians_diff_pct"] = 100 * abs(
            b["sum_op_medians_ms"] - a["sum_op_medians_ms"]) / a["sum_op_medians_ms"]
    cols = ["model", "dims", "threads_intra", "e2e_ms", "e2e_p10_ms", "e2e_p90_ms", "sum_ops_ms",
            "ops_over_e2e", "binding_ms", "executor_ms", "sum_op_medians_ms", "joined_pct",
            "repeat_e2e_diff_pct", "repeat_op_medians_diff_pct", "other_cpu_share"]
    return zoo.loc[:, cols].reset_index(drop=True)


def drop_micro(rows: pd.DataFrame, summaries: list[dict[str, Any]], families: set[str]
               ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """``rows`` and ``summaries`` without the microbenchmarks of ``families`` (``all``: every
    family), matched by run id through the summaries' ``kind == "micro"`` lines."""
    def gone(rec: dict[str, Any]) -> bool:
        return rec.get("kind") == "micro" and ("all" in families or rec.get("family") in families)
    runs = {rec["run_id"] for rec in summaries if gone(rec)}
    return (rows[~rows["run_id"].isin(runs)].reset_index(drop=True),
            [rec for rec in summaries if not gone(rec)])


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", type=Path, default=HERE)
    ap.add_argument("--budget-s", type=float, default=1500.0)
    ap.add_argument("--max-config-s", type=float, default=90.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="quick micro grid, batch 1 only")
    ap.add_argument("--models", nargs="*", help="zoo models (default: all)")
    ap.add_argument("--seq-configs", type=seq_configs_arg, default=SEQ_CONFIGS,
                    metavar="BxS[,BxS]", help="batch x sequence of the sequence models "
                    "(default 1x128,4x128,1x512,4x512)")
    ap.add_argument("--no-calibration", action="store_true")
    ap.add_argument("--no-micro", action="store_true", help="skip the microbenchmarks")
    ap.add_argument("--micro-families", default="all", metavar="F[,F]",
                    help="microbenchmark families (default all)")
    ap.add_argument("--no-models", action="store_true", help="skip the zoo models")
    ap.add_argument("--append", action="store_true",
                    help="add to the files in --out-dir instead of replacing them")
    ap.add_argument("--replace-micro", action="store_true",
                    help="with --append: drop the existing rows of the microbenchmark families "
                         "measured now (a re-measured grid replaces the old one)")
    ap.add_argument("--quiet-below", type=float, default=None, metavar="F",
                    help="wait for / retry until other processes use < F of the CPUs")
    ap.add_argument("--quiet-max-wait-s", type=float, default=120.0)
    ap.add_argument("--quiet-retries", type=int, default=2)
    ap.add_argument("--report", action="store_true",
                    help="only print the acceptance table of an existing cpu_summary.csv")
    return ap


def _check_replace_micro(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--replace-micro`` needs an existing dataset and a full grid measured now."""
    if not args.replace_micro:
        return
    if not args.append:
        ap.error("--replace-micro replaces grids inside existing files: add --append (without it "
                 "the files in --out-dir are rewritten from scratch anyway)")
    if args.no_micro:
        ap.error("--replace-micro with --no-micro measures no grid to replace: drop one of them")
    if args.quick:
        ap.error("--replace-micro with --quick would replace the full grids by the quick ones: "
                 "drop --quick")
    if not (args.out_dir / "cpu_metadata.json").is_file():
        ap.error(f"--replace-micro: no dataset in {args.out_dir} (cpu_metadata.json missing) to "
                 "replace grids in; give the folder of an existing dataset with --out-dir")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = _parser()
    args = ap.parse_args(argv)
    _check_replace_micro(ap, args)
    return args


def print_report(out_dir: Path) -> None:
    """The acceptance table of the ``cpu_summary.csv`` in ``out_dir``."""
    table = acceptance(pd.read_csv(out_dir / "cpu_summary.csv"))
    with pd.option_context("display.width", 250, "display.max_rows", None):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))


def new_metadata(args: argparse.Namespace, argv: list[str] | None) -> dict[str, Any]:
    """The machine, software and settings of this run."""
    from roofcast.training_data.collectors.rows import software_versions

    return {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu": cpuinfo(), "software": software_versions(), "platform": platform.platform(),
        "command": " ".join(["python tools/bundled/build_dataset.py", *(argv or sys.argv[1:])]),
        "repeats": args.repeats, "warmup": args.warmup, "threads": list(THREADS),
        "opt_level": "all", "load_average_at_start": os.getloadavg(),
        "noise_note": ("measured on a shared 2-core machine while other jobs ran; each row's "
                       "latency is the median of the repeats, p10/p90 give the spread, and "
                       "cpu_summary.csv records the CPU share other processes used meanwhile"),
    }


@dataclass
class Session:
    """One build: its arguments, what it measured and skipped so far, and the metadata."""

    args: argparse.Namespace
    meta: dict[str, Any]
    start: float
    n_cpu: int = field(default_factory=lambda: os.cpu_count() or 1)
    frames: list[pd.DataFrame] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def quietly(self, work, what: str):
        a = self.args
        return quiet_attempts(work, a.quiet_below, a.quiet_max_wait_s, a.quiet_retries,
                              self.n_cpu, log, what)

    def left(self) -> float:
        """Seconds of the budget left."""
        return self.args.budget_s - (time.perf_counter() - self.start)

    def skip(self, reason: str, prefix: str = "") -> None:
        self.skipped.append(reason)
        log(prefix + reason)

    def flush(self) -> None:
        """Rewrite the three files with everything measured so far."""
        out = self.args.out_dir
        rows = pd.concat(self.frames, ignore_index=True) if self.frames else pd.DataFrame()
        self.meta["skipped"] = self.skipped
        self.meta["elapsed_s"] = round(time.perf_counter() - self.start, 1)
        self.meta["rows"] = len(rows)
        write_atomically(out / "cpu_measurements.csv.gz", lambda f: rows.to_csv(
            f, index=False, compression={"method": "gzip", "compresslevel": 9, "mtime": 0}))
        write_atomically(out / "cpu_summary.csv", lambda f: pd.DataFrame(
            self.summaries).to_csv(f, index=False, float_format="%.6g"))
        write_atomically(out / "cpu_metadata.json", lambda f: Path(f).write_text(
            json.dumps(self.meta, indent=1, default=str)))


def load_existing(run: Session) -> None:
    """``--append``: start from the dataset in ``--out-dir`` (without the grids
    ``--replace-micro`` measures again); this run's metadata goes under ``appended``."""
    out, args = run.args.out_dir, run.args
    run.frames.append(pd.read_csv(out / "cpu_measurements.csv.gz",
                                  keep_default_na=False, na_values=[""]))
    run.summaries.extend(pd.read_csv(out / "cpu_summary.csv").to_dict("records"))
    old = json.loads((out / "cpu_metadata.json").read_text())
    run.meta = {**old, "appended": [*old.get("appended", []), run.meta]}
    run.skipped = list(old.get("skipped", []))
    if args.replace_micro:
        run.frames[0], run.summaries = drop_micro(run.frames[0], run.summaries,
                                                  set(args.micro_families.split(",")))
    run.meta["elapsed_s_before_append"] = (float(old.get("elapsed_s", 0.0))
                                           + float(old.get("elapsed_s_before_append", 0.0)))


def calibrate_quietly(run: Session) -> dict[str, Any] | None:
    """The local calibration: measured now, or the appended dataset's (none with
    ``--no-calibration``)."""
    if run.args.no_calibration or run.args.append:
        return run.meta.get("calibration") if run.args.append else None
    calibration, share, attempts, _ = run.quietly(lambda: run_calibration(log), "calibration")
    run.meta["calibration_other_cpu_share"] = share
    run.meta["calibration_attempts"] = attempts
    return calibration


def measure_micro(run: Session, configs: list[Any]) -> None:
    """The microbenchmark grid at every thread count."""
    from roofcast.training_data.collectors.microbench import cases, run_cases

    micro = cases(run.args.micro_families.split(","), quick=run.args.quick)
    log(f"microbenchmarks: {len(micro)} cases x {len(configs)} thread counts")
    (micro_rows, micro_summary), share, attempts, waited = run.quietly(
        lambda: run_cases(micro, configs), "microbenchmarks")
    run.frames.append(micro_rows)
    for rec in micro_summary.to_dict("records"):
        run.summaries.append({**rec, "kind": "micro", "other_cpu_share": share,
                              "attempts": attempts, "waited_s": waited})
    run.flush()
    log(f"microbenchmarks done: {len(micro_rows)} rows, {run.left():.0f} s of budget left")


def model_plan(args: argparse.Namespace) -> list[tuple[str, dict[str, int], int]]:
    """(model, dims, level) breadth first: every model's smallest config, then larger ones."""
    from roofcast.training_data import zoo

    names = [] if args.no_models else (args.models or zoo.list_models())
    plan = []
    for level in range(max((len(model_configs(n, args.seq_configs)) for n in names), default=0)):
        for name in names:
            cfgs = model_configs(name, args.seq_configs)
            if level < (1 if args.quick else len(cfgs)):
                plan.append((name, cfgs[level], level))
    return plan


def measure_repeat(run: Session, prep: Any, label: str, cfg: Any, flops: float,
                   first: dict[str, Any]) -> None:
    """Repeat agreement: the same model and config measured again in a fresh session."""
    from roofcast.training_data.collectors.ort_cpu import measure_prepared

    again, share, attempts, waited = run.quietly(
        lambda: measure_prepared(prep, cfg), f"{label} repeat")
    run.summaries.append({**again.summary, "kind": "zoo-repeat", "flops": flops,
                          "repeat_of": first["run_id"], "other_cpu_share": share,
                          "attempts": attempts, "waited_s": waited})
    log(f"  repeat: e2e {again.summary['e2e_ms']:.1f} ms, op medians "
        f"{again.summary['sum_op_medians_ms']:.1f} vs {first['sum_op_medians_ms']:.1f}")


def measure_config(run: Session, prep: Any, label: str, cfg: Any, flops: float,
                   repeat: bool) -> None:
    """One prepared model at one thread count (and again in a fresh session if ``repeat``)."""
    from roofcast.training_data.collectors.ort_cpu import measure_prepared

    try:
        m, share, attempts, waited = run.quietly(
            lambda: measure_prepared(prep, cfg), f"{label} t={cfg.threads_intra}")
    except Exception as exc:
        run.skip(f"{label} t={cfg.threads_intra}: {type(exc).__name__}: {exc}")
        return
    run.frames.append(m.rows)
    run.summaries.append({**m.summary, "kind": "zoo", "flops": flops,
                          "other_cpu_share": share, "attempts": attempts, "waited_s": waited})
    s = m.summary
    log(f"{label} t={cfg.threads_intra}: e2e {s['e2e_ms']:.1f} ms, ops "
        f"{s['sum_ops_ms']:.1f} ms ({s['ops_over_e2e']:.2f}), joined "
        f"{s['joined_fraction']:.3f}, other CPU {run.summaries[-1]['other_cpu_share']}")
    if repeat:
        measure_repeat(run, prep, label, cfg, flops, s)


def measure_model(run: Session, name: str, dims: dict[str, int], level: int,
                  configs: list[Any]) -> None:
    """One zoo model at ``dims`` at every thread count, unless it cannot be prepared or its
    estimated time exceeds ``--max-config-s`` or the budget left."""
    from roofcast.training_data import zoo
    from roofcast.training_data.collectors.ort_cpu import prepare

    args, t0 = run.args, time.perf_counter()
    try:
        prep = prepare(zoo.model_path(name), dims, name=name)
    except Exception as exc:
        run.skip(f"{name} {dims}: cannot prepare ({type(exc).__name__}: {exc})")
        return
    flops = sum(op.cost.flops for op in prep.graph.ops() if op.cost is not None)
    runs = args.repeats + args.warmup
    calibration = run.meta["calibration"]
    est = sum(flops / (gemm_rate(calibration, c.threads_intra) * EFFICIENCY) * runs
              for c in configs) + (time.perf_counter() - t0)
    if est > args.max_config_s or est > run.left():
        run.skip(f"{name} {dims}: estimated {est:.0f} s (budget left {run.left():.0f} s, "
                 f"cap {args.max_config_s:.0f} s)", prefix="skip ")
        return
    for cfg in configs:
        measure_config(run, prep, f"{name} {dims}", cfg, flops,
                       repeat=level == 0 and cfg.threads_intra == 1)
    del prep
    run.flush()
    log(f"{name} {dims} done in {time.perf_counter() - t0:.0f} s; {run.left():.0f} s left")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        print_report(args.out_dir)
        return 0
    from roofcast.training_data.collectors.ort_cpu import MeasureConfig

    start = time.perf_counter()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    run = Session(args, new_metadata(args, argv), start)
    if args.append and (args.out_dir / "cpu_metadata.json").is_file():
        load_existing(run)
    run.meta["quiet_below"] = args.quiet_below
    run.meta["calibration"] = calibrate_quietly(run)
    configs = [MeasureConfig(threads_intra=t, repeats=args.repeats, warmup=args.warmup)
               for t in THREADS]
    if not args.no_micro:
        measure_micro(run, configs)
    for name, dims, level in model_plan(args):
        measure_model(run, name, dims, level, configs)
    run.meta["load_average_at_end"] = os.getloadavg()
    run.flush()
    log(f"done: {sum(len(f) for f in run.frames)} rows in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
