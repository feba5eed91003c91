"""`roofcast hw list` names each figure by the key a what-if spec takes, in the same unit."""

from __future__ import annotations

import json

import pytest

from roofcast.app.cli import main
from roofcast.app.commands.hw import LIST_COLUMNS

FIGURES = [c for c in LIST_COLUMNS if c not in ("id", "name", "kind", "source")]


def hw_list(capsys, *argv) -> dict:
    assert main(["hw", "list", *argv, "--format", "json"]) == 0
    return {r["id"]: r for r in json.loads(capsys.readouterr().out)["devices"]}


@pytest.mark.parametrize("column", FIGURES)
def test_a_listed_figure_is_a_what_if_key_in_the_same_unit(column, capsys):
    base = hw_list(capsys)["h100-sxm"][column]
    changed = 2 * base
    assert main(["hw", "show", f"h100-sxm:{column}={changed}", "--format", "json"]) == 0
    capsys.readouterr()
    # the what-if device, listed again, shows the value given under the same name
    from roofcast.app.commands.hw import list_table
    from roofcast.hw_catalog import get_device

    table = list_table([get_device(f"h100-sxm:{column}={changed}")])
    row = dict(zip(table.columns, table.rows[0], strict=True))
    assert row[column] == pytest.approx(changed)


def test_the_old_tflops_names_are_gone(capsys):
    assert not [c for c in LIST_COLUMNS if c.endswith("TFLOPs")]
    assert "matrix_fp16_TOPS" in hw_list(capsys)["h100-sxm"]
