"""Add separately trained family models to a saved learned model, the others untouched.

``extended(base, result)``: ``base`` with every model key of ``result`` (``training.train`` on
one family's rows) added or replaced: its regressor, conformal intervals and OOD ranges; the
per-key validation rows (``key`` column) of those keys replace the base's, pooled tables stay the
base's; ``meta["extensions"]`` records each addition
(keys, source, rows, data hash). Used to ship the ``gpu/moe`` family (aiconfigurator's MoE
tables) without refitting the other families: ``python -m roofcast.predictor.learned.extend
[FOLDER]`` (default: the shipped model folder). Rationale: docs/design/kernel-model.md.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from roofcast.predictor.learned.predictor import LearnedModel
from roofcast.predictor.learned.roads import ROAD_SEP
from roofcast.predictor.learned.training import TrainResult

#: table of the aiconfigurator source whose family the shipped model gets this way, and its
#: rows per (device, dtype, runtime) (the family's only data: more than ``data.AICONF_CAP``).
MOE_TABLE, MOE_CAP = "moe", 1000


def primary_of(model: LearnedModel) -> dict[str, str]:
    """Kind -> the runtime of its primary road (``roads``: the road named by the kind alone)."""
    return {road: rt for road, rt in model.runtimes().items() if ROAD_SEP not in road}


def extended(base: LearnedModel, result: TrainResult) -> LearnedModel:
    """``base`` with ``result``'s model keys added (module docstring)."""
    new = result.model
    keys = sorted(new.models)
    meta = dict(base.meta)
    validation = dict(meta.get("validation") or {})
    for table, rows in (new.meta.get("validation") or {}).items():
        if rows and "key" in rows[0]:
            kept = [r for r in validation.get(table, []) if r.get("key") not in keys]
            validation[table] = kept + [r for r in rows if r.get("key") in keys]
    meta["validation"] = validation
    meta["extensions"] = [*meta.get("extensions", []), {
        "keys": keys, "source": new.meta.get("source", ""), "rows": new.meta.get("rows", 0),
        "data_hash": new.meta.get("data_hash", ""), "notes": new.meta.get("notes", [])}]
    return replace(base, models={**dict(base.models), **new.models},
                   intervals={**base.intervals, **new.intervals},
                   ranges={**base.ranges, **new.ranges}, meta=meta)


def main(argv: list[str] | None = None) -> int:
    """Train ``gpu/moe`` on aiconfigurator's MoE rows and add it to the model in FOLDER."""
    from roofcast.predictor.learned import persistence
    from roofcast.predictor.learned.data import aiconfigurator_set
    from roofcast.predictor.learned.persistence import DEFAULT_DIR
    from roofcast.predictor.learned.training import train

    args = sys.argv[1:] if argv is None else argv
    folder = args[0] if args else DEFAULT_DIR
    base = persistence.load(folder)
    ts = aiconfigurator_set(cap=MOE_CAP)
    ts = ts.subset((ts.X["table"] == MOE_TABLE).to_numpy())
    result = train(ts, progress=lambda msg: print(msg, file=sys.stderr, flush=True),
                   primary=primary_of(base), meta={"cap": MOE_CAP})
    persistence.save(extended(base, result), folder)
    print(f"added {sorted(result.model.models)} ({len(ts)} rows) to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
