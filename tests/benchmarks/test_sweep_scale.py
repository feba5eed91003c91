"""``benchmarks/sweep_scale.py``: the grids it sizes, the extrapolation's arithmetic, and a tiny
run (128 cells, local and a 1-worker LocalCluster) whose tables are identical."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.scripts import load_benchmark

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "sweep_scale.py"


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("sweep_scale")


@pytest.mark.parametrize(("target", "cells", "models", "devices", "runtimes", "modes"), [
    (100, 4 * 32, 1, 4, 1, 1),
    (1_000, 32 * 32, 1, 32, 1, 1),
    (10_000, 7 * 50 * 32, 7, 50, 1, 1),
    (100_000, 17 * 50 * 32 * 2 * 2, 17, 50, 2, 2),
])
def test_grids_are_the_smallest_of_their_shape_past_the_target(bench, target, cells, models,
                                                               devices, runtimes, modes):
    spec = bench.grid(target)
    assert spec.n_cells == cells >= target
    assert (len(spec.models), len(spec.devices), len(spec.runtimes), len(spec.modes)) == (
        models, devices, runtimes, modes)
    assert spec.batches == (1, 2, 4, 8, 16, 32, 64, 128)


def test_the_100k_grid_is_the_acceptance_spec(bench):
    from roofcast.predictor.sweeps.spec import read_spec

    acceptance = read_spec(BENCHMARK.parent / "data" / "sweeps" / "acceptance_100k.toml")
    spec = bench.grid(100_000)
    for axis in ("models", "devices", "batches", "precisions", "modes", "runtimes"):
        assert getattr(spec, axis) == getattr(acceptance, axis), axis
    assert dict(spec.dims) == dict(acceptance.dims)


def test_extrapolation_arithmetic(bench):
    df = pd.DataFrame([
        {"size": 10, "scheduler": "dask-local:1", "cells": 1000, "startup_s": 2.0, "wall_s": 12.0},
        {"size": 10, "scheduler": "dask-local:2", "cells": 1000, "startup_s": 3.0, "wall_s": 8.0},
    ])
    ext = bench.extrapolate(df, bytes_per_cell=500.0, client_s_per_cell=1e-6, n_cells=10**6,
                            workers=10)
    assert ext["r1_cells_per_s"] == pytest.approx(1000 / 10.0)  # startup taken out
    assert ext["efficiency_2"] == pytest.approx((12.0 / 8.0) / 2)
    compute = 10**6 / (10 * 100.0 * 0.75)
    transfer = 10**6 * 500.0 / 1.25e9
    assert ext["total_s"] == pytest.approx(3.0 + compute + transfer + 1.0)
    # streamed: the client buffers one Parquet part, not every cell
    assert ext["client_memory_GB"] == pytest.approx(min(10**6, bench.ROWS_PER_PART) * 500 / 1e9)


def test_tiny_run_prints_the_table_and_identical_tables(bench, capsys):
    assert bench.main(["--sizes", "100", "--workers", "1", "--check"]) == 0
    out = capsys.readouterr().out
    assert "tables identical to local: yes" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("100 ")]
    assert [r[1] for r in rows] == ["local", "dask-local:1"]
    assert all(r[2] == "128" for r in rows)  # cells


def test_compare_tells_identical_folders_from_different_ones(bench, tmp_path, capsys):
    from roofcast.predictor.sweeps.output import write_dataset
    from roofcast.predictor.sweeps.types import SweepResult
    from tests.app.test_sweep_page_loading import fake_cells

    cells = fake_cells()
    a = write_dataset(SweepResult(cells, "local", 1.0), tmp_path / "a")
    b = write_dataset(SweepResult(cells.copy(), "dask-local:2", 2.0), tmp_path / "b")
    changed = cells.copy()
    changed.loc[3, "time_s"] *= 1 + 1e-15
    c = write_dataset(SweepResult(changed, "dask-local:2", 2.0), tmp_path / "c")
    assert bench.main(["--compare", str(a), str(b)]) == 0
    assert "identical: yes" in capsys.readouterr().out
    assert bench.main(["--compare", str(a), str(c)]) == 1
    assert "identical: NO" in capsys.readouterr().out


@pytest.mark.parametrize(("target", "cells", "graph_models", "gpus", "batches"), [
    (1_000, 1_036, 1, 12, 2),
    (10_000, 10_516, 11, 43, 2),
    (100_000, 109_416, 17, 43, 4),
])
def test_mixed_grids_hold_every_family_and_grow_in_order(bench, target, cells, graph_models,
                                                         gpus, batches):
    from roofcast.predictor.sweeps.types import cell_groups

    spec = bench.mix_grid(target)
    assert spec.n_cells == cells >= target
    assert spec.llms == bench.MIX_LLMS
    assert len(spec.models) - len(spec.llms) == graph_models
    assert spec.devices[-1] == "system:hgx-h100"
    assert (len(spec.devices) - 1, len(spec.batches)) == (gpus, batches)
    assert spec.plans == ("single", "tp2", "tp4", "tp8")
    assert {g.family for g in cell_groups(spec)} == {"graph", "serving", "parallel"}
    smaller = bench.mix_grid(target // 2)
    assert smaller.n_cells < spec.n_cells


def test_family_rates_count_every_cell_once_per_family(bench):
    from roofcast.predictor.sweeps.types import SweepSpec

    spec = SweepSpec(models=("mobilenet_v2", "llm:gpt2"), llms=("llm:gpt2",),
                     devices=("h100-sxm",), precisions=("fp16",), modes=("infer", "serve"),
                     plans=("single", "tp2"), input_tokens=(64,), output_tokens=(8,))
    rates = bench.family_rates(spec).set_index("family")
    # graph: 1 cell; parallel: mobilenet tp2 + gpt2 single/tp2 in infer; serving: single/tp2
    assert rates["cells"].to_dict() == {"graph": 1, "parallel": 3, "serving": 2}
    assert rates["cells"].sum() == spec.n_cells
    assert (rates["seconds"] > 0).all()
    assert rates["cells_per_s"].to_numpy() == pytest.approx(
        (rates["cells"] / rates["seconds"]).to_numpy())


def test_family_costs_fit_and_a_tiny_measurement(capsys):
    costs = load_benchmark("family_costs")
    f_s, c_s = costs.fit(t_1=0.050, t_w=0.130, n_combos=4, w=11)  # 4 x (F + c) = 50 ms
    assert c_s == pytest.approx(0.080 / 40)
    assert f_s == pytest.approx(0.0125 - 0.002)
    assert costs.main(["--models", "mobilenet_v2", "--width", "2", "--reps", "1",
                       "--modes", "infer", "--batches", "1", "--cold"]) == 0
    out = capsys.readouterr().out
    assert "mobilenet_v2: G=1, 1 entry" in out
    assert "2 entries" in out
