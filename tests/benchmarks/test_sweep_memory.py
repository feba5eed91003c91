"""``sweep_scale.py --compare`` on a streamed folder (parts sorted each by cell_id, in arrival
order) against an in-memory one (``sweep_memory.py`` imports, its run is the measurement)."""

from __future__ import annotations

import sys

import pytest

from tests.scripts import load_benchmark


@pytest.fixture(scope="module")
def memory_bench():
    load_benchmark("sweep_scale")
    return load_benchmark("sweep_memory")


def test_compare_accepts_a_streamed_folder_in_any_part_order(memory_bench, tmp_path, capsys,
                                                            monkeypatch):
    from roofcast.predictor.sweeps import output
    from roofcast.predictor.sweeps.output import DatasetWriter, write_dataset
    from roofcast.predictor.sweeps.types import SweepResult
    from tests.app.test_sweep_page_loading import fake_cells

    bench = sys.modules["sweep_scale"]
    cells = fake_cells()
    a = write_dataset(SweepResult(cells, "local", 1.0), tmp_path / "a")
    monkeypatch.setattr(output, "ROWS_PER_PART", 3)
    writer = DatasetWriter(tmp_path / "b")
    for i in reversed(range(0, len(cells), 2)):  # frames arrive backwards
        writer.add(cells.iloc[i:i + 2])
    writer.close("dask-local:2", 2.0)
    assert len(list((tmp_path / "b").glob("part-*.parquet"))) > 1
    assert bench.main(["--compare", str(a), str(tmp_path / "b")]) == 0
    assert "identical: yes" in capsys.readouterr().out
