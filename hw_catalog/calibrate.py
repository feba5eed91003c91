"""Empirical roofline of the machine roofcast runs on (like the Empirical Roofline Toolkit).

Measures on the CPU (well under 90 s; ``quick`` a few seconds): GEMM FLOP/s per dtype and thread
count (one-node ONNX Runtime graphs: 2·n³ / fastest run; a dtype ORT cannot run is recorded as
not measured), sustained bandwidth per working-set size (``acc += a``, 12 B per element) for the
L1/L2/LLC/DRAM plateaus, and ONNX Runtime's per-op dispatch overhead ((chain of K Adds − one
Add) / (K − 1)). Ceilings are the best of several rounds: load only slows a timing down. The
result is a catalog device document (kind ``cpu``, id ``local``) with the raw curves in
``[calibration]``, written atomically.

Rationale: ``docs/design/module-notes.md`` (roofcast.hw_catalog.calibrate).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.tomlwrite import dumps
from roofcast.hw_catalog.validate import validate_document

Progress = Callable[[str], None]


# ---------------------------------------------------------------------------- plan (data)
@dataclass(frozen=True)
class Plan:
    """How much to measure. ``full`` stays under ~60 s on a 2-core machine."""

    gemm_sizes: tuple[int, ...]
    gemm_min_run_s: float  # stop growing n once one run takes this long
    gemm_repeats: int
    bw_sizes_KiB: tuple[int, ...]  # noqa: N815 (unit suffix)
    bw_trial_s: float  # target duration of one bandwidth trial
    bw_trials: int
    dispatch_nodes: int
    dispatch_repeats: int
    rounds: int  # GEMM and bandwidth passes, spread over time; best of all rounds is kept
    max_rounds: int  # more rounds while the best figures still improve (a busy machine)
    budget_s: float  # no new round starts that would end after this many seconds


PLANS: Mapping[str, Plan] = {
    "full": Plan(gemm_sizes=(256, 512, 1024, 2048), gemm_min_run_s=0.03, gemm_repeats=4,
                 bw_sizes_KiB=tuple(2**k for k in range(4, 20)), bw_trial_s=0.03, bw_trials=3,
                 dispatch_nodes=200, dispatch_repeats=100, rounds=3, max_rounds=6,
                 budget_s=65.0),
    "quick": Plan(gemm_sizes=(256, 512), gemm_min_run_s=0.005, gemm_repeats=3,
                  bw_sizes_KiB=(16, 256, 4096, 65536), bw_trial_s=0.01, bw_trials=3,
                  dispatch_nodes=50, dispatch_repeats=20, rounds=1, max_rounds=1,
                  budget_s=8.0),
}

GEMM_KERNELS: Mapping[str, tuple[str, str, str, str]] = {
    # dtype -> (ONNX op, A type, B type, output type) by TensorProto name
    "fp32": ("MatMul", "FLOAT", "FLOAT", "FLOAT"),
    "fp16": ("MatMul", "FLOAT16", "FLOAT16", "FLOAT16"),
    "bf16": ("MatMul", "BFLOAT16", "BFLOAT16", "BFLOAT16"),
    "int8": ("MatMulInteger", "UINT8", "INT8", "INT32"),
}
_NUMPY_INPUT: Mapping[str, Any] = {
    "FLOAT": np.float32, "FLOAT16": np.float16, "UINT8": np.uint8, "INT8": np.int8,
    "BFLOAT16": np.uint16,  # bit pattern, handed over as an OrtValue of type bfloat16
}
ROUND_IMPROVEMENT = 1.03
"""A further round is run (up to max_rounds) while a tracked ceiling improved by more than 3%."""

CPU_FLAGS_OF_INTEREST = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni",
                         "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile", "asimd", "sve")


# ---------------------------------------------------------------------------- machine facts
def _cpuinfo() -> dict[str, str]:
    facts: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return facts
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in facts:
            facts[key.strip()] = value.strip()
    return facts


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (``platform.processor()`` elsewhere)."""
    info = _cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or "unknown CPU"


def cpu_flags() -> list[str]:
    flags = set((_cpuinfo().get("flags") or _cpuinfo().get("Features") or "").split())
    return [f for f in CPU_FLAGS_OF_INTEREST if f in flags]


