"""The tidy measurement row: canonical values, unit conversion, line numbers, row keys."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from roofcast.training_data.schema import (
    BY_NAME,
    COLUMN_NAMES,
    KEY_COLUMNS,
    REQUIRED,
    normalize,
    validate,
)


def _rows(**cols):
    base = {"op_type": ["MatMul"], "device_id": ["t4"], "dtype": ["fp16"], "latency_s": [1e-3]}
    base.update(cols)
    n = max(len(v) for v in base.values())
    return pd.DataFrame({k: v * n if len(v) == 1 else v for k, v in base.items()})


def test_columns_have_kinds_units_and_required_set():
    assert set(REQUIRED) == {"op_type", "device_id", "dtype", "latency_s"}
    assert BY_NAME["latency_s"].unit == "s"
    assert BY_NAME["flops"].unit == "FLOP"
    assert {c.kind for c in BY_NAME.values()} <= {"str", "int", "float", "json"}
    assert "latency_s" not in KEY_COLUMNS
    assert "run_id" in KEY_COLUMNS


def test_good_row_is_completed_with_defaults_and_canonical_values():
    c = normalize(_rows(dtype=["float32"], device_id=["Tesla T4"],
                        attrs=['{"transB": 1, "alpha": 1.0}'], input_shapes=["[[2, 3], [3, 4]]"],
                        threads_intra=["2"]))
    assert c.problems == []
    r = c.frame.iloc[0]
    assert list(c.frame.columns) == [*COLUMN_NAMES, "row_key"]
    assert r["dtype"] == "fp32"
    assert r.precision == "fp32"
    assert r.device_id == "t4"  # alias resolved through the catalog
    assert r["attrs"] == '{"alpha":1.0,"transB":1}'  # sorted keys, compact
    assert r.input_shapes == "[[2,3],[3,4]]"
    assert r.threads_intra == 2
    assert pd.isna(r.batch)
    assert r["mode"] == "infer"
    assert r.opt_level == "n/a"
    assert r.direction == "fwd"
    assert math.isnan(r.flops)
    assert len(r.row_key) == 64


@pytest.mark.parametrize(("column", "value", "seconds"), [
    ("latency_ms", 2.5, 2.5e-3), ("latency_us", 40.0, 40e-6), ("latency_ns", 900.0, 900e-9),
])
def test_time_units_are_converted_to_seconds(column, value, seconds):
    df = _rows().drop(columns=["latency_s"]).assign(**{column: [value]})
    c = normalize(df)
    assert c.problems == []
    assert c.frame.latency_s.iloc[0] == pytest.approx(seconds)


def test_other_time_columns_convert_too():
    c = normalize(_rows(e2e_latency_ms=[5.0], latency_p90_us=[2000.0]))
    assert c.problems == []
    assert c.frame.e2e_latency_s.iloc[0] == pytest.approx(5e-3)
    assert c.frame.latency_p90_s.iloc[0] == pytest.approx(2e-3)


def test_line_numbers_count_the_header_as_line_one():
    df = _rows(latency_s=[1e-3, -1.0, 1e-3], run_id=["a", "b", "c"])
    assert validate(df) == [(3, "latency_s = -1 must be > 0 seconds")]
    assert validate(df, first_line=10) == [(11, "latency_s = -1 must be > 0 seconds")]


def test_row_key_ignores_results_but_not_config():
    a = normalize(_rows()).frame.row_key.iloc[0]
    assert normalize(_rows(latency_s=[2e-3])).frame.row_key.iloc[0] == a
    assert normalize(_rows(threads_intra=[2])).frame.row_key.iloc[0] != a
    assert normalize(_rows(run_id=["r2"])).frame.row_key.iloc[0] != a
    assert normalize(_rows(source=["user:x.csv"])).frame.row_key.iloc[0] != a


def test_local_device_and_symbolic_dims_are_accepted():
    c = normalize(_rows(device_id=["local"], input_shapes=['[["batch", 64]]']))
    assert c.problems == []
    assert c.frame.device_id.iloc[0] == "local"


def test_columns_are_matched_case_and_space_insensitively():
    df = _rows().rename(columns={"op_type": " Op_Type "})
    assert validate(df) == []


def test_duplicate_column_names_are_reported():
    df = pd.DataFrame([["MatMul", "t4", "fp32", 1e-3, 2e-3]],
                      columns=["op_type", "device_id", "dtype", "latency_s", "latency_s"])
    assert validate(df) == [(1, "column(s) latency_s appear more than once")]


def test_omitted_optional_inputs_are_null_shapes():
    c = normalize(_rows(op_type=["LSTM"], input_shapes=["[[5,1,8],[1,32,8],[1,32,8],null,null]"]))
    assert c.problems == []
    assert c.frame.input_shapes.iloc[0] == "[[5,1,8],[1,32,8],[1,32,8],null,null]"


def test_readme_documents_every_column():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "training_data" / "README.md").read_text()
    missing = [c for c in COLUMN_NAMES if f"| `{c}` |" not in readme]
    assert missing == []
