"""Parallel sweep cells: one row per cell with the contract's columns, the numbers of
``predict_parallel`` for the same cell, errors on their own cells only, shared timing."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from roofcast import parallel_api as api
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.runtimes.catalog import default_runtime_name
from roofcast.predictor.sweeps import family_parallel as fp
from roofcast.predictor.sweeps.families import run_task
from roofcast.predictor.sweeps.plans import parse_plan
from roofcast.predictor.sweeps.schedulers import run_sweep
from roofcast.predictor.sweeps.spec import read_spec
from roofcast.predictor.sweeps.types import CELL_COLUMNS, SweepTask

from .helpers import GPU, GPU2, write_mlp, write_spec

SYSTEM = "system:hgx-h100"
PLANS = ("single", "tp2", "tp2 pp2")
SEQ = 128
PARTS = {"compute": "compute_s", "comm": "exposed_comm_s", "bubble": "bubble_s",
         "optimizer": "optimizer_s"}


def llm_task(**changes) -> SweepTask:
    task = SweepTask(task_id=3, model="llm:gpt2", runtime="default", devices=(GPU, GPU2, SYSTEM),
                     batches=(8,), precisions=("bf16",), modes=("train", "infer"), dims=(),
                     estimator="roofline+eff", family="parallel", plans=PLANS,
                     tokens=((SEQ, 0),), llm=True)
    return replace(task, **changes)


def api_prediction(model, row, **options):
    """``roofcast.parallel_api.predict_parallel`` for the cell of ``row``."""
    given = parse_plan(row.plan)
    if row.system == "" or row.system.endswith(f"x {row.device}"):  # devices of a device entry
        where = {"hw": row.device, "devices": row.n_devices}
        given.setdefault("dp", 1)
    else:
        where = {"system": row.system}
    return api.predict_parallel(model, **where, global_batch=int(row.batch), mode=row.mode,
                                estimator="roofline+eff", precision=row.precision, **given,
                                **options)


def assert_same(row, pred, llm: bool) -> None:
    """The row's metrics are the prediction's (module docstring's column meanings)."""
    assert row.time_s == pred.step_s
    assert (row.lower_s, row.upper_s) == (pred.lower_s, pred.upper_s)
    assert row.throughput_samples_per_s == pred.samples_per_s
    assert row.memory_bytes == pred.memory.total_bytes
    assert row.mem_capacity_bytes == pred.memory.capacity_bytes
    assert row.fits == pred.fits
    assert row.runtime == pred.runtime
    assert row.n_devices == pred.plan.n_devices
    if llm:
        assert row.tokens_per_s == pytest.approx(pred.samples_per_s * SEQ, rel=1e-12)
    else:
        assert math.isnan(row.tokens_per_s)
    assert row.dominant_bound == max(PARTS, key=lambda k: getattr(pred, PARTS[k]))
    hw = get_device(row.device)
    assert row.price_usd == pytest.approx(hw.price_usd * row.n_devices)
    assert row.tdp_W == pytest.approx(hw.tdp_W * row.n_devices)
    assert row.usd_per_throughput == pytest.approx(row.price_usd / pred.samples_per_s)
    assert row.throughput_per_W == pytest.approx(pred.samples_per_s / row.tdp_W)
    assert math.isnan(row.ttft_s)
    assert math.isnan(row.tpot_s)


def test_llm_cells_one_row_each_with_the_engine_numbers():
    task = llm_task()
    df = run_task(task)  # through the family registry
    assert list(df.columns) == list(CELL_COLUMNS)
    assert sorted(df["cell_id"]) == sorted(task.cell_ids())
    assert (df["error"] == "").all(), df["error"].unique()
    assert set(df["family"]) == {"parallel"}
    assert set(df["task_id"]) == {3}
    assert set(df["estimator"]) == {"roofline+eff"}
    by_hw = df.assign(hw=df["cell_id"].str.split("|").str[1])
    system_rows = by_hw[by_hw["hw"] == SYSTEM]
    assert set(system_rows["system"]) == {"hgx-h100"}
    assert set(system_rows["device"]) == {GPU}
    assert set(system_rows["n_devices"]) == {8}  # dp fills the system
    device_rows = by_hw[by_hw["hw"] == GPU2]
    assert dict(zip(device_rows["plan"], device_rows["n_devices"], strict=False)) == {
        "single": 1, "tp2": 2, "tp2 pp2": 4}
    assert set(device_rows["system"]) == {"", *(f"{n} x {GPU2}" for n in (2, 4))}  # "": 1
    for row in df.itertuples():
        assert_same(row, api_prediction("llm:gpt2", row, seq_tokens=SEQ), llm=True)


def test_graph_cells_equal_the_engine(tmp_path):
    write_mlp(tmp_path / "mlp.onnx")
    task = SweepTask(task_id=0, model="mlp.onnx", runtime="default", devices=(GPU, SYSTEM),
                     batches=(8,), precisions=("fp16",), modes=("train", "infer"),
                     dims=(("sequence", 128),),  # a dim the MLP lacks: not bound, no error
                     estimator="roofline+eff", model_root=str(tmp_path), family="parallel",
                     plans=("tp2", "tp2 pp2"))
    df = run_task(task)
    assert sorted(df["cell_id"]) == sorted(task.cell_ids())
    assert (df["error"] == "").all(), df["error"].unique()
    assert set(df["runtime"]) == {default_runtime_name("gpu")}
    for row in df.itertuples():
        assert_same(row, api_prediction(str(tmp_path / "mlp.onnx"), row), llm=False)


def expected_error(hardware: str, batch: int, plan: str) -> str | None:
    """The refusal each cell of ``test_errors_land_on_their_own_cells`` must carry."""
    if hardware == "no-such-device":
        return "unknown device"
    if hardware == "system:no-such-system":
        return "unknown system"
    if plan == "tp5":
        return "tp=5 does not divide the 12 attention heads"
    if hardware == SYSTEM and plan == "dp4 tp2 pp2":
        return "= 16 devices but the system has 8"
    dp = {"single": 8, "tp2 m3": 4}.get(plan, 2) if hardware == SYSTEM else \
        parse_plan(plan).get("dp", 1)
    if batch % dp:
        return f"dp={dp} does not divide the global batch {batch}"
    if plan == "tp2 m3" and (batch // dp) % 3:
        return "micro_batches=3 does not divide"
    return None


def test_errors_land_on_their_own_cells():
    plans = ("single", "tp5", "tp2 pp2", "tp2 m3", "dp4 tp2 pp2")
    task = llm_task(devices=(GPU, "no-such-device", SYSTEM, "system:no-such-system"),
                    batches=(8, 6), modes=("train",), plans=plans)
    df = run_task(task)
    assert sorted(df["cell_id"]) == sorted(task.cell_ids())
    hardware = df["cell_id"].str.split("|").str[1]
    n_ok = 0
    for hw, row in zip(hardware, df.itertuples(), strict=True):
        want = expected_error(hw, int(row.batch), row.plan)
        if want is None:
            assert row.error == "", (hw, row.batch, row.plan, row.error)
            assert np.isfinite(row.time_s)
            n_ok += 1
        else:
            assert want in row.error, (hw, row.batch, row.plan, row.error)
            assert "\n" not in row.error
            assert math.isnan(row.time_s)
            assert not row.fits
    assert n_ok >= 4  # the refusals did not sink the good cells
    unknown = df[hardware == "system:no-such-system"]
    assert set(unknown["system"]) == {"no-such-system"}
    assert set(unknown["device"]) == {""}
    assert set(df[hardware == SYSTEM]["device"]) == {GPU}  # known system, even on its errors


def test_runtime_that_does_not_run_on_a_device_fails_its_cells_only():
    df = run_task(llm_task(devices=(GPU, "epyc-9654"), plans=("single",), modes=("infer",)))
    cpu = df[df["device"] == "epyc-9654"]
    assert len(cpu) == 1
    assert "megatron-lm" in cpu["error"].iloc[0]
    assert (df[df["device"] == GPU]["error"] == "").all()


def test_builds_are_stacked_once_and_timed_on_all_devices_together(monkeypatch):
    stacks, timings = [], []
    stack, time_devices = fp.stack_workloads, fp.time_stacked_devices
    monkeypatch.setattr(fp, "stack_workloads", lambda works: stacks.append(works) or stack(works))
    monkeypatch.setattr(fp, "time_stacked_devices", lambda s, hws, est: timings.append(
        [hw.id for hw in hws]) or time_devices(s, hws, est))
    task = llm_task(devices=(GPU, GPU2, SYSTEM), batches=(8, 16))
    df = fp.run_parallel(task)
    assert (df["error"] == "").all()
    assert len(df) == task.n_cells == 36
    # device entries: 2 batches x 2 modes x tp 1/2 = 8 builds; the system's dp=8/4/2 adds
    # micro-batches 1, 2 (tp1, tp2) and 4 (tp2 pp2): 36 cells, one stack, one timing call
    assert len(stacks) == 1
    assert len(stacks[0]) == len({id(w) for w in stacks[0]}) < task.n_cells
    assert timings == [[GPU, GPU2]]  # hgx-h100's device is h100-sxm: timed once
    misses = fp.source_cache.cache_info().misses
    fp.run_parallel(replace(task, devices=(GPU2,)))
    assert fp.source_cache.cache_info().misses == misses  # the source is reused


def test_a_failing_shared_timing_falls_back_per_device(monkeypatch):
    def broken(stacked, hws, estimator):
        raise RuntimeError("shared timing failed")

    monkeypatch.setattr(fp, "time_stacked_devices", broken)
    task = llm_task(devices=(GPU, GPU2), plans=("tp2",), modes=("infer",))
    df = fp.run_parallel(task)
    assert (df["error"] == "").all()
    for row in df.itertuples():
        assert row.time_s == api_prediction("llm:gpt2", row, seq_tokens=SEQ).step_s


def test_run_sweep_mixing_graph_and_parallel_cells(tmp_path):
    spec = read_spec(write_spec(tmp_path, f"""
[sweep]
models = ["mlp.onnx", "llm:gpt2"]
devices = ["{GPU}", "{SYSTEM}"]
batches = [8]
precisions = ["fp16"]
modes = ["infer"]
plans = ["single", "tp2"]
input_tokens = [{SEQ}]
"""))
    result = run_sweep(spec, cells_per_task=2)  # its integrity check: every cell once
    cells = result.cells
    assert len(cells) == spec.n_cells == 1 + 2 + 4
    assert cells.groupby("family").size().to_dict() == {"graph": 1, "parallel": 6}
    parallel = cells[cells["family"] == "parallel"]
    assert (parallel["error"] == "").all(), parallel["error"].unique()
    assert set(parallel[parallel["model"] == "llm:gpt2"]["runtime"]) == {"megatron-lm"}
    assert parallel["tokens_per_s"].notna().sum() == 4  # the LLM's cells only


def test_a_model_that_does_not_load_fails_its_cells_and_is_tried_once(tmp_path, monkeypatch):
    (tmp_path / "bad.onnx").write_bytes(b"not an onnx file")
    calls = []
    load = fp.load_model
    monkeypatch.setattr(fp, "load_model", lambda source: calls.append(source) or load(source))
    task = SweepTask(task_id=0, model="bad.onnx", runtime="default", devices=(GPU, GPU2),
                     batches=(8,), precisions=("fp16",), modes=("infer",), dims=(),
                     estimator="roofline+eff", model_root=str(tmp_path), family="parallel",
                     plans=("tp2", "tp2 pp2"))
    df = fp.run_parallel(task)
    assert len(df) == 4
    assert df["error"].str.contains("bad.onnx|onnx", case=False).all(), df["error"].unique()
    assert len(calls) == 1


def test_tokens_past_the_context_fail_their_cells_only():
    df = fp.run_parallel(llm_task(devices=(GPU,), plans=("tp2",), modes=("infer",),
                                  tokens=((SEQ, 0), (4096, 0))))
    long = df[df["input_tokens"] == 4096]
    assert len(long) == 1
    assert "exceeds the 1024-token context" in long["error"].iloc[0]
    assert (df[df["input_tokens"] == SEQ]["error"] == "").all()