def logical_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cache_levels() -> list[dict[str, Any]]:
    """Data/unified caches of cpu0 from sysfs: level, size_bytes, shared_by (logical cpus)."""
    out = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if kind == "Instruction":
                continue
            size = _parse_size((index / "size").read_text().strip())
            shared = _count_cpus((index / "shared_cpu_list").read_text().strip())
            out.append({"level": int((index / "level").read_text()), "type": kind,
                        "size_bytes": size, "shared_by": shared})
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda c: c["level"])


def _parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text)
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]


def _count_cpus(cpu_list: str) -> int:
    n = 0
    for part in cpu_list.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def max_clock() -> tuple[float | None, str]:
    """Max clock in MHz and where it came from (cpufreq, else /proc/cpuinfo 'cpu MHz')."""
    path = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    try:
        return int(path.read_text()) / 1000.0, str(path)
    except (OSError, ValueError):
        pass
    mhz = [float(v) for k, v in re.findall(r"^(cpu MHz)\s*:\s*([\d.]+)", _read("/proc/cpuinfo"),
                                            re.MULTILINE)]
    return (max(mhz), "/proc/cpuinfo 'cpu MHz' (current clock)") if mhz else (None, "")


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def mem_total_GiB() -> float | None:
    m = re.search(r"^MemTotal:\s*(\d+)\s*kB", _read("/proc/meminfo"), re.MULTILINE)
    return int(m.group(1)) * 1024 / 2**30 if m else None


def thread_counts(n: int, quick: bool) -> list[int]:
    """1..n for n <= 8, else powers of two and n (quick: 1 and n)."""
    if quick:
        return sorted({1, n})
    if n <= 8:
        return list(range(1, n + 1))
    return sorted({*(2**k for k in range(n.bit_length()) if 2**k <= n), n})


