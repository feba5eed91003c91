"""The calibration's levels: a measured catalog device gets its own factor and in-sample interval,
a what-if variant or an unmeasured device of a measured vendor the vendor's (with the
leave-one-device-out interval), and notes() says which; the device factor's shrinkage rule."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from roofcast.hw_catalog import derive, get_device
from roofcast.predictor.llm.calibration import calibration_document, engine_calibration
from roofcast.predictor.llm.calibration_fit import (
    SHRINK_ROWS,
    EngineFit,
    fit_device_factors,
    predict_calibrated,
)


def test_every_measured_device_has_its_factors_and_an_interval_around_them():
    for name, e in calibration_document()["engines"].items():
        for ph in ("prefill", "decode"):
            assert set(e[ph]["device_factors"]) == set(e["rows_per_device"]), (name, ph)
            for lo, hi in e[ph]["device_ratios"].values():
                assert 0 < lo <= 1.0 <= hi


@pytest.mark.parametrize("device", ["mi300x", "h100-sxm", "intel-max-1550"])
def test_a_measured_device_uses_its_own_factor(device):
    cal = engine_calibration("vllm-2024")
    hw = get_device(device)
    m = np.array([0.01, 0.1])
    for ph in ("prefill", "decode"):
        p = cal.phases[ph]
        level, f, q_lo, q_hi = cal.level(ph, hw)
        assert level == "device"
        assert f == p.device_factors[device]
        assert (q_lo, q_hi) == tuple(p.device_ratios[device])
        t, lo, hi = cal.apply(ph, m, hw)
        np.testing.assert_allclose(lo, np.minimum(t, q_lo * t))
        np.testing.assert_allclose(t, f * p.scale * m + p.overhead_s + p.seq_overhead_s)
        np.testing.assert_allclose(hi, q_hi * t)
    runs = calibration_document()["engines"]["vllm-2024"]["rows_per_device"][device]
    assert f"fitted on this device's {runs} measured runs" in " ".join(cal.notes(hw))


@pytest.mark.parametrize("variant", [
    get_device("mi300x:mem_bw_scale=2"),                    # inline what-if
    derive(get_device("mi300x"), id="mi300x", peak_scale=1.5),  # derived, reusing the id
    dataclasses.replace(get_device("mi300x"), mem_capacity_bytes=96e9),  # an edited copy
])
def test_a_what_if_variant_of_a_measured_device_is_not_that_device(variant):
    cal = engine_calibration("vllm-2024")
    assert not cal.measured(variant)
    base = get_device("mi300x")
    for ph in ("prefill", "decode"):
        p = cal.phases[ph]
        level, f, q_lo, q_hi = cal.level(ph, variant)
        assert level == "vendor"
        assert f == p.vendor_factor("AMD")[0]
        assert (q_lo, q_hi) == p.ratios("AMD")
        assert f != cal.level(ph, base)[1]
    notes = " ".join(cal.notes(variant))
    assert "device not measured" in notes
    assert "vendor factor" in notes
    assert "from AMD devices mi250, mi300x" in notes
    assert "measured runs" not in notes


def test_an_unmeasured_device_of_a_measured_vendor_gets_the_vendor_level():
    cal = engine_calibration("vllm-2024")
    h200 = get_device("h200")
    assert "h200" not in cal.device_runs
    assert cal.level("decode", h200)[0] == "vendor"
    assert cal.level("decode", h200)[1] == cal.phases["decode"].vendor_factor("NVIDIA")[0]
    notes = " ".join(cal.notes(h200))
    assert "from NVIDIA devices a100-40gb-sxm, gh200, h100-sxm (device not measured)" in notes
    guess = dataclasses.replace(get_device("h100-sxm"), vendor="Moore Threads")
    assert cal.level("decode", guess)[0] == "unseen vendor"


def test_the_benchmark_formula_uses_the_same_levels_as_apply():
    cal = engine_calibration("vllm-2024")
    what_if = get_device("h100-sxm:mem_bw_scale=1.0001")
    row = {"prefill_s": 0.2, "decode_s": 3.0, "prefill_steps": 1, "decode_steps": 127,
           "prefill_seqs": 16, "decode_seqs": 127 * 16}
    frame = pd.DataFrame([row | {"device": "h100-sxm"}, row | {"device": what_if.id}])
    t, _, _ = predict_calibrated(cal, frame, {"h100-sxm": get_device("h100-sxm"),
                                              what_if.id: what_if})
    for i, hw in enumerate((get_device("h100-sxm"), what_if)):
        want = sum(cal.apply(ph, row[f"{ph}_s"], hw, seqs=0)[0] - cal.phases[ph].overhead_s
                   + cal.phases[ph].overhead_s * row[f"{ph}_steps"]
                   + cal.phases[ph].seq_overhead_s * row[f"{ph}_seqs"]
                   for ph in ("prefill", "decode"))
        assert t[i] == pytest.approx(float(want))
    assert t[0] != pytest.approx(t[1], rel=1e-3)  # the variant does not get h100-sxm's factor


def _device_rows(n: int, factor: float) -> pd.DataFrame:
    """``n`` decode-dominated rows of one NVIDIA device whose decode runs ``factor`` x the
    engine's (no noise, no overheads)."""
    rng = np.random.default_rng(n)
    f = pd.DataFrame({"device": "d", "vendor": "NVIDIA", "figure": "all",
                      "prefill_s": np.full(n, 1e-9), "decode_s": rng.uniform(1, 10, n),
                      "prefill_steps": 1, "decode_steps": 255, "prefill_seqs": 1,
                      "decode_seqs": 255, "ttft_s": np.nan})
    f["latency_s"] = factor * f["decode_s"]
    return f


