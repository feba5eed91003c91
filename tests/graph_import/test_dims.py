"""--dim spec parsing."""

import pytest

from roofcast.graph_import.dims import MAX_DIM, parse_dim_specs, split_input_axis
from roofcast.graph_import.errors import ModelImportError


def test_name_and_input_axis_specs():
    assert parse_dim_specs(["batch=8", "input_ids:1=128", " sequence = 512 "]) == {
        "batch": 8,
        "input_ids:1": 128,
        "sequence": 512,
    }


def test_input_names_with_colons_split_at_last_colon():
    assert split_input_axis("encoder:input:0") == ("encoder:input", 0)
    assert split_input_axis("batch") is None
    assert split_input_axis("x:-1") == ("x", -1)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("batch", "expected NAME=VALUE or INPUT:AXIS=VALUE"),
        ("=8", "expected NAME=VALUE"),
        ("batch=eight", "bad value 'eight' for dim batch"),
        ("batch=0", "out of range: give a positive integer"),
        ("batch=-2", "out of range"),
        (f"batch={MAX_DIM + 1}", "out of range"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(ModelImportError, match=message):
        parse_dim_specs([spec])


def test_same_key_twice_with_other_value():
    with pytest.raises(ModelImportError, match=r"--dim batch given twice \(1 and 2\)"):
        parse_dim_specs(["batch=1", "batch=2"])
    assert parse_dim_specs(["batch=1", "batch=1"]) == {"batch": 1}
