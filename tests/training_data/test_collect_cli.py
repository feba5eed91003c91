"""``roofcast measure``: model and microbenchmark runs, saving, GPU skip, bad arguments."""

from __future__ import annotations

import pandas as pd
import pytest

from roofcast.app.cli import main
from roofcast.training_data.collectors import gpu
from roofcast.training_data.collectors.microbench import GRIDS, cases
from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.schema import validate
from tests.training_data.collect_helpers import conv_matmul_model


@pytest.fixture
def tiny_path(tmp_path):
    path = tmp_path / "tiny.onnx"
    path.write_bytes(conv_matmul_model().SerializeToString())
    return path


def test_measure_model_writes_schema_rows_per_batch_and_thread(tiny_path, tmp_path, capsys):
    out = tmp_path / "rows.csv"
    rc = main(["measure", str(tiny_path), "--batch", "1,2", "--threads", "1,2", "--repeats", "2",
               "--warmup", "0", "--output", str(out), "--format", "json"])
    assert rc == 0
    rows = pd.read_csv(out, keep_default_na=False, na_values=[""])
    assert validate(rows) == []
    configs = set(zip(rows["batch"], rows["threads_intra"], strict=True))
    assert configs == {(1, 1), (1, 2), (2, 1), (2, 2)}
    assert set(rows["model"]) == {"tiny"}
    assert '"summary"' in capsys.readouterr().out


def test_measure_appends_to_a_store(tiny_path, tmp_path, capsys):
    store = tmp_path / "m.sqlite"
    rc = main(["measure", str(tiny_path), "--batch", "1", "--repeats", "1", "--warmup", "0",
               "--store", str(store), "--format", "csv"])
    assert rc == 0
    from roofcast.training_data.store import Store

    assert Store(store).count() == 3
    assert "3 rows added" in capsys.readouterr().err


def test_cuda_on_a_machine_without_it_is_one_line_and_exit_2(tiny_path, monkeypatch, capsys):
    monkeypatch.setattr(gpu, "cuda_status", lambda: (False, "no CUDA device here: test"))
    rc = main(["measure", str(tiny_path), "--batch", "1", "--device", "cuda", "--no-save"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == "roofcast measure: error: no CUDA device here: test"


def test_cuda_status_explains_what_to_install(monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    ok, why = gpu.cuda_status()
    assert not ok
    assert "onnxruntime" in why
    assert "CUDA" in why
    with pytest.raises(MeasurementError, match="CUDA"):
        gpu.require_cuda()


@pytest.mark.parametrize("argv", [
    ["measure"],  # neither MODEL nor --micro
    ["measure", "x.onnx", "--micro", "gemm"],  # both
    ["measure", "--micro", "nonsense"],
    ["measure", "--micro", "gemm", "--batch", "2"],
    ["measure", "no_such_model_anywhere"],
])
def test_user_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofcast measure: error:")
    assert err.count("\n") == 1


def test_output_with_unknown_suffix_is_refused(tiny_path, tmp_path, capsys):
    rc = main(["measure", str(tiny_path), "--batch", "1", "--repeats", "1", "--warmup", "0",
               "--output", str(tmp_path / "rows.xlsx")])
    assert rc == 2
    assert ".parquet" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["measure", "m.onnx", "--batch", "0"],
    ["measure", "m.onnx", "--threads", "a,b"],
    ["measure", "m.onnx", "--opt-level", "max"],
    ["measure", "m.onnx", "--repeats", "0"],
    ["measure", "m.onnx", "--output", "a.csv", "--store", "b.sqlite"],
])
def test_bad_arguments_are_argparse_errors(argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_micro_quick_softmax_runs_through_the_profiler_path(capsys):
    rc = main(["measure", "--micro", "softmax", "--quick", "--repeats", "2", "--warmup", "0",
               "--no-save", "--format", "csv"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "softmax_16x128" in out


def test_micro_grids_cover_every_family_and_all():
    every = cases("all", quick=True)
    assert {c.family for c in every} == set(GRIDS)
    assert len(cases("all")) > len(every)
    for case in cases("gemm"):  # the GEMM grid respects its FLOP cap
        a, b = case.model.graph.input[0], case.model.graph.initializer[0]
        m, k = (d.dim_value for d in a.type.tensor_type.shape.dim)
        assert 2 * m * k * b.dims[1] <= 2.2e9
