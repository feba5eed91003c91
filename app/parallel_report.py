"""Tables of multi-device results for the terminal: one plan's step (``predict``), several
systems (``compare``), a ranked plan search (``plan``).

Times are seconds (a 70B training step takes tens of seconds, a BERT step milliseconds: the
table format keeps 4 significant digits either way), memory GiB per device. ``json`` gives the
contract's records (``ParallelPrediction.as_dict``: seconds, bytes) so scripts read one shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from roofcast.app.output import Table

if TYPE_CHECKING:
    import pandas as pd

    from roofcast.predictor.parallel.types import ParallelPrediction

GIB = 2.0**30
#: (label, ``ParallelPrediction`` field) of the parts of a step; they sum to ``step_s``.
STEP_PARTS: tuple[tuple[str, str], ...] = (
    ("compute", "compute_s"), ("exposed communication", "exposed_comm_s"),
    ("pipeline bubble", "bubble_s"), ("optimizer", "optimizer_s"))
#: (label, ``as_dict`` key) of the per-device memory.
MEMORY_PARTS: tuple[tuple[str, str], ...] = (
    ("weights", "weights_bytes"), ("gradients", "gradients_bytes"),
    ("optimizer states", "optimizer_bytes"), ("activations", "activations_bytes"),
    ("working set / other", "other_bytes"), ("total", "memory_bytes"),
    ("device capacity", "capacity_bytes"))
#: columns of a plan row in the table format (``plan`` and ``compare``; the plan's degrees
#: are in its label ``dp4 tp8 pp1 m16 z1``; csv / json have every ``as_dict`` column).
PLAN_COLUMNS: tuple[str, ...] = (
    "plan", "micro_batch", "step_s", "compute_s", "exposed_comm_s", "bubble_s", "optimizer_s",
    "samples_per_s", "tokens_per_s", "memory_GiB", "capacity_GiB", "fits", "over_GiB")


def fit_sentence(record: Mapping[str, Any]) -> str:
    """``fits (61.2 of 79.6 GiB)`` or ``does not fit: 103.4 GiB per device, 23.8 GiB over the
    79.6 GiB of h100-sxm`` from an ``as_dict`` record."""
    total, cap = record["memory_bytes"] / GIB, record["capacity_bytes"] / GIB
    if record["fits"]:
        return f"fits ({total:.4g} of {cap:.4g} GiB per device)"
    return (f"does not fit: {total:.4g} GiB per device, {record['over_bytes'] / GIB:.4g} GiB "
            f"over the {cap:.4g} GiB of {record['device']}")


def gib_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """``memory_GiB``, ``capacity_GiB``, ``over_GiB`` of an ``as_dict`` record."""
    return {"memory_GiB": record["memory_bytes"] / GIB,
            "capacity_GiB": record["capacity_bytes"] / GIB,
            "over_GiB": record["over_bytes"] / GIB}


# ----------------------------------------------------------------------------- one step
def step_output(pred: ParallelPrediction, fmt: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tables and header of one plan's step. table: the header (model, system, plan, step time
    with its interval, throughput, memory verdict), the breakdown (parts summing to the step,
    with shares), communication per group before overlap, each stage's micro-batch time and
    the per-device memory; json: the ``as_dict`` record with ``stage_s``; csv: that record as
    one row. Notes: ``extra["_notes"]`` (stderr) except in json."""
    record = pred.as_dict()
    notes = record.pop("notes")
    if fmt == "json":
        return {}, {**record, "stage_s": list(pred.stage_s), "notes": notes}
    if fmt == "csv":
        return {"step": Table.from_records([record], tuple(record))}, {"_notes": notes}
    extra = {
        "model": pred.model, "system": pred.system, "device": pred.device,
        "devices": pred.plan.n_devices, "plan": pred.plan.label(), "mode": pred.mode,
        "global_batch": pred.global_batch, "micro_batch": pred.micro_batch,
        "runtime": pred.runtime, "estimator": pred.estimator, "step_s": pred.step_s,
        "step_interval_s": f"{pred.lower_s:.4g} .. {pred.upper_s:.4g}",
        "samples_per_s": pred.samples_per_s,
        **({} if pred.tokens_per_s is None else {"tokens_per_s": pred.tokens_per_s}),
        "memory": fit_sentence(record), "_notes": notes,
    }
    step = pred.step_s
    breakdown = Table.from_records(
        [{"part": label, "time_s": getattr(pred, field),
          "share": getattr(pred, field) / step if step > 0 else 0.0}
         for label, field in STEP_PARTS] + [{"part": "step", "time_s": step, "share": 1.0}],
        ("part", "time_s", "share"))
    comm = Table.from_records(
        [{"group": g, "time_s": float(t)} for g, t in pred.comm_s_by_group.items()],
        ("group", "time_s"))
    stages = Table.from_records(
        [{"stage": i, "time_s": t} for i, t in enumerate(pred.stage_s)], ("stage", "time_s"))
    memory = Table.from_records(
        [{"component": label, "GiB": record[key] / GIB} for label, key in MEMORY_PARTS],
        ("component", "GiB"))
    return ({"breakdown": breakdown, "communication_before_overlap": comm,
             "stages_per_micro_batch": stages, "memory_per_device": memory}, extra)


