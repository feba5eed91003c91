"""Serving sweep cells: one row per cell, predict_serving's numbers, replicas, per-cell errors."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from roofcast.graph_import.llm.load import load_llm
from roofcast.hw_catalog.catalog import get_device, load_catalog, pinned_catalog
from roofcast.hw_catalog.systems import get_system, resolve_system
from roofcast.predictor.llm.serving import predict_serving
from roofcast.predictor.llm.types import ServingConfig
from roofcast.predictor.sweeps.families import run_task
from roofcast.predictor.sweeps.family_serving import activations_of, serving_plan
from roofcast.predictor.sweeps.schedulers import run_sweep
from roofcast.predictor.sweeps.spec import read_spec
from roofcast.predictor.sweeps.types import CELL_COLUMNS, SweepTask
from tests.predictor.sweeps.helpers import write_spec

EST = "roofline+eff"
GPU, GPU2, SYSTEM = "h100-sxm", "a100-80gb-sxm", "system:hgx-h100"


def task(**kw) -> SweepTask:
    base = SweepTask(task_id=7, model="llm:gpt2", runtime="default",
                     devices=(GPU, GPU2, SYSTEM), batches=(1, 4), precisions=("fp16", "int4"),
                     modes=("serve",), dims=(), estimator=EST, family="serving",
                     plans=("single", "tp2"), tokens=((128, 32),), llm=True)
    return replace(base, **kw)


@pytest.fixture(scope="module")
def grid() -> tuple[SweepTask, pd.DataFrame]:
    t = task()
    return t, run_task(t)


def by_id(df: pd.DataFrame) -> pd.DataFrame:
    return df.set_index("cell_id", drop=False)


def reference(row: pd.Series):
    """predict_serving for the cell's config (the module docstring's rules)."""
    given = serving_plan(row["plan"])
    tp, pp = given.get("tp", 1), given.get("pp", 1)
    cfg = ServingConfig(input_tokens=int(row["input_tokens"]),
                        output_tokens=int(row["output_tokens"]), batch=int(row["batch"]),
                        weights=row["precision"], activations=activations_of(row["precision"]),
                        tp=tp, pp=pp)
    hardware = row["cell_id"].split("|")[1]
    if hardware.startswith("system:"):
        system = get_system(hardware.removeprefix("system:"))
    elif row["n_devices"] > 1:
        system = resolve_system(hw=hardware, devices=int(row["n_devices"]))
    else:
        system = None
    return predict_serving(load_llm("gpt2"), get_device(row["device"]), cfg, estimator=EST,
                           system=system)


def test_one_row_per_cell_with_the_contract_columns(grid):
    t, df = grid
    assert list(df.columns) == list(CELL_COLUMNS)
    assert sorted(df["cell_id"]) == sorted(t.cell_ids())
    assert (df["error"] == "").all(), df.loc[df["error"] != "", "error"].tolist()
    assert set(df["family"]) == {"serving"}
    assert set(df["mode"]) == {"serve"}
    assert set(df["estimator"]) == {EST}
    assert set(df["runtime"]) == {"vllm"}
    assert (df["task_id"] == 7).all()
    assert df["fits"].all()
    assert set(df["dominant_bound"]) <= {"prefill", "decode"}


def test_numbers_equal_predict_serving(grid):
    _, df = grid
    for _, row in df.iterrows():
        p = reference(row)
        assert row["time_s"] == pytest.approx(p.e2e_latency_s, rel=1e-12)
        assert row["lower_s"] == pytest.approx(p.lower["e2e_latency_s"], rel=1e-12)
        assert row["upper_s"] == pytest.approx(p.upper["e2e_latency_s"], rel=1e-12)
        assert row["ttft_s"] == pytest.approx(p.ttft_s, rel=1e-12)
        assert row["tpot_s"] == pytest.approx(p.tpot_s, rel=1e-12)
        assert row["memory_bytes"] == p.memory.total_bytes
        assert row["mem_capacity_bytes"] == p.memory.capacity_bytes
        replicas = row["n_devices"] / p.devices
        assert row["throughput_samples_per_s"] == pytest.approx(
            replicas * row["batch"] / p.e2e_latency_s, rel=1e-12)
        assert row["tokens_per_s"] == pytest.approx(replicas * p.output_tokens_per_s, rel=1e-12)
        decode = (row["output_tokens"] - 1) * p.tpot_s
        assert row["dominant_bound"] == ("decode" if 2 * decode >= p.e2e_latency_s
                                         else "prefill")


def test_replicas_scale_throughput_and_price(grid):
    _, df = grid
    cells = by_id(df)
    hw = get_device(GPU)
    for b in (1, 4):
        one = cells.loc[f"llm:gpt2|{GPU}|default|{b}|fp16|serve|single|128:32"]
        sys8 = cells.loc[f"llm:gpt2|{SYSTEM}|default|{b}|fp16|serve|single|128:32"]
        tp2 = cells.loc[f"llm:gpt2|{GPU}|default|{b}|fp16|serve|tp2|128:32"]
        sys_tp2 = cells.loc[f"llm:gpt2|{SYSTEM}|default|{b}|fp16|serve|tp2|128:32"]
        assert (one["system"], one["n_devices"], one["price_usd"]) == ("", 1, hw.price_usd)
        # 8 one-device replicas fill hgx-h100: the same latency, 8 x the requests and price
        assert (sys8["device"], sys8["system"], sys8["n_devices"]) == (GPU, "hgx-h100", 8)
        assert sys8["time_s"] == one["time_s"]
        assert sys8["throughput_samples_per_s"] == pytest.approx(
            8 * one["throughput_samples_per_s"])
        assert sys8["price_usd"] == 8 * hw.price_usd
        assert sys8["tdp_W"] == 8 * hw.tdp_W
        assert sys8["usd_per_throughput"] == pytest.approx(one["usd_per_throughput"])
        # tp2: a replica of 2 devices; on hgx-h100 4 of them
        assert (tp2["system"], tp2["n_devices"]) == (f"2 x {GPU}", 2)
        assert sys_tp2["n_devices"] == 8
        assert sys_tp2["throughput_samples_per_s"] == pytest.approx(
            4 * sys_tp2["batch"] / sys_tp2["time_s"])
        # a static batch: every request emits its 32 tokens in e2e
        for cell in (one, sys8, tp2, sys_tp2):
            assert cell["tokens_per_s"] == pytest.approx(32 * cell["throughput_samples_per_s"])


def test_dp_on_a_device_makes_replicas():
    t = task(devices=(GPU,), batches=(2,), precisions=("fp16",),
             plans=("single", "dp2", "dp2 tp2"))
    cells = by_id(run_task(t))
    assert (cells["error"] == "").all(), cells["error"].tolist()
    one = cells.loc[f"llm:gpt2|{GPU}|default|2|fp16|serve|single|128:32"]
    dp2 = cells.loc[f"llm:gpt2|{GPU}|default|2|fp16|serve|dp2|128:32"]
    mixed = cells.loc[f"llm:gpt2|{GPU}|default|2|fp16|serve|dp2 tp2|128:32"]
    assert dp2["time_s"] == one["time_s"]
    assert dp2["n_devices"] == 2
    assert dp2["throughput_samples_per_s"] == pytest.approx(2 * one["throughput_samples_per_s"])
    assert dp2["price_usd"] == 2 * one["price_usd"]
    assert (mixed["system"], mixed["n_devices"]) == (f"4 x {GPU}", 4)
    # two tp2 replicas inside 4 x h100-sxm: the replica predicted on that system
    p = reference(mixed)
    assert mixed["time_s"] == pytest.approx(p.e2e_latency_s, rel=1e-12)
    assert mixed["throughput_samples_per_s"] == pytest.approx(2 * 2 / p.e2e_latency_s)


def errors_of(df: pd.DataFrame) -> dict[str, str]:
    return dict(zip(df["cell_id"], df["error"], strict=True))


def test_errors_land_on_their_own_cells():
    t = task(runtime="tensorrt-llm", devices=(GPU, "mi300x", "no-such-device", SYSTEM),
             batches=(1,), precisions=("fp16",), plans=("single", "tp5", "tp3"))
    df = run_task(t)
    assert sorted(df["cell_id"]) == sorted(t.cell_ids())
    for cid, err in errors_of(df).items():
        hardware, plan = cid.split("|")[1], cid.split("|")[6]
        if hardware == "no-such-device":
            assert err.startswith("HardwareSpecError")
            assert "unknown device" in err
        elif hardware == "mi300x":
            assert "tensorrt-llm" in err
            assert "NVIDIA" in err
        elif plan == "tp5":
            assert "tp=5 does not divide the 12 attention heads" in err
        elif plan == "tp3" and hardware == SYSTEM:
            assert "3" in err
            assert "8 devices" in err
        else:
            assert err == "", (cid, err)
    good = df[df["error"] == ""]
    assert len(good) == 3
    assert set(good["runtime"]) == {"tensorrt-llm"}
    assert good["time_s"].notna().all()
    bad = df[df["error"] != ""]
    assert bad["time_s"].isna().all()
    # a system cell that failed after its system resolved names the system's device
    on_system = bad[bad["cell_id"].str.contains(f"|{SYSTEM}|", regex=False)]
    assert set(on_system["device"]) == {GPU}
    assert not bad["fits"].any()


def test_a_dtype_the_engine_cannot_run_fails_only_its_cells():
    # llama.cpp (the CPU default) runs no fp8 weights; vLLM on the GPU does
    t = task(devices=(GPU, "epyc-9654"), batches=(1, 2), precisions=("fp16", "fp8"),
             plans=("single",))
    err = errors_of(run_task(t))
    bad = {c for c, e in err.items() if e}
    assert bad == {c for c in err if "|epyc-9654|" in c and "|fp8|" in c}
    assert all("does not run fp8 weights" in err[c] for c in bad)


def test_not_fitting_stays_nan_and_a_bad_config_fails_every_cell():
    t = task(model="llama-3.1-70b", devices=("l4",), batches=(1,), precisions=("fp16",),
             plans=("single",))
    row = run_task(t).iloc[0]
    assert row["error"] == ""
    assert not row["fits"]
    assert math.isnan(row["time_s"])
    assert math.isnan(row["throughput_samples_per_s"])
    assert row["memory_bytes"] > row["mem_capacity_bytes"]
    bad = run_task(task(model="llm:no-such-llm"))
    assert len(bad) == task().n_cells
    assert (bad["error"].str.contains("no-such-llm")).all()


def test_plan_parts_serving_does_not_take_fail_their_cells():
    df = run_task(task(devices=(GPU,), batches=(1,), precisions=("fp16",),
                       plans=("single", "tp2 m4")))
    err = errors_of(df)
    assert err[f"llm:gpt2|{GPU}|default|1|fp16|serve|single|128:32"] == ""
    assert "'m4'" in err[f"llm:gpt2|{GPU}|default|1|fp16|serve|tp2 m4|128:32"]


def test_run_sweep_with_graph_and_serving_models(tmp_path: Path):
    path = write_spec(tmp_path, f"""