@pytest.mark.parametrize("n", [2, 10, 60])
def test_the_device_factor_is_shrunk_toward_the_vendor_by_shrink_rows(n):
    """Small residuals: log f_device = n / (n + SHRINK_ROWS) x what the rows alone say; the
    prefill factor, which these rows do not constrain, stays at the vendor's."""
    fit = EngineFit(1.0, 1.0, 0.0, 0.0, {"NVIDIA": 1.0}, {"NVIDIA": 1.0})
    out = fit_device_factors(_device_rows(n, 1.05), fit)
    assert math.log(out.decode_device["d"]) == pytest.approx(
        n / (n + SHRINK_ROWS) * math.log(1.05), rel=0.02)
    assert out.prefill_device["d"] == pytest.approx(1.0, abs=1e-6)
    assert out.decode_factors == fit.decode_factors  # the vendor level is left as it was


def test_a_device_with_many_rows_reaches_its_own_factor_and_predict_uses_it():
    fit = EngineFit(1.0, 1.0, 0.0, 0.0, {"NVIDIA": 1.0}, {"NVIDIA": 1.0})
    rows = _device_rows(400, 1.4)
    out = fit_device_factors(rows, fit)
    assert out.decode_device["d"] == pytest.approx(1.4, rel=0.03)
    np.testing.assert_allclose(out.predict(rows), out.decode_device["d"] * rows["decode_s"],
                               rtol=1e-6)
    other = rows.assign(device="e")  # another device of the vendor: the vendor factor
    np.testing.assert_allclose(out.predict(other), rows["decode_s"], rtol=1e-6)


@pytest.mark.parametrize(("cfg_kw", "want_decode"), [
    ({"batch": 24}, 24.0),          # static: the batch in every step
    ({"concurrency": 12}, 12.0),    # continuous: the C decoding requests per step
])
def test_serving_passes_the_sequences_per_step_to_the_calibration(monkeypatch, cfg_kw,
                                                                  want_decode):
    """predict_serving hands apply() the sequences of each step, and the per-sequence term
    adds exactly s x B to TPOT."""
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.predictor.llm import serving
    from roofcast.predictor.llm.types import ServingConfig

    seen: dict[str, float] = {}
    real = engine_calibration("vllm-2024")

    class Recording:
        def __getattr__(self, name):
            return getattr(real, name)

        def apply(self, phase, model_s, hw, *, seqs=1, **interval):
            seen[phase] = float(seqs)
            return real.apply(phase, model_s, hw, seqs=seqs, **interval)

    monkeypatch.setattr(serving, "engine_calibration", lambda name: Recording())
    arch, hw = load_llm("llama-2-7b"), get_device("h100-sxm")
    cfg = ServingConfig(input_tokens=512, output_tokens=256, runtime="vllm-2024", **cfg_kw)
    p = serving.predict_serving(arch, hw, cfg)
    assert seen["decode"] == want_decode
    assert seen["prefill"] == (24.0 if "batch" in cfg_kw else 1.0)
    s = real.phases["decode"].seq_overhead_s
    assert s > 0  # vLLM keeps the term (predictor/data/llm_engines/llm_engines.json)
    without = dataclasses.replace(real, phases={
        **real.phases, "decode": dataclasses.replace(real.phases["decode"], seq_overhead_s=0.0)})
    monkeypatch.setattr(serving, "engine_calibration", lambda name: without)
    q = serving.predict_serving(arch, hw, cfg)
    assert p.tpot_s - q.tpot_s == pytest.approx(s * want_decode, rel=1e-9)
