"""Reasons of an advice, computed from its predicted cells (no canned text without numbers).

Each function reads the per-op frames of ``Advice.cells`` and returns sentences (possibly none):
``summary`` (the recommendation and its gain over the runtime's default), ``thread_reasons``
(CPU: time per thread count, where it saturates and why), ``inter_op_reasons`` (critical path
``L`` against the sequential sum ``W``), ``batch_reasons`` (per-sample time and matrix-op
intensity per batch), ``bound_changes``, ``fusion_reasons`` (kernels and time with and without
the runtime's fusions; nothing when both are the same) and ``memory_reasons``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from roofcast.predictor.advisor_cells import MIN_GAIN, packed_time, step_time
from roofcast.predictor.features import bw_saturation_threads

SATURATION_GAIN = 1.05  # "stops paying": less than 5 % faster than the best thread count
BRANCH_RATIO = 0.95  # L / W below this: the graph has parallel branches worth naming


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms"


def _share(per_op: pd.DataFrame, bound: str) -> float:
    total = float(per_op["time_s"].sum())
    return float(per_op.loc[per_op["bound"] == bound, "time_s"].sum()) / total if total else 0.0


def summary(advice, hw) -> list[str]:
    rec, dft = advice.recommended, advice.default
    measure = "latency" if advice.objective == "latency" else "throughput (samples/s)"
    if rec == dft:
        others = advice.table[~advice.table["is_default"] & advice.table["fits"]]
        best = (f" (best other: {others['setting'].iloc[0]}, {float(others['gain'].iloc[0]):.3f}×)"
                if len(others) else "")
        return [f"keep the default ({dft.label()}): no setting is predicted to improve "
                f"{measure} by {(MIN_GAIN - 1):.0%} or more{best}"]
    return [f"recommended {rec.label()}: predicted {advice.predicted_gain:.3g}× {measure} "
            f"over the default of {advice.runtime or 'the runtime'} ({dft.label()}) on "
            f"{advice.device}"]


def _cells_over_threads(advice, s) -> list:
    return sorted((c for k, c in advice.cells.items()
                   if k[:4] == (s.batch, s.precision, s.mode, s.fusion) and c.threads),
                  key=lambda c: c.threads)


def _speedup(a: pd.DataFrame, b: pd.DataFrame, keys: Sequence[str]) -> float:
    ta = float(a.loc[a["key"].isin(keys), "time_s"].sum())
    tb = float(b.loc[b["key"].isin(keys), "time_s"].sum())
    return ta / tb if tb > 0 else float("nan")


def thread_reasons(advice, hw) -> list[str]:
    cells = _cells_over_threads(advice, advice.recommended)
    if len(cells) < 2:
        return []
    times = [c.sequential_s for c in cells]
    best = min(times)
    curve = ", ".join(f"{c.threads}: {_ms(c.sequential_s)}" for c in cells)
    out = [f"intra-op threads (sequential, batch {cells[0].batch}): {curve}"]
    t_stop = next(c.threads for c, t in zip(cells, times, strict=True)
                  if t <= best * SATURATION_GAIN)
    first, last = cells[0], cells[-1]
    stop_cell = next(c for c in cells if c.threads == t_stop)
    mem_keys = stop_cell.per_op.loc[stop_cell.per_op["bound"] == "memory", "key"].tolist()
    ovh_keys = stop_cell.per_op.loc[stop_cell.per_op["bound"] == "overhead", "key"].tolist()
    cmp_keys = stop_cell.per_op.loc[stop_cell.per_op["bound"] == "compute", "key"].tolist()
    mem_share = _share(stop_cell.per_op, "memory")
    ovh_share = _share(stop_cell.per_op, "overhead")
    sat = bw_saturation_threads(hw)
    parts = []
    if mem_keys:
        parts.append(f"{len(mem_keys)} memory-bound ops hold {mem_share:.0%} of the time at "
                     f"{t_stop} threads and speed up only "
                     f"{_speedup(first.per_op, last.per_op, mem_keys):.2f}× from {first.threads} "
                     f"to {last.threads} threads: DRAM bandwidth saturates at {sat:g} "
                     "thread(s)")
    if ovh_keys:
        parts.append(f"{len(ovh_keys)} overhead-bound ops ({ovh_share:.0%} of the time) sit on "
                     "the dispatch floor, which threads do not lower")
    if cmp_keys:
        parts.append(f"{len(cmp_keys)} compute-bound ops speed up "
                     f"{_speedup(first.per_op, last.per_op, cmp_keys):.2f}× from "
                     f"{first.threads} to {last.threads} threads")
    if t_stop < last.threads:
        out.append(f"more threads stop paying beyond {t_stop} (less than "
                   f"{SATURATION_GAIN - 1:.0%} further gain): " + "; ".join(parts))
    elif parts:
        out.append("threads keep paying up to all " + str(last.threads) + ": "
                   + "; ".join(parts))
    return out


def inter_op_reasons(advice, hw) -> list[str]:
    s = advice.recommended
    cell = advice.cells.get((s.batch, s.precision, s.mode, s.fusion, s.threads))
    if cell is None or cell.sequential_s <= 0:
        return []
    ratio = cell.critical_path_s / cell.sequential_s
    costed = set(cell.per_op["node"])
    path = [n for n in cell.critical_path if n in costed]
    ends = f" ({path[0]} … {path[-1]}, {len(path)} ops)" if path else ""
    head = (f"critical path L = {_ms(cell.critical_path_s)} is {ratio:.0%} of the sequential "
            f"sum W = {_ms(cell.sequential_s)}{ends}")
    if s.inter_op:
        par = step_time(cell, True, s.inter_op_threads, hw)
        seq = advice.row(advice.default)["time_ms"] / 1e3
        packed = packed_time(cell, s.inter_op_threads, hw) if hw.kind == "cpu" else 0.0
        return [f"inter-op parallelism helps: the graph has parallel branches — {head}; "
                f"{s.inter_op_threads} concurrent ops of {s.threads} thread(s) give "
                f"max(L, packed W) = max({_ms(cell.critical_path_s)}, {_ms(packed)}) = "
                f"{_ms(par)} against {_ms(seq)} for the default"
                if hw.kind == "cpu" else
                f"inter-op parallelism helps: the graph has parallel branches — {head}"]
    if ratio >= BRANCH_RATIO:
        return [f"inter-op parallelism cannot help: {head} — the graph is (nearly) a chain"]
    alts = advice.table[(advice.table["inter_op"]) & (advice.table["batch"] == s.batch)
                        & (advice.table["precision"] == s.precision)
                        & (advice.table["fusion"] == s.fusion)
                        & (advice.table["mode"] == s.mode)]
    if alts.empty:
        return [f"the graph has parallel branches ({head}), but with {hw.units} unit(s) no "
                "inter-op pool of two or more concurrent ops fits beside the intra-op threads"]
    alt = alts.sort_values("time_ms").iloc[0]
    row = advice.row(s)
    return [f"the graph has parallel branches ({head}), but the best inter-op setting "
            f"({alt['setting']}: {alt['time_ms']:.4g} ms) is predicted slower than "
            f"{row['time_ms']:.4g} ms sequential: its ops scale with intra-op threads"]


def batch_reasons(advice, hw) -> list[str]:
    if advice.objective != "throughput":
        return []
    rec, dft = advice.recommended, advice.default
    key = (rec.precision, rec.mode, rec.fusion, rec.threads)
    cells = sorted((c for k, c in advice.cells.items() if (k[1], k[2], k[3], k[4]) == key),
                   key=lambda c: c.batch)
    if len(cells) < 2:
        return []
    a = next((c for c in cells if c.batch == dft.batch), cells[0])
    b = next((c for c in cells if c.batch == rec.batch), cells[-1])

    def per_sample(c) -> float:
        return c.sequential_s / c.batch

    def intensity(c) -> float:
        m = c.per_op[c.per_op["engine"] == "matrix"]
        moved = float((m["bytes_read"] + m["bytes_written"]).sum())
        return float(m["flops"].sum()) / moved if moved > 0 else float("nan")

    out = [f"batch {a.batch} → {b.batch}: per-sample time {_ms(per_sample(a))} → "
           f"{_ms(per_sample(b))} ({per_sample(a) / per_sample(b):.2f}×); overhead-bound "
           f"(launch/dispatch) kernels hold {_share(a.per_op, 'overhead'):.0%} → "
           f"{_share(b.per_op, 'overhead'):.0%} of the time, memory-bound "
           f"{_share(a.per_op, 'memory'):.0%} → {_share(b.per_op, 'memory'):.0%}; the matrix "
           f"ops' arithmetic intensity rises {intensity(a):.3g} → {intensity(b):.3g} FLOP/B "
           "(weights are read once per batch)"]
    biggest = cells[-1]
    if biggest.batch > b.batch:
        out.append(f"larger batches stop paying: batch {biggest.batch} gives "
                   f"{_ms(per_sample(biggest))} per sample, "
                   f"{per_sample(b) / per_sample(biggest):.3f}× of batch {b.batch}")
    if _share(a.per_op, "overhead") > 0.5:
        out.append(f"at batch {a.batch} launch/dispatch overhead dominates "
                   f"({_share(a.per_op, 'overhead'):.0%} of the predicted time): batching "
                   "amortises it")
    return out


def bound_changes(advice, hw) -> list[str]:
    rec, dft = advice.recommended, advice.default
    if rec == dft:
        return []
    a = advice.cell(dft).per_op[["key", "fused_nodes", "bound", "time_s"]]
    b = advice.cell(rec).per_op[["key", "bound", "time_s"]]
    m = a.merge(b, on="key", suffixes=("_dft", "_rec"))
    changed = m[m["bound_dft"] != m["bound_rec"]]
    if changed.empty:
        return [f"no op changes bound between the default and the recommendation "
                f"({len(m)} ops compared)"]
    counts = (changed.groupby(["bound_dft", "bound_rec"]).size()
              .sort_values(ascending=False))
    pairs = ", ".join(f"{n} {f}→{t}" for (f, t), n in counts.items())
    top = changed.nlargest(3, "time_s_dft")["fused_nodes"].tolist()
    return [f"{len(changed)} of {len(m)} ops change bound from the default to the "
            f"recommendation: {pairs} (largest: {', '.join(top)})"]


def fusion_reasons(advice, hw) -> list[str]:
    s = advice.recommended
    on = advice.cells.get((s.batch, s.precision, s.mode, True, s.threads))
    off = advice.cells.get((s.batch, s.precision, s.mode, False, s.threads))
    if on is None or off is None or (len(on.per_op) == len(off.per_op)
                                     and on.sequential_s == off.sequential_s):
        return []  # no fusion setting, or one that changes nothing: nothing to say
    return [f"graph optimisation: fusion (opt level all) runs {len(on.per_op)} kernels "
            f"instead of {len(off.per_op)} (basic): {_ms(on.sequential_s)} vs "
            f"{_ms(off.sequential_s)} sequential ({off.sequential_s / on.sequential_s:.3f}×)"]


def memory_reasons(advice, hw) -> list[str]:
    bad = advice.table[~advice.table["fits"]]
    if bad.empty:
        return []
    worst = bad.sort_values("memory_MB").iloc[0]
    return [f"{len(bad)} setting(s) do not fit the {hw.mem_capacity_bytes / 1e9:.4g} GB of "
            f"{hw.id} (smallest misfit: {worst['setting']} needs {worst['memory_MB']:.4g} MB) "
            "and are never recommended"]


REASONS = (summary, thread_reasons, inter_op_reasons, batch_reasons, bound_changes,
           fusion_reasons, memory_reasons)


def reasons_for(advice, hw) -> list[str]:
    """All reasons, in the order of ``REASONS``."""
    return [line for fn in REASONS for line in fn(advice, hw)]