[sweep]
models = ["mlp.onnx", "llm:gpt2"]
devices = ["{GPU}", "{SYSTEM}"]
batches = [1, 2]
precisions = ["fp16"]
modes = ["infer", "serve"]
plans = ["single", "tp2"]
input_tokens = [64]
output_tokens = [16]
""")
    result = run_sweep(read_spec(path))  # the ledger: every planned cell once
    cells = result.cells
    serving = cells[cells["family"] == "serving"]
    assert len(serving) == 2 * 2 * 2  # hardware x batches x plans
    assert (serving["error"] == "").all(), serving["error"].tolist()
    graph = cells[cells["family"] == "graph"]
    assert len(graph) == 2
    assert (graph["error"] == "").all()
    assert np.isfinite(serving["time_s"]).all()


def test_pinned_catalog_skips_file_checks_inside_the_block_only(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    data = Path(__file__).parents[2] / "hw_catalog" / "data" / "fixture-gpu.toml"
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(tmp_path))
    path = tmp_path / "fixture-gpu.toml"
    path.write_text(data.read_text())
    assert get_device("fixture-gpu").mem_bw_Bps == 3350e9
    with pinned_catalog() as catalog:
        path.write_text(path.read_text().replace("bandwidth_GBps = 3350",
                                                 "bandwidth_GBps = 3351"))
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        assert load_catalog() is catalog
        assert get_device("fixture-gpu").mem_bw_Bps == 3350e9  # not re-checked in the block
    assert get_device("fixture-gpu").mem_bw_Bps == 3351e9  # seen after it
