"""``roofcast train --from DIR --scheduler local|dask-local:N|dask://...`` end to end on an
exported Parquet dataset (``data export --format parquet --partition-by device``)."""

from __future__ import annotations

import json

import pytest

from roofcast.app.cli import main
from tests.predictor.learned_helpers import measurement_csv_file

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("cli")
    store = str(folder / "store.sqlite")
    assert main(["data", "import", str(measurement_csv_file(folder / "rows.csv")),
                 "--store", store]) == 0
    assert main(["data", "export", "--format", "parquet", "--partition-by", "device",
                 "--output", str(folder / "ds"), "--store", store]) == 0
    return str(folder / "ds")


def train(capsys, *argv) -> tuple[int, dict | None, str]:
    code = main(["train", "--quick", "--format", "json", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_local_training_from_an_export_saves_a_model(capsys, export, tmp_path):
    code, out, _ = train(capsys, "--from", export, "--output", str(tmp_path / "m"))
    assert code == 0
    assert out["training_rows"] == 240
    assert out["rows dataset:ds"] == f"240 from {export}"
    meta = json.loads((tmp_path / "m" / "metadata.json").read_text())
    assert meta["scheduler"] == "local"
    assert meta["source"] == "dataset:ds"
    from roofcast.predictor.learned.persistence import load

    assert sorted(load(tmp_path / "m").models) == ["gpu/elementwise", "gpu/matmul"]
    assert {r["key"] for r in out["per_family"]} == {"gpu/elementwise", "gpu/matmul"}


def test_dask_training_with_a_held_out_device(capsys, export):
    """Held-out rows leave training by row number; the workers' feature rows are selected by
    the same numbers, so the holdout is evaluated on rows no cluster fit saw."""
    code, out, _ = train(capsys, "--from", export, "--scheduler", "dask-local:2",
                         "--holdout-device", "t4", "--no-save")
    assert code == 0
    assert out["training_rows"] == 160
    assert out["held_out_rows"] == 80
    held = {r["key"]: r for r in out["holdout_per_family"]}
    assert set(held) == {"gpu/elementwise", "gpu/matmul"}
    for r in held.values():  # the held-out GPU is predicted far better than the roofline
        assert r["learned_median_ape_pct"] < r["analytical_median_ape_pct"]


def test_a_dask_scheduler_needs_one_export(capsys, export):
    code = main(["train", "--from", f"{export},bundled", "--scheduler", "dask-local:2",
                 "--no-save"])
    err = capsys.readouterr().err
    assert code == 2
    assert "trains on one exported Parquet folder" in err
    assert len(err.strip().splitlines()) == 1


def test_an_unreachable_scheduler_is_one_line(capsys, export, monkeypatch):
    from roofcast.predictor import dask_client

    monkeypatch.setattr(dask_client, "CONNECT_TIMEOUT_S", 1)
    code = main(["train", "--from", export, "--scheduler", "dask://127.0.0.1:1", "--no-save"])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot reach a Dask scheduler at tcp://127.0.0.1:1" in err
    assert "Traceback" not in err