# ----------------------------------------------------------------------------- several systems
def systems_output(preds: Sequence[ParallelPrediction], fmt: str
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """One row per system of ``compare --system A,B``: the plan, the step and its parts,
    ``speedup`` (the first system's step / this one's), memory per device and fit."""
    records = []
    base = preds[0].step_s
    for p in preds:
        r = p.as_dict()
        notes = r.pop("notes")
        records.append({**r, **gib_columns(r), "devices": p.plan.n_devices,
                        "speedup": base / p.step_s if p.step_s > 0 else None,
                        "_notes": [f"{p.system}: {n}" for n in notes]})
    notes = [n for r in records for n in r.pop("_notes")]
    first = preds[0]
    extra: dict[str, Any] = {"model": first.model, "mode": first.mode,
                             "global_batch": first.global_batch, "estimator": first.estimator,
                             "baseline": first.system}
    if fmt == "json":
        return {"systems": Table.from_records(records, tuple(records[0]))}, {**extra,
                                                                            "notes": notes}
    columns = ("system", "device", "devices", "speedup", *PLAN_COLUMNS)
    if fmt == "csv":
        columns = (*columns, *(k for k in records[0] if k not in columns))
    return {"systems": Table.from_records(records, columns)}, {**extra, "_notes": notes}


# ----------------------------------------------------------------------------- plan search
def _number(value: Any) -> bool:
    """A value that is a number (not None, not NaN)."""
    return isinstance(value, int | float) and value == value


def plan_rows(table: pd.DataFrame, fmt: str = "json") -> list[dict[str, Any]]:
    """The search's table (``as_dict`` columns + rank) as records with memory in GiB; a CSV
    cell holds the notes as one "; "-separated string."""
    rows = [{**r, **gib_columns(r)} for r in table.to_dict("records")]
    if fmt == "csv":
        for r in rows:
            r["notes"] = "; ".join(r.get("notes") or ())
    return rows


def closest_sentence(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """None when some plan fits; else which plan comes closest to fitting and by how much it is
    over (the least ``over_bytes``), or that no plan was evaluated."""
    if any(r["fits"] for r in rows):
        return None
    if not rows:
        return "no plan could be evaluated (every one was rejected: see rejected)"
    best = min(rows, key=lambda r: r["over_bytes"])
    return (f"no plan fits: the closest, {best['plan']}, needs {best['memory_GiB']:.4g} GiB per "
            f"device, {best['over_GiB']:.4g} GiB over the {best['capacity_GiB']:.4g} GiB of "
            f"{best['device']}")


def search_output(search: Any, fmt: str, top: int | None, header: Mapping[str, Any]
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tables and header of a training / inference plan search (``PlanSearch``): the ranked
    plans (``top``: the first N), why plans were rejected (reason -> count), the verdict
    (best plan, or by how much the closest is over)."""
    rows = plan_rows(search.table, fmt)
    fitting = sum(1 for r in rows if r["fits"])
    verdict = closest_sentence(rows)
    extra: dict[str, Any] = {
        **header, "plans_evaluated": len(rows), "plans_that_fit": fitting,
        "plans_rejected": int(sum(search.rejected.values())),
        "search_s": float(search.elapsed_s),
    }
    if search.best is not None:
        best = search.best.as_dict()
        extra.update({"best": best["plan"], "best_step_s": best["step_s"],
                      "best_memory": fit_sentence(best)})
    if verdict is not None:
        extra["verdict"] = verdict
    rejected = Table.from_records(
        [{"reason": k, "plans": int(v)} for k, v in sorted(search.rejected.items(),
                                                          key=lambda kv: -kv[1])],
        ("reason", "plans"))
    if fmt == "json":
        return {"plans": Table.from_records(rows[:top] if top else rows,
                                            tuple(rows[0]) if rows else ("rank",)),
                "rejected": rejected}, extra
    columns = ("rank", *PLAN_COLUMNS)
    if fmt == "table" and not any(_number(r.get("tokens_per_s")) for r in rows):
        columns = tuple(c for c in columns if c != "tokens_per_s")  # not a sequence model
    if fmt == "csv":
        columns = (*columns, *(k for k in (rows[0] if rows else {}) if k not in columns))
    table = Table.from_records(rows, columns).head(top)
    tables: dict[str, Any] = {"plans": table}
    if fmt == "table" and rejected.rows:
        tables["rejected"] = rejected
    return tables, extra


#: columns of a serving plan in the table format (csv / json: every column of
#: ``serving_plan_search``).
SERVING_COLUMNS: tuple[str, ...] = (
    "rank", "plan", "replicas", "batch", "ttft_ms", "tpot_ms", "tokens_per_s", "comm_tpot_ms",
    "memory_GiB", "capacity_GiB", "fits", "over_GiB")


def serving_output(df: pd.DataFrame, fmt: str, top: int | None, header: Mapping[str, Any]
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tables and header of a serving plan search (``serving_plan_search``'s DataFrame, ranked
    by tokens/s of all replicas): the plans (``top``: the first N); when none fits, which
    comes closest and by how much it is over; the shown plans' notes (stderr in table/csv)."""
    records = df.to_dict("records")
    fitting = sum(1 for r in records if r["fits"])
    extra: dict[str, Any] = {**header, "plans_evaluated": len(records),
                             "plans_that_fit": fitting}
    if records and fitting:
        best = records[0]
        extra.update({"best": best["plan"], "best_tokens_per_s": best["tokens_per_s"]})
    elif records:
        over = [r for r in records if r["over_GiB"] == r["over_GiB"]]  # measured excess
        close = min(over, key=lambda r: r["over_GiB"]) if over else records[0]
        extra["verdict"] = (f"no serving plan fits: the closest, {close['plan']}, needs "
                            f"{close['memory_GiB']:.4g} GiB per device, {close['over_GiB']:.4g} "
                            f"GiB over the {close['capacity_GiB']:.4g} GiB")
    shown = records[:top] if top else records
    notes = [f"{r['plan']}: {r['notes']}" for r in shown if r["fits"] and r.get("notes")]
    if fmt == "json":
        return {"plans": Table.from_records(shown, tuple(df.columns))}, {**extra}
    columns = SERVING_COLUMNS if fmt == "table" else tuple(df.columns)
    table = Table.from_records(records, columns).head(top)
    return {"plans": table}, {**extra, "_notes": notes}
