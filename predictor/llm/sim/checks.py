"""Checks of a simulation's user inputs: one-line ``TypeError`` (not a number) or
``PredictionError`` (a ``ValueError``: out of range) naming the argument and what to give."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from roofcast.graph_import.budgets import Limit
from roofcast.predictor.errors import PredictionError

#: requests one simulation may draw (``ROOFCAST_MAX_SIM_REQUESTS``).
SIM_REQUESTS = Limit("ROOFCAST_MAX_SIM_REQUESTS", 100_000, "requests of a simulation")


def number(value: Any, what: str, *, allow_zero: bool = False) -> float:
    """``value`` as a finite float > 0 (>= 0 with ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise TypeError(f"{what} must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        low = ">= 0" if allow_zero else "> 0"
        raise PredictionError(f"{what} must be a finite number {low}, got {value!r}")
    return v


def whole(value: Any, what: str, *, allow_zero: bool = False) -> int:
    """``value`` as an int >= 1 (>= 0 with ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    if value < (0 if allow_zero else 1):
        raise PredictionError(f"{what} must be an integer >= {0 if allow_zero else 1}, got "
                              f"{value!r}")
    return int(value)


def check_spec(spec: Any) -> None:
    """Every field of a ``run.SimSpec`` in range (module docstring)."""
    given = [k for k in ("rate", "concurrency", "trace") if getattr(spec, k) is not None]
    if len(given) > 1:
        raise PredictionError(f"give one of a rate, a concurrency or a trace, not "
                              f"{' and '.join(given)}")
    if spec.rate is not None:
        number(spec.rate, "rate (requests/s)")
    if spec.concurrency not in (None, "max"):
        whole(spec.concurrency, "concurrency")
    SIM_REQUESTS.check(whole(spec.requests, "requests"), "requests", PredictionError)
    number(spec.cv, "arrival cv")
    number(spec.length_spread, "length spread", allow_zero=True)
    whole(spec.prefix_tokens, "prefix tokens", allow_zero=True)
    whole(spec.seed, "seed", allow_zero=True)
    for v, what in ((spec.slo_ttft_s, "TTFT SLO"), (spec.slo_tpot_s, "TPOT SLO")):
        if v is not None:
            number(v, what)
    for v, what in ((spec.max_seqs, "max running sequences"), (spec.max_tokens, "max tokens")):
        if v is not None:
            whole(v, what)
