"""The example sweep files under ``docs/examples/sweeps``: each parses with ``read_spec``, has
the cell count and the families its header says, and a tiny slice of it (the first model,
hardware, batch, ... of each axis) runs with cells predicted, not only error rows."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from roofcast.predictor.sweeps.schedulers import run_sweep
from roofcast.predictor.sweeps.spec import read_spec
from roofcast.predictor.sweeps.types import cell_groups

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "sweeps"
#: file -> the families of its cells
FAMILIES = {"vision_fleet.toml": {"graph"}, "llm_serving.toml": {"serving"},
            "training_plans.toml": {"parallel"}}


def test_the_examples_are_the_ones_tested():
    assert sorted(p.name for p in EXAMPLES.glob("*.toml")) == sorted(FAMILIES)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_example_parses_with_the_cells_its_header_says(name):
    path = EXAMPLES / name
    spec = read_spec(path)
    stated = re.search(r"= ([0-9,]+) cells", path.read_text())
    assert stated, f"{name}: the header states no '= N cells'"
    assert spec.n_cells == int(stated[1].replace(",", ""))
    assert {g.family for g in cell_groups(spec)} == FAMILIES[name]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_tiny_slice_of_the_example_runs(name):
    spec = read_spec(EXAMPLES / name)
    tiny = replace(spec, models=spec.models[:1], devices=spec.devices[:1],
                   batches=spec.batches[:1], precisions=spec.precisions[:1],
                   runtimes=spec.runtimes[:1], plans=spec.plans[:2],
                   input_tokens=spec.input_tokens[:1], output_tokens=spec.output_tokens[:1],
                   baseline=None)
    result = run_sweep(tiny)
    cells = result.cells
    assert len(cells) == tiny.n_cells > 0
    assert set(cells["family"]) == FAMILIES[name]
    ok = cells[cells["error"] == ""]
    assert len(ok), f"{name}: no cell predicted: {sorted(set(cells['error']))[:2]}"
    assert (ok["time_s"] > 0).all()
    assert (ok["throughput_samples_per_s"] > 0).all()
    assert not cells["error"].str.contains("\n").any()
