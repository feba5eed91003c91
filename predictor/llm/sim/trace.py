"""A request trace from a CSV file: ``arrival_s,input_tokens,output_tokens`` per row.

The header names the three columns; arrival times are seconds >= 0, finite and in order;
lengths are integers >= 1. At most ``TRACE_ROWS`` rows (environment variable
``ROOFCAST_MAX_TRACE_ROWS``, default 1,000,000), counted while reading, so a huge file is
refused before it is held in memory. Every refusal is one line naming the file and the row.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from roofcast.graph_import.budgets import Limit
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.sim.workload import Requests

COLUMNS: tuple[str, ...] = ("arrival_s", "input_tokens", "output_tokens")
TRACE_ROWS = Limit("ROOFCAST_MAX_TRACE_ROWS", 1_000_000, "rows of a request trace")


def _row(values: list[str], where: str) -> tuple[float, int, int]:
    if len(values) != len(COLUMNS):
        raise PredictionError(f"{where}: expected 3 values ({','.join(COLUMNS)}), got "
                              f"{len(values)}")
    try:
        t = float(values[0])
        n, m = (float(v) for v in values[1:])
    except ValueError:
        raise PredictionError(f"{where}: values must be numbers, got {','.join(values)!r}"
                              ) from None
    if not math.isfinite(t) or t < 0:
        raise PredictionError(f"{where}: arrival_s must be a finite number >= 0, got "
                              f"{values[0]!r}")
    for v, name in ((n, "input_tokens"), (m, "output_tokens")):
        if not math.isfinite(v) or v < 1 or v != int(v):
            raise PredictionError(f"{where}: {name} must be an integer >= 1, got {v!r}")
    return t, int(n), int(m)


def read_trace(path: str | Path) -> Requests:
    """The requests of trace file ``path`` (module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise PredictionError(f"trace file {str(p)!r} is not a readable file; give a CSV of "
                              f"{','.join(COLUMNS)}")
    cap = TRACE_ROWS.value()
    rows: list[tuple[float, int, int]] = []
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            head = [h.strip() for h in next(reader, [])]
            if tuple(head) != COLUMNS:
                raise PredictionError(f"trace {p.name}: the header must be "
                                      f"{','.join(COLUMNS)}, got {','.join(head)!r}")
            for values in reader:
                if not values:
                    continue
                if len(rows) >= cap:
                    raise PredictionError(
                        f"trace {p.name} has more than {cap:,} rows (the cap of "
                        f"{TRACE_ROWS.env}); raise it or shorten the trace")
                rows.append(_row([v.strip() for v in values],
                                 f"trace {p.name} row {reader.line_num}"))
    except (UnicodeDecodeError, csv.Error, OSError) as exc:
        raise PredictionError(f"trace {p.name} cannot be read as a CSV file: "
                              f"{type(exc).__name__}") from None
    if not rows:
        raise PredictionError(f"trace {p.name} has no requests")
    arr = np.array(rows, dtype=float)
    if np.any(np.diff(arr[:, 0]) < 0):
        bad = int(np.flatnonzero(np.diff(arr[:, 0]) < 0)[0]) + 3
        raise PredictionError(f"trace {p.name} row {bad}: arrival times must not decrease")
    return Requests(arr[:, 0], arr[:, 1].astype(np.int64), arr[:, 2].astype(np.int64))
