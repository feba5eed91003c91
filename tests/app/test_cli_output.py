"""app.output: numbers for people in tables, full precision in csv/json, --top cuts."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pandas as pd
import pytest

from roofcast.app.cli import main
from roofcast.app.output import Table, emit, format_dollars, format_number, format_value, render
from tests.training_data.collect_helpers import conv_matmul_model


@pytest.mark.parametrize(("value", "text"), [
    (0.7673003498524199, "0.7673"),
    (12.3456, "12.35"),
    (999.96, "1000"),
    (1303.4, "1303"),
    (123456.7, "123457"),
    (0.0012345, "0.001234"),
    (1.2345e-5, "1.234e-05"),
    (0.0, "0"),
    (-2.5, "-2.5"),
    (3e17, "3.000e+17"),
    (math.inf, "inf"),
])
def test_numbers_keep_4_significant_digits(value, text):
    assert format_number(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (10000.0, "10,000"), (30000, "30,000"), (3.5217, "3.52"), (99.999, "100.00"),
    (1234.5, "1,234")])
def test_prices_in_plain_dollars(value, text):
    assert format_value(value, money=True) == text
    if isinstance(value, float):
        assert format_dollars(value) == text


def test_missing_bool_and_text_cells():
    assert format_value(None) == "NaN"
    assert format_value(float("nan")) == "NaN"
    assert format_value(True) == "True"
    assert format_value("x") == "x"
    assert format_value(np.float64(0.5)) == "0.5"


def test_render_aligns_numbers_right_and_text_left():
    table = Table(("name", "price_usd", "time_ms"),
                  (("a", 10000.0, 0.7673003498524199), ("long name", None, 12.0)))
    assert render(table).splitlines() == [
        "name       price_usd  time_ms",
        "a             10,000   0.7673",
        "long name        NaN       12",
    ]


def test_dataframe_cells_become_python_values():
    df = pd.DataFrame({"i": np.array([1, 2], dtype=np.int64), "f": [0.1, np.nan],
                       "b": [True, False], "s": ["x", None]})
    table = Table.of(df)
    assert table.columns == ("i", "f", "b", "s")
    assert table.rows[0] == (1, 0.1, True, "x")
    assert type(table.rows[0][0]) is int
    assert type(table.rows[0][2]) is bool
    assert math.isnan(table.rows[1][1])


def test_head_remembers_the_full_count():
    table = Table(("x",), tuple((i,) for i in range(20)))
    assert table.head(None) is table
    assert table.head(0) is table
    assert table.head(20) is table
    cut = table.head(5)
    assert len(cut.rows) == 5
    assert cut.total_rows == 20
    out = io.StringIO()
    emit({"t": cut}, "table", out=out)
    assert out.getvalue().endswith("(5 of 20 rows; --top 0 shows all)\n")


def test_csv_and_json_keep_full_precision():
    x = 0.7673003498524199
    df = pd.DataFrame({"time_ms": [x, np.nan], "price_usd": [10000.0, 2.0]})
    out = io.StringIO()
    emit({"t": df}, "csv", out=out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert float(rows[0]["time_ms"]) == x
    assert rows[1]["time_ms"] == ""
    out = io.StringIO()
    emit({"t": df}, "json", out=out, extra={"total_ms": x, "dims": {"batch": 1},
                                            "bad": math.inf})
    doc = json.loads(out.getvalue())
    assert doc["total_ms"] == x
    assert doc["t"][0]["time_ms"] == x
    assert doc["t"][1]["time_ms"] is None
    assert doc["bad"] is None
    assert doc["dims"] == {"batch": 1}


def test_extra_scalars_in_table_format_are_rounded():
    out = io.StringIO()
    emit({}, "table", out=out, extra={"total_ms": 0.7673003498524199, "price_usd": 1e4,
                                      "batch": 8})
    assert out.getvalue() == "total_ms: 0.7673\nprice_usd: 10,000\nbatch: 8\n"


def _ops_rows(text: str) -> list[str]:
    return text.split("== ops ==\n")[1].split("\n\n")[0].splitlines()


def test_predict_table_shows_15_slowest_kernels_by_default(capsys):
    assert main(["predict", "resnet50", "--hw", "a100-40gb-pcie"]) == 0
    out = capsys.readouterr().out
    rows = _ops_rows(out)
    assert len(rows) == 1 + 15 + 1
    assert rows[-1].startswith("(15 of ")
    assert rows[-1].endswith(" rows; --top 0 shows all)")
    times = [float(r.split()[rows[0].split().index("time_us")]) for r in rows[1:-1]]
    assert times == sorted(times, reverse=True)
    total = next(line for line in out.splitlines() if line.startswith("total_ms: "))
    assert len(total.removeprefix("total_ms: ").replace(".", "").lstrip("0")) <= 4
    assert main(["predict", "resnet50", "--hw", "a100-40gb-pcie", "--top", "3"]) == 0
    assert len(_ops_rows(capsys.readouterr().out)) == 1 + 3 + 1
    assert main(["predict", "resnet50", "--hw", "a100-40gb-pcie", "--top", "0"]) == 0
    n_all = len(_ops_rows(capsys.readouterr().out)) - 1
    assert main(["predict", "resnet50", "--hw", "a100-40gb-pcie", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["ops"]) == n_all > 15


def test_predict_dim_name_the_model_lacks(capsys):
    assert main(["predict", "gpt2", "--hw", "a100-40gb-pcie", "--dim", "seq=128"]) == 2
    err = capsys.readouterr().err
    assert "has no dim named 'seq'" in err
    assert "batch, sequence" in err
    assert err.count("\n") == 1


def test_compare_prices_in_plain_dollars(capsys):
    assert main(["compare", "resnet50", "--hw", "a100-40gb-pcie,h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "10,000" in out
    assert "30,000" in out
    assert "e+04" not in out


def test_measure_defaults_to_batch_1_and_checks_dim_names(tmp_path, capsys):
    path = tmp_path / "tiny.onnx"
    path.write_bytes(conv_matmul_model().SerializeToString())
    assert main(["measure", str(path), "--repeats", "1", "--warmup", "0", "--no-save",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["batch"] for r in doc["slowest_ops"]} == {1}
    assert main(["measure", str(path), "--dim", "seq=8", "--no-save"]) == 2
    assert "has no dim named 'seq'" in capsys.readouterr().err
