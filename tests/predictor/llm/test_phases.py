"""Step timing: one evaluate call for many devices, dequantisation folded into its GEMM."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.llm.kernels import Segment
from roofcast.predictor.llm.phases import Step, fold_dequant, time_steps
from roofcast.predictor.llm.precision import TensorDtypes
from roofcast.predictor.llm.serving import predict_many
from roofcast.predictor.llm.types import ServingConfig

DEVICES = ("a100-80gb-sxm", "h100-sxm")


def _timed(arch, engine, weights, tokens=1):
    hws = [get_device(d) for d in DEVICES]
    seg = (Segment(1, tokens, tokens),) if tokens > 1 else (Segment(1, 1, 512),)
    return time_steps(arch, hws, [Step("s", seg)], TensorDtypes(weights), engine)


def test_step_time_is_the_sum_of_kernels_times_layers(archs, engine):
    st = _timed(archs["llama-2-7b"], engine, "fp16")
    for d, dev in enumerate(DEVICES):
        k = st.kernels("s", dev)
        assert st.time_s[0, d] == pytest.approx(float((k["time_s"] * k["count"]).sum()))
        assert st.time_s[0, d] == pytest.approx(float(k["kernel_s"].sum()))
        assert st.lower_s[0, d] <= st.time_s[0, d] <= st.upper_s[0, d]


def test_weight_only_dequant_overlaps_its_gemm(archs, engine):
    st = _timed(archs["llama-2-7b"], engine, "int4", tokens=4096)
    k = st.kernels("s", "a100-80gb-sxm")
    deq = k[k["overlaps"] != ""]
    assert len(deq) == 4
    assert (deq["kernel_s"] == 0).all()  # no time of their own
    gemm = k.set_index("key").loc[deq["overlaps"]]
    assert (gemm["kernel_s"].to_numpy() / gemm["count"].to_numpy()
            >= deq["compute_s"].to_numpy() - 1e-15).all()


def test_fp8_gemms_run_at_fp8_where_the_device_has_the_units(archs, engine):
    st = _timed(archs["llama-2-7b"], engine, "fp8", tokens=2048)
    a100, h100 = (st.kernels("s", d) for d in DEVICES)
    for table, peak in ((a100, "fp16"), (h100, "fp8")):
        up = table[table["node"] == "up"].iloc[0]
        deq = table[table["node"] == "up.dequant"].iloc[0]
        assert up["peak_dtype"] == peak
        charged = max(up["time_s"], deq["compute_s"]) if peak == "fp16" else up["time_s"]
        assert up["kernel_s"] == pytest.approx(charged * up["count"])
    assert any("no fp8 matrix unit" in n for n in st.notes)


@pytest.mark.parametrize(("weights", "unit", "fallback"), [
    ("nvfp4", "fp4", "fp8"), ("mxfp4", "fp4", "fp8"), ("fp8_block", "fp8", "fp8")])
def test_block_scaled_weights_run_on_their_unit_and_dequantise_only_without_it(
        archs, engine, weights, unit, fallback):
    hws = [get_device(d) for d in ("h100-sxm", "b200")]
    seg = (Segment(1, 2048, 2048),)
    st = time_steps(archs["llama-2-7b"], hws, [Step("s", seg)], TensorDtypes(weights), engine)
    h100, b200 = (st.kernels("s", d) for d in ("h100-sxm", "b200"))
    for table, peak, charged in ((h100, fallback, unit != fallback), (b200, unit, False)):
        up = table[table["node"] == "up"].iloc[0]
        deq = table[table["node"] == "up.dequant"].iloc[0]
        assert (up["dtype"], up["peak_dtype"]) == (weights, peak)
        expected = max(up["time_s"], deq["compute_s"]) if charged else up["time_s"]
        assert up["kernel_s"] == pytest.approx(expected * up["count"])
    if unit != fallback:
        assert any(f"no {unit} matrix unit; using matrix {fallback}" in n and weights in n
                   for n in st.notes)


def _table(dtype_used: str, gemm_s: float, deq_s: float, fallback_only: bool) -> pd.DataFrame:
    return pd.DataFrame({
        "key": ["g", "g.dequant"], "overlaps": ["", "g"], "fallback_only": [False, fallback_only],
        "dtype": ["fp8", "fp16"], "peak_dtype": [dtype_used, "fp16"],
        "time_s": [gemm_s, 1e-6], "lower_s": [gemm_s / 2, 1e-6], "upper_s": [gemm_s * 2, 1e-6],
        "compute_s": [gemm_s, deq_s]})


@pytest.mark.parametrize(("dtype_used", "fallback_only", "expected"), [
    ("fp8", True, 1.0),    # fp8 units: the fp8 GEMM needs no dequantisation
    ("fp16", True, 3.0),   # fallback: the dequant (3 s) exceeds the GEMM (1 s)
    ("fp16", False, 3.0),  # weight-only int4/int8: always charged
    ("fp8", False, 3.0),
])
def test_fold_dequant_takes_the_max_of_gemm_and_dequant(dtype_used, fallback_only, expected):
    out = fold_dequant(_table(dtype_used, 1.0, 3.0, fallback_only), 2, 1)
    assert out["time_s"][0, 0] == expected
    assert out["time_s"][0, 1] == 0.0
    assert out["upper_s"][0, 0] == max(2.0, expected)
    assert out["lower_s"][0, 0] == (0.5 if expected == 1.0 else 3.0)


def test_devices_of_different_engines_are_grouped(archs):
    hws = [get_device("h100-sxm"), get_device("epyc-9654"), get_device("mi300x")]
    preds = predict_many(archs["llama-2-7b"], hws, ServingConfig(128, 16, weights="int4"),
                         [1, 2])
    assert [p.device for p in preds] == ["h100-sxm"] * 2 + ["epyc-9654"] * 2 + ["mi300x"] * 2
    runtimes = {p.device: p.runtime for p in preds}
    assert runtimes["h100-sxm"] != runtimes["epyc-9654"]
    assert all(np.isfinite(p.tpot_s) for p in preds)
    cpu = next(p for p in preds if p.device == "epyc-9654")
    assert cpu.tpot_s > next(p for p in preds if p.device == "h100-sxm").tpot_s


def test_one_evaluate_call_for_all_devices_and_batches(archs, engine, monkeypatch):
    import roofcast.predictor.llm.phases as phases

    calls = []
    real = phases.evaluate

    def counting(work, hws, *args, **kw):
        calls.append((len(work), len(hws)))
        return real(work, hws, *args, **kw)

    monkeypatch.setattr(phases, "evaluate", counting)
    hws = [get_device(d) for d in ("h100-sxm", "h200", "mi300x")]
    preds = predict_many(archs["llama-3.1-70b"], hws,
                         ServingConfig(2048, 256, weights="fp8", runtime=engine), [1, 4, 16])
    assert len(preds) == 9
    assert len(calls) == 1
    assert calls[0][1] == 3
