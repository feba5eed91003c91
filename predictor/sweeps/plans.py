"""Plan texts of a sweep: ``parse_plan("tp4 pp2 m8") -> {"tp": 4, "pp": 2, "micro_batches": 8}``.

A plan text is ``single`` (one device) or space-separated parts, each at most once:
``dpN`` data-parallel replicas, ``tpN`` tensor-parallel ranks, ``ppN`` pipeline stages, ``epN``
expert-parallel ranks, ``mN`` micro-batches per replica, ``zN`` the ZeRO stage (0-3), ``sp``
sequence parallelism, ``rc`` full recomputation — the parts of ``ParallelPlan.label``.
A part left out is filled by ``predictor.parallel.plan.complete_plan`` (dp: the devices left
over on a system; 1 on a device entry). ``canonical_plan`` writes the parts in the order above,
so ``"pp2 tp4"`` and ``"tp4 pp2"`` are one plan.
"""

from __future__ import annotations

import re

from roofcast.predictor.sweeps.types import SINGLE

#: part prefix -> ``ParallelPlan`` field (integer parts), in canonical order
INT_PARTS: dict[str, str] = {"dp": "dp", "tp": "tp", "pp": "pp", "ep": "ep",
                             "m": "micro_batches", "z": "zero"}
#: flag part -> ``ParallelPlan`` field
FLAG_PARTS: dict[str, str] = {"sp": "sequence_parallel", "rc": "recompute"}
_PART = re.compile(r"^(dp|tp|pp|ep|m|z)([0-9]+)$")
#: the largest degree a plan text may name (a sanity bound, far past real systems)
MAX_DEGREE = 1 << 16


def parse_plan(text: str) -> dict[str, int | bool]:
    """The ``ParallelPlan`` fields ``text`` gives ({} for ``single``); ValueError naming the bad
    part and what to write."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"plan {text!r} is not a plan text; write 'single' or parts such as "
                         "'tp4 pp2' (dpN tpN ppN epN mN zN sp rc)")
    parts = text.replace(",", " ").split()
    if parts == [SINGLE]:
        return {}
    given: dict[str, int | bool] = {}
    for part in parts:
        match = _PART.match(part)
        if match:
            field, value = INT_PARTS[match[1]], int(match[2])
            low = 0 if field == "zero" else 1
            high = 3 if field == "zero" else MAX_DEGREE
            if not low <= value <= high:
                raise ValueError(f"plan {text!r}: {part!r} must be {match[1]}{low}..{high}")
        elif part in FLAG_PARTS:
            field, value = FLAG_PARTS[part], True
        else:
            raise ValueError(f"plan {text!r}: unknown part {part!r}; the parts are dpN, tpN, "
                             "ppN, epN, mN (micro-batches), zN (ZeRO 0-3), sp, rc, or 'single'")
        if field in given:
            raise ValueError(f"plan {text!r} gives {field} twice; give it once")
        given[field] = value
    return given


def canonical_plan(text: str) -> str:
    """``text`` with its parts in canonical order (``single`` stays ``single``)."""
    given = parse_plan(text)
    if not given:
        return SINGLE
    out = [f"{prefix}{given[field]}" for prefix, field in INT_PARTS.items() if field in given]
    out += [flag for flag, field in FLAG_PARTS.items() if given.get(field)]
    return " ".join(out)


def plan_devices(text: str) -> int | None:
    """Devices a plan text names on a device entry: dp x tp x pp (a part left out is 1);
    None for ``single``."""
    given = parse_plan(text)
    if not given:
        return None
    return int(given.get("dp", 1)) * int(given.get("tp", 1)) * int(given.get("pp", 1))
