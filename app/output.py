"""Render tables for the terminal: every table-printing command takes --format table|csv|json.

Pure Python on purpose (no pandas import): a command whose data is not a DataFrame, such as
``roofcast inspect`` or ``roofcast hw list``, prints without paying for pandas. ``emit`` takes
``Table`` objects or DataFrames (converted by duck typing).

- ``table``: aligned text for people. Numbers keep 4 significant digits (``0.7673``, ``12.35``),
  values of 1,000 and more are written as plain integers (``12346``), below 0.001 in scientific
  notation (``1.234e-05``); money (a column or key whose name says ``usd`` or ``price``) in
  plain dollars (``10,000``, ``3.52``). Missing values print as ``NaN``. A table cut by
  ``--top`` ends with a line saying how many rows it has in all.
- ``csv`` and ``json``: full precision (Python's shortest round-trip repr of each float);
  missing values are empty / ``null``.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

FORMATS = ("table", "csv", "json")
DEFAULT_TOP = 15
MONEY_WORDS = ("usd", "price")


@dataclass(frozen=True)
class Table:
    """Rows under named columns. ``total_rows``: how many rows there were before ``head`` cut
    them (None: not cut)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    total_rows: int | None = None

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]],
                     columns: Sequence[str]) -> Table:
        """One row per mapping, cells in ``columns`` order (a missing key is None)."""
        return cls(tuple(columns), tuple(tuple(r.get(c) for c in columns) for r in records))

    @classmethod
    def of(cls, data: Table | Any) -> Table:
        """``data`` itself, or a pandas DataFrame's columns and rows (numpy scalars as Python
        values)."""
        if isinstance(data, Table):
            return data
        rows = tuple(tuple(_native(v) for v in row)
                     for row in data.itertuples(index=False, name=None))
        return cls(tuple(str(c) for c in data.columns), rows)

    def head(self, n: int | None) -> Table:
        """The first ``n`` rows (all when ``n`` is None or 0), remembering the full count."""
        if not n or n >= len(self.rows):
            return self
        return Table(self.columns, self.rows[:n], self.total_rows or len(self.rows))

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def add_format_arg(parser: Any) -> None:
    """Add the shared ``--format table|csv|json`` option to a subcommand parser."""
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format")


def add_top_arg(parser: Any, what: str = "kernels", default: int = DEFAULT_TOP) -> None:
    """Add ``--top N``: the table format shows the first ``default`` rows unless told; csv and
    json show all rows unless ``--top`` is given; ``--top 0`` shows all."""
    from roofcast.app.argtypes import nonnegative_int

    parser.add_argument("--top", type=nonnegative_int, metavar="N", default=None,
                        help=f"show the N slowest {what} (default {default} in the table "
                             f"format, all in csv/json; 0: all)")
    parser.set_defaults(top_default=default)


def top_rows(args: Any) -> int | None:
    """Rows to show for ``--top`` (see ``add_top_arg``); None means all."""
    if args.top is not None:
        return args.top or None
    return args.top_default if args.format == "table" else None


def emit(
    tables: Mapping[str, Table | Any],
    fmt: str,
    out: TextIO | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Print named tables: aligned text, CSV (tables separated by a '# name' line) or one JSON
    object ``{name: [row, ...], ...}`` after the ``extra`` scalars."""
    out = out or sys.stdout
    named = {name: Table.of(t) for name, t in tables.items()}
    if fmt == "json":
        doc: dict[str, Any] = {k: _json_value(v) for k, v in (extra or {}).items()}
        for name, table in named.items():
            doc[name] = [{c: _json_value(v) for c, v in zip(table.columns, row, strict=True)}
                         for row in table.rows]
        json.dump(doc, out, indent=2, default=str, allow_nan=False)
        out.write("\n")
        return
    if fmt == "csv":
        for i, (name, table) in enumerate(named.items()):
            if len(named) > 1:
                out.write(("" if i == 0 else "\n") + f"# {name}\n")
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(table.columns)
            writer.writerows([_csv_value(v) for v in row] for row in table.rows)
        return
    for key, value in (extra or {}).items():
        out.write(f"{key}: {format_value(value, is_money(key))}\n")
    for name, table in named.items():
        out.write(f"\n== {name} ==\n{render(table)}\n")
        if table.total_rows is not None:
            out.write(f"({len(table.rows)} of {table.total_rows} rows; --top 0 shows all)\n")


def render(table: Table) -> str:
    """Aligned text: a column of numbers (missing values aside) right-aligned, any other column
    left-aligned, two spaces between columns."""
    money = [is_money(c) for c in table.columns]
    cells = [[format_value(v, m) for v, m in zip(row, money, strict=True)] for row in table.rows]
    numeric = [all(_is_number(row[i]) or _is_missing(row[i]) for row in table.rows)
               for i in range(len(table.columns))]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(table.columns)]
    return "\n".join(
        "  ".join(v.rjust(w) if num else v.ljust(w)
                  for v, w, num in zip(line, widths, numeric, strict=True)).rstrip()
        for line in (list(table.columns), *cells))


def is_money(name: str) -> bool:
    """A column or key in dollars: its name says ``usd`` or ``price``."""
    lower = name.lower()
    return any(w in lower for w in MONEY_WORDS)


def format_value(value: Any, money: bool = False) -> str:
    """One cell for people (module docstring: significant digits, dollars, missing as NaN)."""
    if _is_missing(value):
        return "NaN"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if money else str(value)
    return format_dollars(value) if money else format_number(value)


def format_number(x: float) -> str:
    """4 significant digits; a plain integer from 1,000 up (scientific from 1e15); scientific
    below 0.001."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    ax = abs(x)
    if ax == 0:
        return "0"
    if ax >= 1e3:
        return f"{x:.0f}" if ax < 1e15 else f"{x:.3e}"
    if ax >= 1e-3:
        return f"{x:.4g}"
    return f"{x:.3e}"


def format_dollars(x: float) -> str:
    """Plain dollars: whole dollars with thousands separators from $100 up, else cents."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}"


def _native(value: Any) -> Any:
    """A numpy scalar as the Python value it holds; other values unchanged."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


def _is_missing(value: Any) -> bool:
    return (value is None or (isinstance(value, float) and math.isnan(value))
            or type(value).__name__ in ("NAType", "NaTType"))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_value(value: Any) -> Any:
    value = _native(value)
    if _is_missing(value) or (isinstance(value, float) and math.isinf(value)):
        return None
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return value


def _csv_value(value: Any) -> Any:
    """A cell: "" for missing, numbers as they are, text guarded against spreadsheet formulas
    (``training_data.csv_cells``)."""
    from roofcast.training_data.csv_cells import guard

    value = _native(value)
    if _is_missing(value):
        return ""
    return guard(value) if isinstance(value, str) else value


def context_columns(df: Any, fmt: str, **context: Any) -> Any:
    """``df`` (a DataFrame) with one column per ``context`` value (runtime, estimator) when
    ``fmt`` is csv: a CSV has no header lines, so the run's context goes into every row. The
    table and json formats state it once, above the tables (``emit``'s ``extra``)."""
    return df.assign(**context) if fmt == "csv" else df
