"""benchmarks/multidevice_accuracy.py: the serving-rows hook and the error table's columns."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from tests.scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("multidevice_accuracy")


def test_serving_rows_say_not_available_without_the_module(bench, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tp_pp_serving", None)  # import raises ModuleNotFoundError
    bench.print_serving_rows()
    assert "not available" in capsys.readouterr().out


def test_serving_rows_are_the_summary_of_tp_pp_serving(bench, monkeypatch, capsys):
    fake = type(sys)("tp_pp_serving")
    calls = []
    fake.main = lambda argv: calls.append(argv) or print("multi-device (the check): 12.5 %")
    monkeypatch.setitem(sys.modules, "tp_pp_serving", fake)
    bench.print_serving_rows()
    out = capsys.readouterr().out
    assert "TP/PP serving rows" in out
    assert "12.5 %" in out
    assert calls == [[]]  # the summary, not every row (--rows)


def test_summary_reports_median_per_system_and_collective(bench):
    errors = pd.DataFrame({"system": ["a", "a", "b"], "collective": ["all_reduce"] * 3,
                           "n_ranks": [8, 8, 2], "ranks_per_node": [8, 8, 1],
                           "err_pct": [10.0, 30.0, 5.0]})
    table = bench.summary(errors)
    assert table.loc[("a", "all_reduce"), "median_%"] == 20.0
    assert table.loc[("b", "all_reduce"), "ranks(n/per node)"] == "2/1"
