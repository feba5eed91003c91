"""Render tables for the terminal: every table-printing command takes --format table|csv|json."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

import pandas as pd

FORMATS = ("table", "csv", "json")


def add_format_arg(parser: Any) -> None:
    """Add the shared ``--format table|csv|json`` option to a subcommand parser."""
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format")


def emit(
    tables: dict[str, pd.DataFrame],
    fmt: str,
    out: TextIO | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Print named tables: aligned text, CSV (tables separated by a '# name' line) or one JSON
    object ``{name: [row, ...], ...}`` plus ``extra`` scalars."""
    out = out or sys.stdout
    if fmt == "json":
        doc: dict[str, Any] = dict(extra or {})
        for name, df in tables.items():
            doc[name] = json.loads(df.to_json(orient="records"))
        json.dump(doc, out, indent=2)
        out.write("\n")
        return
    if fmt == "csv":
        for i, (name, df) in enumerate(tables.items()):
            if len(tables) > 1:
                out.write(("" if i == 0 else "\n") + f"# {name}\n")
            df.to_csv(out, index=False)
        return
    for key, value in (extra or {}).items():
        out.write(f"{key}: {value}\n")
    for name, df in tables.items():
        out.write(f"\n== {name} ==\n")
        with pd.option_context("display.max_rows", None, "display.max_columns", None,
                               "display.width", 200, "display.float_format", _fmt_float):
            out.write(df.to_string(index=False) + "\n")


def _fmt_float(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3e}"
    return f"{x:.4g}"
