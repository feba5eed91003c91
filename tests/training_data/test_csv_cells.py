"""Spreadsheet guards of text cells: formula starts get a leading apostrophe, reversibly."""

from __future__ import annotations

import pytest

from roofcast.training_data.csv_cells import guard, unguard


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
        ("+1", "'+1"),
        ("-x", "'-x"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("'=a", "''=a"),
        ("''-b", "'''-b"),
        ("MatMul", "MatMul"),
        ("'quoted", "'quoted"),
        ("", ""),
        ("a=b", "a=b"),
    ],
)
def test_guard_and_unguard_round_trip(text, cell):
    assert guard(text) == cell
    assert unguard(cell) == text
