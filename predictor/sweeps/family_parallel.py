"""Parallel cells of a sweep (placeholder until the family lands: every cell is an error row)."""

from __future__ import annotations

import pandas as pd

from roofcast.predictor.sweeps.cells import error_rows
from roofcast.predictor.sweeps.families import register_family
from roofcast.predictor.sweeps.types import SweepTask


@register_family("parallel")
def run_parallel(task: SweepTask) -> pd.DataFrame:
    """Every cell an error row: the parallel family is not built yet."""
    return error_rows(task, task.cells(), "NotImplementedError: parallel cells are not built yet")