# ---------------------------------------------------------------------------- GEMM
def _gemm_model(dtype: str, n: int) -> bytes:
    from onnx import TensorProto, helper

    op, ta, tb, tc = GEMM_KERNELS[dtype]
    graph = helper.make_graph(
        [helper.make_node(op, ["A", "B"], ["C"])], f"gemm_{dtype}",
        [helper.make_tensor_value_info("A", getattr(TensorProto, ta), [n, n]),
         helper.make_tensor_value_info("B", getattr(TensorProto, tb), [n, n])],
        [helper.make_tensor_value_info("C", getattr(TensorProto, tc), [n, n])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model.SerializeToString()


def _session(model: bytes, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def _gemm_feeds(dtype: str, n: int) -> dict[str, Any]:
    import onnxruntime as ort
    from onnx import TensorProto

    _, ta, tb, _ = GEMM_KERNELS[dtype]
    rng = np.random.default_rng(0)
    feeds = {}
    for name, t in (("A", ta), ("B", tb)):
        arr = rng.integers(0, 4, size=(n, n)).astype(_NUMPY_INPUT[t])
        if t == "BFLOAT16":
            arr = (rng.random((n, n), dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
            feeds[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                arr, onnx_element_type=TensorProto.BFLOAT16)
        else:
            feeds[name] = arr
    return feeds


def measure_gemm(dtype: str, threads: int, plan: Plan) -> tuple[float, int]:
    """Best GFLOP/s (GOP/s for int8) over the plan's sizes, and the n that achieved it.

    Raises RuntimeError with ONNX Runtime's message when the dtype cannot run here.
    """
    best, best_n = 0.0, 0
    for n in plan.gemm_sizes:
        try:
            sess = _session(_gemm_model(dtype, n), threads)
            feeds = _gemm_feeds(dtype, n)
            sess.run(None, feeds)
        except Exception as exc:  # ORT raises its own types; keep the reason
            raise RuntimeError(str(exc).splitlines()[0][:200]) from None
        times = []
        for _ in range(plan.gemm_repeats):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            times.append(time.perf_counter() - t0)
        run_s = min(times)
        gflops = 2.0 * n**3 / run_s / 1e9
        if gflops > best:
            best, best_n = gflops, n
        if run_s >= plan.gemm_min_run_s:
            break
    return best, best_n


# ---------------------------------------------------------------------------- bandwidth
BYTES_PER_ELEMENT_MOVED = 12
"""acc += a on float32: read a (4 B), read acc (4 B), write acc (4 B)."""


def _kernel_reduce(a: np.ndarray, acc: np.ndarray, reps: int) -> None:
    """``reps`` passes of acc += a in one numpy call (stride-0 view of a; no Python per pass)."""
    view = as_strided(a, shape=(reps + 1, a.size), strides=(0, a.itemsize))
    np.add.reduce(view, axis=0, out=acc)


def _kernel_loop(a: np.ndarray, acc: np.ndarray, reps: int) -> None:
    """``reps`` passes of acc += a, one numpy call per pass (fine for large arrays)."""
    for _ in range(reps):
        np.add(acc, a, out=acc)


LOOP_MIN_ARRAY_BYTES = 1 << 20
"""The per-call loop kernel runs only on arrays of at least this size."""

BW_KERNELS: Mapping[str, Callable[[np.ndarray, np.ndarray, int], None]] = {
    "reduce": _kernel_reduce, "loop": _kernel_loop,
}


def _parallel_time(kernel: Callable[..., None], arrays: Sequence[tuple[np.ndarray, np.ndarray]],
                   reps: int) -> float:
    """Wall time for every thread to run ``kernel`` on its own arrays (start on a barrier)."""
    if len(arrays) == 1:
        a, acc = arrays[0]
        t0 = time.perf_counter()
        kernel(a, acc, reps)
        return time.perf_counter() - t0
    barrier = threading.Barrier(len(arrays))
    stamps: list[tuple[float, float]] = []
    lock = threading.Lock()

    def work(a: np.ndarray, acc: np.ndarray) -> None:
        barrier.wait()
        t0 = time.perf_counter()
        kernel(a, acc, reps)
        t1 = time.perf_counter()
        with lock:
            stamps.append((t0, t1))

    workers = [threading.Thread(target=work, args=pair) for pair in arrays]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return max(t1 for _, t1 in stamps) - min(t0 for t0, _ in stamps)


def measure_bandwidth(ws_KiB: int, threads: int, plan: Plan, guess_GBps: float = 50.0
                      ) -> float:
    """Sustained GB/s of acc += a for a total working set of ``ws_KiB`` split over threads."""
    per_thread_elems = max(256, ws_KiB * 1024 // threads // 8)  # two float32 arrays
    arrays = [(np.ones(per_thread_elems, np.float32), np.zeros(per_thread_elems, np.float32))
              for _ in range(threads)]
    bytes_per_pass = BYTES_PER_ELEMENT_MOVED * per_thread_elems * threads
    reps = max(1, int(plan.bw_trial_s * guess_GBps * 1e9 / bytes_per_pass))
    best = 0.0
    for name, kernel in BW_KERNELS.items():
        if per_thread_elems * 4 < LOOP_MIN_ARRAY_BYTES and name == "loop":
            continue  # Python call overhead would dominate small arrays
        _parallel_time(kernel, arrays, 1)  # warm caches / page in
        rates = []
        for _ in range(plan.bw_trials):
            dt = _parallel_time(kernel, arrays, reps)
            rates.append(bytes_per_pass * reps / dt / 1e9)
        best = max(best, max(rates))
    return best


def plateaus(ws_KiB: Sequence[int], GBps: Sequence[float], caches: Sequence[Mapping[str, Any]],
             threads: int) -> dict[str, Any]:
    """Median bandwidth per cache-level band, and DRAM.

    Level capacities are totals over the threads (private caches x threads, shared caches
    once). A working set is in level X's band when (previous level's capacity) < ws <=
    (X's capacity / 2); sizes between half-full and full are transitions and in no band.
    DRAM: working sets >= 4x the last-level cache (else the largest size, flagged)."""
    bands: list[tuple[str, float]] = []
    for c in caches:
        total = c["size_bytes"] * (threads if c["shared_by"] == 1 else 1)
        bands.append((f"L{c['level']}", total))
    out: dict[str, Any] = {}
    lower = 0.0
    for name, capacity in bands:
        pts = [bw for ws, bw in zip(ws_KiB, GBps, strict=True)
               if lower < ws * 1024 <= capacity / 2]
        if pts:
            out[f"{name}_GBps"] = round(statistics.median(pts), 2)
        lower = capacity
    llc = bands[-1][1] if bands else 32 * 2**20
    dram = [bw for ws, bw in zip(ws_KiB, GBps, strict=True) if ws * 1024 >= 4 * llc]
    if dram:
        out["DRAM_GBps"] = round(statistics.median(dram), 2)
        out["DRAM_from_KiB"] = min(ws for ws in ws_KiB if ws * 1024 >= 4 * llc)
    else:
        out["DRAM_GBps"] = round(GBps[-1], 2)
        out["DRAM_from_KiB"] = ws_KiB[-1]
        out["DRAM_note"] = (f"largest working set ({ws_KiB[-1]} KiB) is under 4x the "
                            f"last-level cache; the DRAM figure may include cache hits")
    return out


def bw_saturation_threads(dram_1thread_GBps: float, dram_all_GBps: float, n_cpu: int) -> float:
    """Threads at which DRAM bandwidth saturates, from the model bw(t) = min(t·bw1, bwN):
    t* = bwN / bw1, clamped to 1..N."""
    if dram_1thread_GBps <= 0:
        return float(n_cpu)
    return round(min(max(dram_all_GBps / dram_1thread_GBps, 1.0), float(n_cpu)), 2)


def best_plateaus(one: Mapping[str, Any], many: Mapping[str, Any]) -> dict[str, Any]:
    """Per level, the higher of the 1-thread and all-thread plateaus (fewer threads are always
    an option, and on a busy machine one thread often gets a core when N threads cannot)."""
    out = dict(many)
    for key, value in one.items():
        if key.endswith("_GBps") and value > out.get(key, 0.0):
            out[key] = value
            out[key.replace("_GBps", "_threads")] = 1
            if key == "DRAM_GBps":
                out["DRAM_from_KiB"] = one["DRAM_from_KiB"]
    return out


# ---------------------------------------------------------------------------- dispatch
def _chain_model(k: int) -> bytes:
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Add", [f"t{i}", "one"], [f"t{i + 1}"]) for i in range(k)]
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info(f"t{k}", TensorProto.FLOAT, [1])],
        initializer=[helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model.SerializeToString()


def measure_dispatch(threads: int, plan: Plan) -> tuple[float, float]:
    """(per-node dispatch µs, fixed per-run µs) of ONNX Runtime on a chain of 1-element Adds
    (fastest run of each graph, as for the other ceilings)."""
    x = {"t0": np.zeros(1, np.float32)}

    def best_run_s(k: int) -> float:
        sess = _session(_chain_model(k), threads)
        for _ in range(3):
            sess.run(None, x)
        times = []
        for _ in range(plan.dispatch_repeats):
            t0 = time.perf_counter()
            sess.run(None, x)
            times.append(time.perf_counter() - t0)
        return min(times)

    one = best_run_s(1)
    many = best_run_s(plan.dispatch_nodes)
    per_node = max(many - one, 0.0) / (plan.dispatch_nodes - 1)
    return per_node * 1e6, one * 1e6


# ---------------------------------------------------------------------------- driver
def versions() -> dict[str, str]:
    import onnx
    import onnxruntime

    return {"python": platform.python_version(), "numpy": np.__version__,
            "onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__,
            "platform": platform.platform()}


def run_calibration(quick: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """Measure this machine; return a device document (id ``local``) ready to write."""
    say = progress or (lambda _msg: None)
    plan = PLANS["quick" if quick else "full"]
    start = time.perf_counter()
    load_before = _loadavg()
    n_cpu = logical_cpus()
    threads = thread_counts(n_cpu, quick)
    caches = cache_levels()

    cpu_before = _cpu_seconds()
    gemm_best, unsupported, bw_best = _measure_rounds(plan, threads, n_cpu, start, say)
    gemm = _gemm_results(threads, gemm_best, unsupported, say)
    bw1 = [round(bw_best[(ws, 1)], 2) for ws in plan.bw_sizes_KiB]
    bwn = [round(bw_best[(ws, n_cpu)], 2) for ws in plan.bw_sizes_KiB]
    for ws, b1, bn in zip(plan.bw_sizes_KiB, bw1, bwn, strict=True):
        say(f"bandwidth {ws:>7} KiB: {b1:7.1f} GB/s (1 thread) {bn:7.1f} GB/s ({n_cpu} threads)")
    one = plateaus(plan.bw_sizes_KiB, bw1, caches, 1)
    many = plateaus(plan.bw_sizes_KiB, bwn, caches, n_cpu)
    levels = best_plateaus(one, many)
    levels["DRAM_GBps_1thread"] = one["DRAM_GBps"]
    levels[f"DRAM_GBps_{n_cpu}threads"] = many["DRAM_GBps"]
    saturation = bw_saturation_threads(one["DRAM_GBps"], many["DRAM_GBps"], n_cpu)

    dispatch = _dispatch(plan, n_cpu, say)
    duration = time.perf_counter() - start
    doc = build_document(
        gemm=gemm, ws_KiB=list(plan.bw_sizes_KiB), bw1=bw1, bwn=bwn, levels=levels,
        caches=caches, dispatch=dispatch, quick=quick, duration_s=duration, n_cpu=n_cpu)
    cal = doc["calibration"]
    cal["bw_saturation_threads"] = saturation
    cal["load_average_1min"] = {"before": load_before, "after": _loadavg()}
    _note_other_load(cal, cpu_before, duration, n_cpu, load_before, say)
    return doc


def _measure_rounds(
    plan: Plan, threads: list[int], n_cpu: int, start: float, say: Progress
) -> tuple[dict[tuple[str, int], tuple[float, int]], dict[str, str], dict[tuple[int, int], float]]:
    """Repeat GEMM and bandwidth rounds until the best figures stop improving or time is up.

    Returns (best (GFLOP/s, n) per (dtype, threads), dtype -> why it cannot run, best GB/s per
    (working set KiB, threads)).
    """
    gemm_best: dict[tuple[str, int], tuple[float, int]] = {}
    unsupported: dict[str, str] = {}
    bw_best: dict[tuple[int, int], float] = {}
    tracked_before = (0.0, 0.0)
    r = 0
    while True:
        round_start = time.perf_counter()
        _gemm_round(plan, threads, gemm_best, unsupported)
        _bandwidth_round(plan, n_cpu, bw_best)
        r += 1
        tracked = (gemm_best.get(("fp32", n_cpu), (0.0, 0))[0],
                   bw_best[(plan.bw_sizes_KiB[-1], n_cpu)])
        say(f"round {r}: best so far fp32 GEMM {tracked[0]:.1f} GFLOP/s ({n_cpu} threads), "
            f"{tracked[1]:.1f} GB/s at {plan.bw_sizes_KiB[-1]} KiB")
        improved = any(now > ROUND_IMPROVEMENT * before
                       for now, before in zip(tracked, tracked_before, strict=True))
        tracked_before = tracked
        round_s = time.perf_counter() - round_start
        over_budget = time.perf_counter() - start + round_s > plan.budget_s
        if r >= plan.max_rounds or over_budget or (r >= plan.rounds and not improved):
            return gemm_best, unsupported, bw_best


def _gemm_round(
    plan: Plan,
    threads: list[int],
    gemm_best: dict[tuple[str, int], tuple[float, int]],
    unsupported: dict[str, str],
) -> None:
    """One GEMM round over dtypes and thread counts; keeps the best rate per (dtype, threads)."""
    for dtype in GEMM_KERNELS:
        for t in threads if dtype not in unsupported else ():
            try:
                got = measure_gemm(dtype, t, plan)
            except RuntimeError as exc:
                unsupported[dtype] = str(exc)
                break
            if got[0] > gemm_best.get((dtype, t), (0.0, 0))[0]:
                gemm_best[(dtype, t)] = got


def _bandwidth_round(plan: Plan, n_cpu: int, bw_best: dict[tuple[int, int], float]) -> None:
    """One bandwidth round over working sets at 1 and all threads; keeps the best rates."""
    bw_threads = sorted({1, n_cpu})
    guess = 50.0
    for ws in plan.bw_sizes_KiB:
        for t in bw_threads:
            rate = measure_bandwidth(ws, t, plan, guess)
            bw_best[(ws, t)] = max(bw_best.get((ws, t), 0.0), rate)
        guess = max(bw_best[(ws, n_cpu)], 1.0)


def _gemm_results(
    threads: list[int],
    gemm_best: Mapping[tuple[str, int], tuple[float, int]],
    unsupported: Mapping[str, str],
    say: Progress,
) -> dict[str, Any]:
    """The ``[calibration.gemm]`` table: a curve per dtype, or why it was not measured."""
    gemm: dict[str, Any] = {}
    for dtype in GEMM_KERNELS:
        if dtype in unsupported:
            gemm[dtype] = {"not_measured": f"ONNX Runtime CPU provider cannot run {dtype} "
                                           f"{GEMM_KERNELS[dtype][0]} here: "
                                           f"{unsupported[dtype]}"}
            say(f"GEMM {dtype:>4}: not measured ({unsupported[dtype]})")
            continue
        gemm[dtype] = {"threads": threads,
                       "GFLOPs": [round(gemm_best[(dtype, t)][0], 2) for t in threads],
                       "n": [gemm_best[(dtype, t)][1] for t in threads]}
        for t, g in zip(threads, gemm[dtype]["GFLOPs"], strict=True):
            unit = "GOP/s" if dtype == "int8" else "GFLOP/s"
            say(f"GEMM {dtype:>4} {t:>3} threads: {g:8.1f} {unit}")
    return gemm


def _dispatch(plan: Plan, n_cpu: int, say: Progress) -> dict[str, Any]:
    """The ``[calibration.dispatch]`` table: per-node and per-run dispatch at 1 and N threads."""
    per_node_1, run_1 = measure_dispatch(1, plan)
    per_node_n, run_n = measure_dispatch(n_cpu, plan) if n_cpu > 1 else (per_node_1, run_1)
    say(f"dispatch: {per_node_n:.2f} us/node ({n_cpu} threads), {per_node_1:.2f} us/node (1)")
    return {"per_node_us_all_threads": round(per_node_n, 3),
            "per_node_us_1thread": round(per_node_1, 3),
            "session_run_us_all_threads": round(run_n, 2),
            "session_run_us_1thread": round(run_1, 2),
            "chain_nodes": plan.dispatch_nodes}


def _note_other_load(
    cal: dict[str, Any],
    cpu_before: tuple[float, float] | None,
    duration: float,
    n_cpu: int,
    load_before: float,
    say: Progress,
) -> None:
    """Record (and warn about) the CPU share other processes took during the calibration."""
    other = _other_cpu_share(cpu_before, _cpu_seconds(), duration, n_cpu)
    if other is not None:
        cal["other_processes_cpu_share"] = round(other, 3)
    if other is not None and other > 0.1:
        say(f"warning: other processes used {100 * other:.0f}% of the {n_cpu} CPUs during "
            f"calibration (1-min load average {load_before:.2f} before, {_loadavg():.2f} "
            f"after); figures may be low — re-run on an idle machine")


def _cpu_seconds() -> tuple[float, float] | None:
    """(CPU-seconds busy on the whole machine from /proc/stat, CPU-seconds of this process)."""
    line = _read("/proc/stat").split("\n", 1)[0].split()
    if not line or line[0] != "cpu":
        return None
    ticks = [int(v) for v in line[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    own = os.times()
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK"), own.user + own.system


def _other_cpu_share(before: tuple[float, float] | None, after: tuple[float, float] | None,
                     wall_s: float, n_cpu: int) -> float | None:
    """Fraction of all CPUs' time used by other processes during the calibration."""
    if before is None or after is None or wall_s <= 0:
        return None
    busy = after[0] - before[0]
    own = after[1] - before[1]
    return max(busy - own, 0.0) / (wall_s * n_cpu)


def _loadavg() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


def _max_gemm(gemm: Mapping[str, Any], dtype: str) -> float | None:
    curve = gemm.get(dtype, {}).get("GFLOPs")
    return max(curve) if curve else None


def build_document(*, gemm: Mapping[str, Any], ws_KiB: list[int], bw1: list[float],
                   bwn: list[float], levels: Mapping[str, Any], caches: list[dict[str, Any]],
                   dispatch: Mapping[str, Any], quick: bool, duration_s: float, n_cpu: int
                   ) -> dict[str, Any]:
    """The ``local`` device document in the catalog schema plus ``[calibration]``."""
    now = _dt.datetime.now(_dt.UTC)
    vendor, arch = _vendor_and_architecture(_cpuinfo())
    clock_MHz, clock_src = max_clock()
    mem_GiB = mem_total_GiB()
    vers = versions()
    fp32, matrix = _matrix_peaks(gemm)
    llc = caches[-1]["size_bytes"] if caches else None
    l1 = next((c["size_bytes"] for c in caches if c["level"] == 1), None)
    doc: dict[str, Any] = {
        "id": "local",
        "name": f"local: {cpu_model()} ({n_cpu} logical CPUs)",
        "vendor": vendor,
        "kind": "cpu",
        "architecture": arch,
        "sources": [
            f"measured on this machine by `roofcast hw calibrate` on {now:%Y-%m-%d %H:%M} UTC "
            f"(ONNX Runtime {vers['onnxruntime']}, numpy {vers['numpy']})",
            "CPU model: /proc/cpuinfo; cache sizes: /sys/devices/system/cpu/cpu0/cache",
        ],
        "notes": _notes(gemm, quick),
        "compute": {
            "units": n_cpu,
            "unit_name": "core",
            "boost_clock_MHz": round(clock_MHz or 1000.0, 1),
        },
        "peak_TOPS": {"matrix": matrix, "vector": {"fp32": round(fp32 / 1e3, 6)}},
        "memory": {
            "capacity_GB": round(mem_GiB or 1.0, 2),
            "bandwidth_GBps": levels["DRAM_GBps"],
            "type": "DRAM (type not detected)",
        },
        "cache": {"l2_MB": round((llc or 2**20) / 2**20, 3)},
        "overhead": {"launch_overhead_us": max(round(dispatch["per_node_us_all_threads"], 3), 0.1)},
    }
    if l1:
        doc["cache"]["l1_per_unit_KB"] = l1 / 1024
    doc["calibration"] = {
        "date": now.isoformat(timespec="seconds"),
        "cpu_model": cpu_model(),
        "cpu_flags": cpu_flags(),
        "logical_cpus": n_cpu,
        "clock_source": clock_src or "unknown (1000 MHz placeholder)",
        "memory_capacity_source": "/proc/meminfo MemTotal" if mem_GiB else "unknown",
        "quick": quick,
        "duration_s": round(duration_s, 2),
        "versions": vers,
        "caches": _cache_table(caches),
        "gemm": dict(gemm),
        "bandwidth": {"kernel": "acc += a, float32, 12 bytes per element",
                      "working_set_KiB": ws_KiB, "GBps_1thread": bw1,
                      f"GBps_{n_cpu}threads": bwn, "plateaus": dict(levels)},
        "dispatch": dict(dispatch),
    }
    return doc


def _vendor_and_architecture(info: Mapping[str, str]) -> tuple[str, str]:
    """(vendor, architecture) from /proc/cpuinfo fields and the platform."""
    vendor = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(
        info.get("vendor_id", ""), info.get("vendor_id") or platform.machine() or "unknown")
    arch = platform.machine() + (f" (family {info['cpu family']} model {info['model']})"
                                 if "cpu family" in info and "model" in info else "")
    return vendor, arch


def _matrix_peaks(gemm: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
    """(best fp32 GFLOP/s, matrix peaks in TOPS per dtype); no fp32 curve is an error."""
    fp32 = _max_gemm(gemm, "fp32")
    if fp32 is None:
        raise HardwareSpecError("calibration could not measure fp32 GEMM with ONNX Runtime: "
                                f"{gemm['fp32'].get('not_measured')}")
    matrix = {"fp32": round(fp32 / 1e3, 6)}
    for dtype in ("fp16", "bf16", "int8"):
        value = _max_gemm(gemm, dtype)
        if value is not None:
            matrix[dtype] = round(value / 1e3, 6)
    return fp32, matrix


def _notes(gemm: Mapping[str, Any], quick: bool) -> str:
    """The document's notes: how each figure was measured, and what was not."""
    not_measured = [f"{d}: {g['not_measured']}" for d, g in gemm.items() if "not_measured" in g]
    return (
        "Empirical roofline (achieved, not nominal): matrix and vector fp32 = best ONNX "
        "Runtime fp32 MatMul over 1..N threads; fp16/int8 matrix = ORT MatMul / "
        "MatMulInteger(u8 x s8) achieved; memory bandwidth = DRAM plateau of acc += a "
        "(12 B/element), the better of 1 and all threads; l2_MB = last-level cache; "
        "launch_overhead_us = ORT per-node dispatch. "
        f"{'QUICK run: fewer sizes and repeats. ' if quick else ''}"
        + (" Not measured: " + "; ".join(not_measured) if not_measured else "")
    )


def _cache_table(caches: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"L{c['level']}_{c['type']}": {"size_bytes": c["size_bytes"],
                                           "shared_by_cpus": c["shared_by"]}
            for c in caches}


def write_local(doc: Mapping[str, Any], path: Path) -> Path:
    """Validate ``doc`` and write it to ``path`` atomically (temp file + ``os.replace``)."""
    validate_document(doc, f"{path} (calibration result)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".local-", suffix=".toml.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("# Written by `roofcast hw calibrate`; re-run it to refresh.\n")
            fh.write(dumps(doc))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
