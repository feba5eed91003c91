"""Rows of a sweep's cell table, shared by the families: fixed dtypes and error rows.

``columns(df)`` puts a family's frame into ``CELL_COLUMNS`` order with the dtypes every Parquet
part shares (float64 metrics, int64 counts, bool ``fits``, str texts; a missing column is NaN /
0 / False / ""). ``error_rows(task, cells, message)`` is one row per failed cell with its key
columns and ``error`` set; ``message(exc)`` the one-line text of an exception.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from roofcast.predictor.sweeps.loaders import system_device
from roofcast.predictor.sweeps.types import (
    CELL_COLUMNS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    STR_COLUMNS,
    SYSTEM_PREFIX,
    CellKey,
    SweepTask,
    cell_id,
)


def key_columns(task: SweepTask, cells: Sequence[CellKey]) -> dict[str, list]:
    """The columns a cell's key fixes (id, family, model, device/system text, runtime, batch,
    precision, mode, plan, tokens, estimator, task id) for ``cells`` of ``task``."""
    return {
        "cell_id": [cell_id(task.model, task.runtime, c) for c in cells],
        "family": [task.family] * len(cells), "model": [task.model] * len(cells),
        "device": [system_device(c.hardware) for c in cells],
        "system": [c.hardware.removeprefix(SYSTEM_PREFIX)
                   if c.hardware.startswith(SYSTEM_PREFIX) else "" for c in cells],
        "runtime": [task.runtime] * len(cells), "batch": [c.batch for c in cells],
        "precision": [c.precision for c in cells], "mode": [c.mode for c in cells],
        "plan": [c.plan for c in cells], "input_tokens": [c.tokens[0] for c in cells],
        "output_tokens": [c.tokens[1] for c in cells],
        "estimator": [task.estimator or ""] * len(cells),
        "task_id": [task.task_id] * len(cells),
    }


def error_rows(task: SweepTask, cells: Sequence[CellKey], text: str) -> pd.DataFrame:
    """One ``CELL_COLUMNS`` row per cell: NaN metrics, ``fits`` False, ``error`` = ``text``."""
    return columns(pd.DataFrame({**key_columns(task, cells),
                                 "error": [text or "error"] * len(cells)}))


def message(exc: BaseException) -> str:
    """``TypeName: first line of the message``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def columns(df: pd.DataFrame) -> pd.DataFrame:
    """``CELL_COLUMNS`` in order with fixed dtypes (module docstring)."""
    out = df.reindex(columns=list(CELL_COLUMNS))
    for c in FLOAT_COLUMNS:
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("float64")
    for c in INT_COLUMNS:
        out[c] = pd.to_numeric(out[c], errors="coerce").fillna(0).astype("int64")
    for c in STR_COLUMNS:
        if out[c].dtype == _STR and not out[c].hasnans:
            continue  # already str with no missing value: the conversion would rebuild it
        out[c] = out[c].astype(object).where(out[c].notna(), "").astype(str)
    out["fits"] = out["fits"].astype(object).where(out["fits"].notna(), False).astype(bool)
    return out


_STR = pd.Series([""]).astype(str).dtype  # what ``astype(str)`` gives (pandas' str dtype)


def concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The frames as one ``CELL_COLUMNS`` frame (an empty one for no frames)."""
    frames = [f for f in frames if len(f)]
    return columns(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame())
