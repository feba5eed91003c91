"""The shipped engine calibration (predictor/data/llm_engines/llm_engines.json).

It loads, it was fitted on the bundled serving rows (data hash), apply() is monotone with
lo <= t <= hi, engines without data say so; the fit recovers known parameters."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from roofcast.hw_catalog import get_device
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm import calibration
from roofcast.predictor.llm.calibration import PHASES, calibration_document, engine_calibration
from roofcast.predictor.llm.calibration_fit import EngineFit, fit_engine, loo


@pytest.fixture
def shared_llm_data():
    """The public data folder holding llm/argonne (skipped where the data is not present)."""
    from roofcast.training_data.public_kernels import shared_data_dir

    folder = shared_data_dir()
    if not (folder / "llm" / "argonne").is_dir():
        pytest.skip(f"public LLM data not found under {folder} (set ROOFCAST_SHARED_DATA)")
    return folder


FITTED = ("vllm-2024", "tensorrt-llm-2024", "llama.cpp", "deepspeed-mii")
DEVICES = ("h100-sxm", "a100-40gb-sxm", "mi300x", "intel-max-1550", "tpu-v5e")


def test_the_file_has_a_fit_with_loo_figures_for_every_engine_with_data():
    doc = calibration_document()
    assert len(doc["data_hash"]) == 64
    for name in FITTED:
        e = doc["engines"][name]
        assert e["fitted"]
        assert sum(e["rows_per_device"].values()) > 40
        for ph in PHASES:
            assert e[ph]["scale"] > 0
            assert e[ph]["ratio_lo"] <= 1.0 <= e[ph]["ratio_hi"]
        # LOO needs two devices: deepspeed-mii has A100 rows only
        assert ("loo" in e) == (len(e["rows_per_device"]) > 1)
    assert doc["engines"]["vllm-2024"]["loo"]["median_abs_pct"] > 0


def test_the_calibration_was_fitted_on_the_bundled_serving_rows(shared_llm_data):
    from roofcast.training_data.public.llm_serving import load_serving

    table = load_serving(shared_llm_data)
    assert calibration_document()["data_hash"] == table.data_hash
    engines = calibration_document()["engines"]
    rows = table.rows[table.rows["figure"].isin(["all", "ttft"])]
    for name in FITTED:
        fitted = engines[name]["rows_per_device"]
        # every fitted row is a bundled row (a few are left out as implausible, none added)
        have = rows[rows["engine"] == name].groupby("device").size()
        assert all(0 < n <= have[dev] for dev, n in fitted.items())


def test_the_kernel_model_is_the_one_the_calibration_was_fitted_on():
    from roofcast.predictor.llm.calibration_fit import reference_times

    stored = calibration_document()["reference_times"]
    now = reference_times()
    assert [r["engine"] for r in stored] == [r["engine"] for r in now]
    for old, new in zip(stored, now, strict=True):
        for key in ("prefill_s", "decode_s"):
            assert new[key] == pytest.approx(old[key], rel=1e-3), (
                f"{old['engine']} on {old['device']}: the kernel model's {key} changed since "
                "the calibration was fitted; rerun benchmarks/fit_llm_engines.py")


@pytest.mark.parametrize("engine", FITTED)
@pytest.mark.parametrize("phase", PHASES)
def test_apply_is_monotone_and_brackets_its_value(engine, phase):
    cal = engine_calibration(engine)
    assert cal.fitted
    m = np.geomspace(1e-5, 10.0, 40)
    for dev in DEVICES[:-1]:  # tpu-v5e is an accelerator: outside the (GPU) fit
        t, lo, hi = cal.apply(phase, m, get_device(dev))
        assert np.all(np.diff(t) > 0)
        assert np.all(np.diff(lo) > 0)
        assert np.all(np.diff(hi) > 0)
        assert np.all(lo <= t)
        assert np.all(t <= hi)
        assert np.all(t >= m * cal.phases[phase].scale * min(
            cal.level(phase, get_device(d))[1] for d in DEVICES[:-1]))


def test_a_vendor_outside_the_fit_keeps_the_kernel_model_with_a_wider_interval():
    cal = engine_calibration("vllm-2024")
    gaudi = get_device("gaudi2")
    assert "calibrated on gpu devices only" in cal.notes(gaudi)[0]
    guess = dataclasses.replace(get_device("h100-sxm"), vendor="Moore Threads")
    notes = " ".join(cal.notes(guess))
    assert "no measurements on Moore Threads" in notes
    assert "no other vendor's factor borrowed" in notes
    for ph in ("prefill", "decode"):
        p = cal.phases[ph]
        f, seen = p.vendor_factor("Moore Threads")
        assert (f, seen) == (1.0, False)  # the kernel model's own transfer
        lo, hi = p.unseen_ratios()
        assert lo <= p.ratio_lo
        assert hi >= p.ratio_hi * max(p.vendor_factors.values()) * 0.999
        t, tlo, thi = cal.apply(ph, 0.01, guess)
        assert t == pytest.approx(p.scale * 0.01 + p.overhead_s + p.seq_overhead_s)
        assert thi / t == pytest.approx(hi)
        assert tlo <= t
    assert "measured runs" in cal.notes(get_device("h100-sxm"))[1]  # the device level
    with pytest.raises(PredictionError, match="phase must be one of"):
        cal.apply("train", 1.0, get_device("h100-sxm"))


def test_a_fitted_vendor_factor_is_named_with_the_devices_and_data_it_came_from():
    cal = engine_calibration("vllm-2024")
    fp, seen = cal.phases["prefill"].vendor_factor("AMD")
    fd, _ = cal.phases["decode"].vendor_factor("AMD")
    assert seen
    assert fp != 1.0
    notes = cal.notes(get_device("mi210"))  # an AMD GPU the data never measured
    vendor = [n for n in notes if "vendor factor (" in n]
    assert len(vendor) == 1
    assert f"prefill {fp:.2f}, decode {fd:.2f}" in vendor[0]
    amd = [d for d in cal.device_runs if get_device(d).vendor == "AMD"]
    assert amd
    assert f"AMD devices {', '.join(amd)} (device not measured)" in vendor[0]
    assert "LLM-Inference-Bench (2024)" in vendor[0]
    # a measured device gets its own factors, named with the data they came from
    assert any("fitted on this device's" in n and "LLM-Inference-Bench (2024)" in n
               for n in cal.notes(get_device("mi300x")))


def test_a_device_kind_outside_the_fit_is_left_uncalibrated():
    cal = engine_calibration("llama.cpp")
    assert cal.fitted
    assert cal.device_kinds == ("gpu",)
    cpu = get_device("xeon-8480plus")  # vendor Intel, as the fit's Intel GPU: not its factor
    t, lo, hi = cal.apply("decode", np.array([0.05]), cpu)
    assert list(t) == list(lo) == list(hi) == [0.05]
    assert "calibrated on gpu devices only" in cal.notes(cpu)[0]
    t_gpu, _, _ = cal.apply("decode", np.array([0.05]), get_device("intel-max-1550"))
    assert t_gpu[0] > 0.1  # the fitted Intel GPU factor does apply to an Intel GPU


def test_an_engine_without_data_is_uncalibrated_and_says_so():
    cal = engine_calibration("my-engine")
    assert not cal.fitted
    t, lo, hi = cal.apply("decode", np.array([0.01, 0.02]), get_device("h100-sxm"))
    assert list(t) == list(lo) == list(hi) == [0.01, 0.02]
    assert "uncalibrated" in cal.notes(get_device("h100-sxm"))[0]


@pytest.mark.parametrize("change", [{"scale": -1.0}, {"ratio_lo": 2.0, "ratio_hi": 1.0},
                                    {"vendor_factors": {"AMD": 0.0}}, {"scale": "fast"}])
def test_a_malformed_calibration_file_is_refused(tmp_path, monkeypatch, change):
    doc = json.loads(calibration.DATA_FILE.read_text())
    doc["engines"]["vllm-2024"]["decode"].update(change)
    bad = tmp_path / "llm_engines.json"
    bad.write_text(json.dumps(doc))
    monkeypatch.setattr(calibration, "DATA_FILE", bad)
    calibration.calibration_document.cache_clear()
    try:
        with pytest.raises(PredictionError, match=r"engines\.vllm-2024\.decode"):
            engine_calibration("vllm-2024")
    finally:
        calibration.calibration_document.cache_clear()


def _synthetic(truth: EngineFit, seed: int = 0) -> pd.DataFrame:
    """Rows on three NVIDIA and two AMD devices whose targets follow ``truth`` (+-2 % noise)."""
    rng = np.random.default_rng(seed)
    devs = [("d1", "NVIDIA"), ("d2", "NVIDIA"), ("d3", "NVIDIA"), ("m1", "AMD"), ("m2", "AMD")]
    rows = []
    for dev, vendor in devs:
        for _ in range(30):
            steps = int(rng.choice([127, 255, 1023]))
            batch = int(rng.choice([1, 16, 64, 256]))
            rows.append({"device": dev, "vendor": vendor, "figure": "all",
                         "prefill_s": rng.uniform(0.01, 2), "decode_s": rng.uniform(0.5, 30),
                         "prefill_steps": 1, "decode_steps": steps, "prefill_seqs": batch,
                         "decode_seqs": steps * batch, "ttft_s": np.nan})
    f = pd.DataFrame(rows)
    f["latency_s"] = truth.predict(f) * rng.uniform(0.98, 1.02, len(f))
    return f


def test_the_fit_recovers_known_parameters_and_loo_transfers():
    truth = EngineFit(1.3, 1.1, 0.0, 2e-3, {"NVIDIA": 1.0, "AMD": 1.5},
                      {"NVIDIA": 1.0, "AMD": 2.5})
    f = _synthetic(truth)
    fit = fit_engine(f, vendor_factors=True)
    assert fit.a_decode == pytest.approx(1.1, rel=0.05)
    assert fit.c_decode_s == pytest.approx(2e-3, rel=0.1)
    assert fit.decode_factors["AMD"] == pytest.approx(2.5, rel=0.05)
    pred = loo(f, vendor_factors=True)
    assert np.median(np.abs(pred / f["latency_s"] - 1)) < 0.03
    plain = loo(f, vendor_factors=False)
    assert np.median(np.abs(plain / f["latency_s"] - 1)) > 0.1  # one factor cannot fit AMD
    assert loo(f[f["device"] == "d1"]).isna().all()  # one device: no LOO
    assert fit_engine(f).seq_decode_s == 0.0  # not asked for: no per-sequence term


def test_the_fit_recovers_a_known_per_sequence_host_term():
    """Rows whose step time grows by 1e-4 s per sequence (batch 1 to 256): the per-sequence fit
    finds it and predicts held-out devices; without the term the batch trend stays."""
    truth = EngineFit(1.3, 1.1, 1e-3, 2e-3, {"NVIDIA": 1.0, "AMD": 1.5},
                      {"NVIDIA": 1.0, "AMD": 2.5}, seq_decode_s=1e-4)
    f = _synthetic(truth, seed=1)
    fit = fit_engine(f, vendor_factors=True, per_seq=True)
    assert fit.seq_decode_s == pytest.approx(1e-4, rel=0.1)
    assert fit.a_decode == pytest.approx(1.1, rel=0.05)
    with_term = loo(f, vendor_factors=True, per_seq=True)
    without = loo(f, vendor_factors=True)
    err = lambda p: np.median(np.abs(p / f["latency_s"] - 1))  # noqa: E731
    assert err(with_term) < 0.03
    assert err(without) > 2 * err(with_term)
    by_model = loo(f.assign(model=f["device"]), per_seq=True, by="model")
    assert by_model.notna().all()  # the one-device engine's held-out choice


@pytest.mark.parametrize(("engine", "device", "batch"), [
    ("vllm-2024", "h100-sxm", 16), ("tensorrt-llm-2024", "a100-40gb-sxm", 64),
    ("vllm-2024", "mi300x", 32)])
def test_the_fit_models_a_request_as_the_product_predicts_it(engine, device, batch):
    """The fit's request formula (features x calibration) is what predict_serving computes for
    the same static batch, waves included (64 Llama-2-7B requests of 2 x 1024 tokens do not fit
    in an A100 40 GB at once), so the fitted figures mean what the product does with them."""
    from roofcast.graph_import.llm.load import load_llm
    from roofcast.predictor.llm.calibration_fit import predict_calibrated, request_features
    from roofcast.predictor.llm.serving import predict_serving
    from roofcast.predictor.llm.types import ServingConfig

    row = {"figure": "all", "engine": engine, "device": device, "model": "llama-2-7b",
           "input_tokens": 1024, "output_tokens": 1024, "batch": batch, "weights": "fp16",
           "kv_cache": "fp16"}
    f = request_features(pd.DataFrame([row]))
    hw = get_device(device)
    t, lo, hi = predict_calibrated(engine_calibration(engine), f, {device: hw})
    p = predict_serving(load_llm("llama-2-7b"), hw, ServingConfig(
        input_tokens=1024, output_tokens=1024, batch=batch, runtime=engine))
    assert p.e2e_latency_s == pytest.approx(t[0], rel=1e-6)
    assert p.lower["e2e_latency_s"] == pytest.approx(lo[0], rel=1e-6)
    assert p.upper["e2e_latency_s"] == pytest.approx(hi[0], rel=1e-6)
    if engine == "tensorrt-llm-2024":
        assert f["waves"].iloc[0] > 1


def _one_engine_file(tmp_path, monkeypatch, decode: dict) -> None:
    """A calibration file with one engine 'toy' (identity prefill) and ``decode``."""
    base = {"scale": 1.0, "overhead_s": 0.0, "ratio_lo": 0.9, "ratio_hi": 1.2}
    doc = {"engines": {"toy": {"fitted": True, "rows_per_device": {"h100-sxm": 10},
                               "prefill": base, "decode": base | decode}}}
    path = tmp_path / "llm_engines.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(calibration, "DATA_FILE", path)
    calibration.calibration_document.cache_clear()


def test_the_per_sequence_term_adds_its_seconds_per_sequence(tmp_path, monkeypatch):
    _one_engine_file(tmp_path, monkeypatch, {"scale": 2.0, "overhead_s": 1e-3,
                                             "seq_overhead_s": 5e-5})
    try:
        cal = engine_calibration("toy")
        hw = get_device("h200")  # NVIDIA, unmeasured: vendor level, factor 1 (no factors)
        t, lo, hi = cal.apply("decode", np.array([0.01, 0.01]), hw, seqs=np.array([1, 64]))
        np.testing.assert_allclose(t, [0.02 + 1e-3 + 5e-5, 0.02 + 1e-3 + 64 * 5e-5])
        np.testing.assert_allclose(lo, 0.9 * t)
        np.testing.assert_allclose(hi, 1.2 * t)
        t1, _, _ = cal.apply("decode", 0.01, hw)  # default: one sequence
        assert float(t1) == pytest.approx(0.02 + 1e-3 + 5e-5)
    finally:
        calibration.calibration_document.cache_clear()


def test_a_file_without_the_per_sequence_term_loads_with_none(tmp_path, monkeypatch):
    _one_engine_file(tmp_path, monkeypatch, {"scale": 2.0, "overhead_s": 1e-3})
    try:
        cal = engine_calibration("toy")
        assert cal.phases["decode"].seq_overhead_s == 0.0
        t, _, _ = cal.apply("decode", 0.01, get_device("h200"), seqs=256)
        assert float(t) == pytest.approx(0.02 + 1e-3)
    finally:
        calibration.calibration_document.cache_clear()


def test_a_negative_per_sequence_term_is_refused(tmp_path, monkeypatch):
    _one_engine_file(tmp_path, monkeypatch, {"seq_overhead_s": -1e-5})
    try:
        with pytest.raises(PredictionError, match=r"engines\.toy\.decode"):
            engine_calibration("toy")
    finally:
        calibration.calibration_document.cache_clear()


def test_the_shipped_file_records_the_per_sequence_decision():
    for name in FITTED:
        e = calibration_document()["engines"][name]
        seq = e["per_sequence_term"]
        assert seq["kept"] == (seq["score_with"] < seq["score_without"] and seq["identifiable"])
        if not seq["kept"]:
            assert e["decode"]["seq_overhead_s"] == e["prefill"]["seq_overhead_s"] == 0.0


def test_the_note_names_the_per_sequence_host_time_where_kept():
    for name in FITTED:
        s = engine_calibration(name).phases["decode"].seq_overhead_s
        note = engine_calibration(name).note
        assert ("us per sequence per decode step" in note) == (s > 0), name
        if s > 0:
            assert f"host time {s * 1e6:.0f} us" in note
