"""Spreadsheet-safe text cells in the CSV files roofcast writes (formula injection).

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and, in some programs,
a tab or carriage return) as a formula: ``=cmd|' /C calc'!A0``. ``guard`` prefixes such a text
cell with an apostrophe, the spreadsheet's own "this is text" mark; a text cell that already
starts with an apostrophe followed by one of those characters gets one more, so that
``unguard(guard(t)) == t`` for every text ``t`` and an exported file re-imports unchanged.
Only text is guarded: numbers (a negative number included) are written as numbers.
"""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def guard(text: str) -> str:
    """``text`` as a cell no spreadsheet evaluates (module docstring)."""
    if text.startswith(FORMULA_STARTS) or (text.startswith("'") and text.lstrip("'").startswith(
            FORMULA_STARTS)):
        return "'" + text
    return text


def unguard(text: str) -> str:
    """The text ``guard`` was given: one leading apostrophe dropped before a formula start."""
    if text.startswith("'") and text.lstrip("'").startswith(FORMULA_STARTS):
        return text[1:]
    return text
