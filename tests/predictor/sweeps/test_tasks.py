"""``plan_tasks`` (deterministic slices that cover the grid once, the sizing rule) and
``run_task`` (one row per cell, per-cell errors, the per-process graph cache)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from roofcast.predictor.sweep import sweep
from roofcast.predictor.sweeps import family_graph as tasks_mod
from roofcast.predictor.sweeps.families import FAMILY_SPECS
from roofcast.predictor.sweeps.family_graph import graph_cache
from roofcast.predictor.sweeps.spec import read_spec
from roofcast.predictor.sweeps.tasks import (
    TASK_MIN_S,
    plan_tasks,
    run_task,
    slice_width,
    task_cell_ids,
)
from roofcast.predictor.sweeps.types import CELL_COLUMNS, CellKey, SweepSpec, cell_id

from .helpers import CPU, GPU, GPU2, SMALL, write_spec

GPUS = ("h100-sxm", "a100-80gb-sxm", "t4", "l4", "a10", "v100-sxm2-32gb", "h200")


def _spec(**kw) -> SweepSpec:
    base = {"models": ("resnet50", "mobilenet_v2"), "devices": GPUS, "batches": (1, 8),
            "precisions": ("fp32", "fp16"), "runtimes": ("default", "tensorrt")}
    return SweepSpec(**{**base, **kw})


@pytest.mark.parametrize("cells_per_task", [None, 1, 4, 9, 1000])
def test_plan_covers_the_grid_once_deterministically(cells_per_task):
    spec = _spec()
    tasks = plan_tasks(spec, cells_per_task=cells_per_task)
    assert tasks == plan_tasks(spec, cells_per_task=cells_per_task)
    assert [t.task_id for t in tasks] == list(range(len(tasks)))
    ids = [c for t in tasks for c in task_cell_ids(t)]
    grid = [cell_id(m, r, CellKey(d, b, p, "infer")) for m, d, r, b, p in itertools.product(
        spec.models, spec.devices, spec.runtimes, spec.batches, spec.precisions)]
    assert len(ids) == spec.n_cells == len(set(ids))
    assert set(ids) == set(grid)
    # order: models, then runtimes, then device slices in the spec's order
    keys = [(spec.models.index(t.model), spec.runtimes.index(t.runtime),
             GPUS.index(t.devices[0])) for t in tasks]
    assert keys == sorted(keys)


def test_slices_follow_cells_per_task():
    per_device = 2 * 2  # batches x precisions
    tasks = plan_tasks(_spec(), cells_per_task=9)  # 3 devices a slice at least -> 7 // 3 = 2
    assert {len(t.devices) for t in tasks} == {3, 4}
    assert all(t.n_cells >= 9 for t in tasks)
    assert len(plan_tasks(_spec(), cells_per_task=1)) == 2 * 2 * len(GPUS)
    assert len(plan_tasks(_spec(), cells_per_task=10**6)) == 2 * 2
    assert all(t.n_cells == per_device * len(GPUS) for t in plan_tasks(_spec()))


@pytest.mark.parametrize("family", sorted(FAMILY_SPECS))
@pytest.mark.parametrize("per_device", [1, 2, 4, 32, 640])
def test_default_sizing_rule(per_device, family):
    f = FAMILY_SPECS[family]
    w = slice_width(per_device, fixed_s=f.fixed_s, cell_s=f.cell_s)
    est_s = per_device * (f.fixed_s + w * f.cell_s)  # the docstring's cost model
    tol = 1 - 1e-9  # the rule's ceil is exact; the products here round (2 x 0.05 < 0.1)
    assert est_s >= TASK_MIN_S * tol
    assert w * f.cell_s >= f.fixed_s * tol  # the repeated fixed part is at most half a task
    assert w == slice_width(per_device, None, fixed_s=f.fixed_s, cell_s=f.cell_s)
    with pytest.raises(ValueError, match="cells_per_task must be >= 1"):
        slice_width(per_device, 0)


def test_kind_selector_in_a_programmatic_spec_expands():
    tasks = plan_tasks(_spec(devices=("kind:cpu",), models=("resnet50",),
                             runtimes=("default",)), cells_per_task=10**6)
    assert CPU in tasks[0].devices
    assert "kind:cpu" not in tasks[0].devices


@pytest.fixture
def small(tmp_path):
    return read_spec(write_spec(tmp_path, SMALL))


def test_run_task_matches_predictor_sweep_and_reports_bad_device(small, tmp_path):
    (task,) = plan_tasks(small)
    df = run_task(task)
    assert tuple(df.columns) == CELL_COLUMNS
    assert sorted(df["cell_id"]) == sorted(task_cell_ids(task))
    bad = df[df["device"] == "no-such-device"]
    assert len(bad) == 4
    assert bad["error"].str.contains("unknown device").all()
    assert bad["time_s"].isna().all()
    good = df[df["device"] != "no-such-device"].set_index(["device", "batch", "precision"])
    assert (good["error"] == "").all()
    assert good["time_s"].gt(0).all()
    graphs = {b: graph_cache("mlp.onnx", (), b, str(tmp_path)) for b in (1, 4)}
    ref = sweep(graphs.__getitem__, [GPU, GPU2, CPU], [1, 4], ["fp32", "fp16"]).set_index(
        ["device", "batch", "precision"])
    np.testing.assert_array_equal(good.loc[ref.index, "time_s"], ref["time_s"])
    np.testing.assert_allclose(good.loc[ref.index, "usd_per_throughput"],
                               ref["price_usd"] / ref["throughput_samples_per_s"])
    assert set(good["runtime"]) == {"pytorch-eager", "onnxruntime-cpu"}


def test_graphs_imported_once_per_process(small, monkeypatch):
    calls = []
    real = tasks_mod.import_model

    def counting(source, dims=None, name=None):
        calls.append(dict(dims))
        return real(source, dims=dims, name=name)

    monkeypatch.setattr(tasks_mod, "import_model", counting)
    graph_cache.cache_clear()
    for task in plan_tasks(small, cells_per_task=1):  # 16 tasks
        run_task(task)
    assert sorted(c["batch"] for c in calls) == [1, 4]  # once per batch, not per task/cell


def test_runtime_refused_on_one_kind_fails_only_those_cells(tmp_path):
    spec = read_spec(write_spec(tmp_path, SMALL.replace("batches = [1, 4]", "batches = [1]")
                                + 'runtimes = ["onnxruntime-cpu"]\n'))
    df = run_task(plan_tasks(spec)[0])
    errors = df.set_index("device")["error"]
    assert errors[CPU].eq("").all()
    assert errors[[GPU, GPU2]].str.contains("onnxruntime-cpu").all()


def test_failing_import_and_failing_device_become_rows(tmp_path, monkeypatch):
    (tmp_path / "broken.onnx").write_bytes(b"not onnx")
    spec = read_spec(write_spec(tmp_path, SMALL.replace('"mlp.onnx"', '"mlp.onnx", "broken.onnx"')))
    df = run_task(plan_tasks(spec)[1])
    assert len(df) == 16
    assert (df["error"] != "").all()
    assert df["model"].eq("broken.onnx").all()

    real = tasks_mod.sweep

    def flaky(source, devices, *a, **kw):  # the vectorised call dies when GPU2 is in it
        if GPU2 in [d.id for d in devices]:  # the family hands sweep resolved devices
            raise RuntimeError("boom on " + GPU2)
        return real(source, devices, *a, **kw)

    monkeypatch.setattr(tasks_mod, "sweep", flaky)
    df = run_task(plan_tasks(spec)[0]).set_index("device")
    assert df.loc[GPU2, "error"].str.contains("RuntimeError: boom").all()
    assert (df.loc[[GPU, CPU], "error"] == "").all()
    assert df.loc["no-such-device", "error"].str.contains("unknown device").all()

    def batch_four_fails(source, devices, batches, *a, **kw):  # a device-independent failure
        if 4 in batches:
            raise RuntimeError("batch 4 is broken")
        return real(source, devices, batches, *a, **kw)

    monkeypatch.setattr(tasks_mod, "sweep", batch_four_fails)
    df = run_task(plan_tasks(spec)[0])
    known = df[df["device"] != "no-such-device"]
    assert known.loc[known["batch"] == 4, "error"].str.contains("batch 4 is broken").all()
    assert known.loc[known["batch"] == 1, "error"].eq("").all()
    assert len(df) == 16


def test_model_without_batch_dim_is_a_cell_error(tmp_path):
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "fixed", [x], [y])
    import onnx
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "fixed.onnx")
    spec = read_spec(write_spec(tmp_path, SMALL.replace('"mlp.onnx"', '"fixed.onnx"')))
    df = run_task(plan_tasks(spec)[0])
    assert df["error"].str.contains("no 'batch' dim").sum() == 12  # 3 known devices x 2 x 2


def test_precision_a_runtime_lacks_fails_only_those_cells(tmp_path):
    spec = read_spec(write_spec(tmp_path, SMALL.replace('"fp16"]', '"int8"]')))
    df = run_task(plan_tasks(spec)[0])
    known = df[df["device"] != "no-such-device"].set_index(["device", "precision"])["error"]
    assert known.loc[[(GPU, "int8"), (GPU2, "int8")]].str.contains("does not run int8").all()
    assert known.loc[[(GPU, "fp32"), (GPU2, "fp32"), (CPU, "fp32"), (CPU, "int8")]].eq("").all()


def test_any_cells_per_task_is_sized_in_integers():
    """``--cells-per-task 10**25`` was an OverflowError (a float division): now one task as big
    as the memory budget allows."""
    assert slice_width(10, 25) == slice_width(10, 30) == 3
    spec = SweepSpec(models=("mobilenet_v2",), devices=(GPU, GPU2, CPU), batches=(1, 2))
    tasks = plan_tasks(spec, cells_per_task=10**25, max_task_cells=4)
    assert [t.n_cells for t in tasks] == [4, 2]  # within the memory budget, every cell once
