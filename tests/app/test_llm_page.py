"""The LLM serving page driven with ``AppTest``: its numbers are ``roofcast.llm``'s for the same
inputs, its charts hold the serving table's points, and bad uploads show ``st.error`` (never an
exception)."""

from __future__ import annotations

import json

import plotly.io as pio
import pytest

import roofcast
from roofcast.app.charts import fmt_time
from roofcast.graph_import.llm.load import load_llm
from roofcast.hw_catalog.catalog import get_device
from roofcast.predictor.llm.serving import serving_table
from roofcast.predictor.llm.types import ServingConfig
from tests.app.test_pages import assert_clean, isolated, start, values  # noqa: F401 (fixture)
from tests.graph_import.llm.decoder_fixtures import tiny_decoder

PAGE = "llm"


def llm_page(**state):
    return start(PAGE, **state)


def metric_values(at, label: str) -> list[str]:
    return [m.value for m in at.metric if m.label == label]


def test_default_page_shows_each_device_as_the_api_predicts():
    at = llm_page()
    assert_clean(at)
    devices = at.multiselect(key="llm_devices").value
    assert devices == ["h100-sxm", "h200", "mi300x"]
    table = at.dataframe[0].value
    assert table["device"].tolist() == devices
    want = roofcast.llm("llama-3.1-8b", devices, input_tokens=512, output_tokens=128, batch=1)
    for key in ("ttft_ms", "tpot_ms", "output_tokens_per_s", "max_batch", "memory_GiB"):
        assert table[key].tolist() == pytest.approx(want[key].tolist(), rel=1e-12), key
    ttft = metric_values(at, "TTFT")
    assert ttft == [fmt_time(v / 1e3) for v in want["ttft_ms"]]
    sidebar = " ".join(m.value for m in at.sidebar.markdown)
    assert "`llama-3.1-8b`" in sidebar  # the page's model, not the ONNX workload's
    assert "resnet50" not in sidebar


def test_charts_hold_the_serving_table_and_the_memory_parts():
    at = llm_page()
    at.number_input(key="llm_input").set_value(2048).run()
    at.selectbox(key="llm_weights").set_value("fp8").run()
    assert_clean(at)
    charts = [pio.from_json(c.proto.spec) for c in at.get("plotly_chart")]
    assert [c.layout.title.text for c in charts] == [
        "Output tokens/s vs batch", "Latency-throughput frontier (labels: batch)",
        "Memory per device"]
    arch = load_llm("llama-3.1-8b")
    cfg = ServingConfig(input_tokens=2048, output_tokens=128, weights="fp8")
    devices = at.multiselect(key="llm_devices").value
    table = serving_table(arch, [get_device(d) for d in devices], cfg,
                          [1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    shown = table[table["fits"]]
    h100 = shown[shown["device"] == "h100-sxm"]
    line = next(t for t in charts[0].data if t.name == "h100-sxm")
    assert values(line.x) == h100["batch"].tolist()
    assert values(line.y) == pytest.approx(h100["output_tokens_per_s"].tolist(), rel=1e-12)
    frontier = next(t for t in charts[1].data if t.name == "h100-sxm")
    assert values(frontier.y) == pytest.approx(h100["tpot_ms"].tolist(), rel=1e-12)
    at.radio(key="llm_frontier_latency").set_value("e2e_latency_ms").run()
    frontier = next(t for t in pio.from_json(at.get("plotly_chart")[1].proto.spec).data
                    if t.name == "h100-sxm")
    assert values(frontier.y) == pytest.approx(h100["e2e_latency_ms"].tolist(), rel=1e-12)
    memory = {t.name: values(t.x) for t in charts[2].data}
    rows = at.dataframe[0].value
    assert memory["weights"] == pytest.approx(rows["weights_GiB"].tolist(), rel=1e-12)
    assert memory["device capacity"] == pytest.approx(rows["capacity_GiB"].tolist(), rel=1e-12)


def test_concurrency_max_and_engine_choice_reach_the_prediction():
    at = llm_page()
    at.multiselect(key="llm_devices").set_value(["h100-sxm"]).run()
    at.radio(key="llm_batching").set_value("As many as fit").run()
    at.selectbox(key="llm_engine").set_value("tensorrt-llm").run()
    assert_clean(at)
    row = at.dataframe[0].value.iloc[0]
    want = roofcast.llm("llama-3.1-8b", "h100-sxm", concurrency="max", runtime="tensorrt-llm")
    assert row["runtime"] == "tensorrt-llm"
    assert row["batch"] == want.batch == want.max_batch
    assert row["output_tokens_per_s"] == pytest.approx(want.output_tokens_per_s, rel=1e-12)
    charts = [pio.from_json(c.proto.spec) for c in at.get("plotly_chart")]
    assert charts[0].layout.title.text == "Output tokens/s vs concurrency"
    cfg = ServingConfig(concurrency=1, runtime="tensorrt-llm")
    table = serving_table(load_llm("llama-3.1-8b"), [get_device("h100-sxm")], cfg, [1, 8, 64])
    line = charts[0].data[0]
    got = dict(zip(values(line.x), values(line.y), strict=True))
    for b, tps in zip(table["batch"], table["output_tokens_per_s"], strict=True):
        assert got[b] == pytest.approx(tps, rel=1e-12)  # continuous batching at concurrency b


def test_cards_show_seconds_above_a_second_and_a_dash_where_nothing_was_predicted():
    """llama-3.1-70b at as many requests as fit: an end-to-end latency of seconds reads in s
    (not 1.5e+04 ms); on an H100 it does not fit, and its cards show an explained dash, not nan."""
    at = llm_page()
    at.selectbox(key="llm_model").set_value("llama-3.1-70b").run()
    at.multiselect(key="llm_devices").set_value(["h100-sxm", "mi300x"]).run()
    at.radio(key="llm_batching").set_value("As many as fit").run()
    assert not at.exception, [e.value for e in at.exception]
    want = roofcast.llm("llama-3.1-70b", ["mi300x"], concurrency="max")["e2e_latency_ms"][0]
    assert want > 1e3
    shown = [m.value for m in at.metric]
    assert shown[:4] == ["—"] * 4  # h100-sxm: does not fit
    assert metric_values(at, "End-to-end")[1] == fmt_time(want / 1e3)
    assert metric_values(at, "End-to-end")[1].endswith(" s")
    assert not [v for v in shown if "nan" in v or "e+" in v]
    assert any("not predicted, the model does not fit on h100-sxm" in c.value for c in at.caption)
    assert any("h100-sxm** · engine vllm · does not fit" in m.value for m in at.markdown)


def test_sidebar_never_shows_an_empty_code_span():
    at = llm_page()
    at.radio(key="llm_source").set_value("Upload config.json").run()
    sidebar = " ".join(m.value for m in at.sidebar.markdown)
    assert "``" not in sidebar
    assert "**LLM** *none chosen*" in sidebar


def test_an_engine_that_does_not_run_on_a_device_is_an_error_for_that_device_only():
    at = llm_page()
    at.selectbox(key="llm_engine").set_value("tensorrt-llm").run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1
    assert errors[0].startswith("mi300x: ")
    assert at.dataframe[0].value["device"].tolist() == ["h100-sxm", "h200"]


def test_uploaded_config_json_is_read_and_a_bad_one_names_the_problem():
    at = llm_page()
    at.radio(key="llm_source").set_value("Upload config.json").run()
    assert not at.exception
    good = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
            "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
            "vocab_size": 128256, "max_position_embeddings": 8192}
    at.file_uploader(key="llm_config_upload").set_value(
        ("config.json", json.dumps(good).encode(), "application/json")).run()
    assert_clean(at)
    assert at.dataframe[0].value["ttft_ms"].gt(0).all()
    bad = dict(good)
    del bad["num_hidden_layers"]
    at.file_uploader(key="llm_config_upload").set_value(
        ("config.json", json.dumps(bad).encode(), "application/json")).run()
    assert not at.exception
    assert any("num_hidden_layers" in e.value for e in at.error)


def test_onnx_decoder_upload_is_read_in_the_worker_and_predicted():
    at = llm_page()
    at.radio(key="llm_source").set_value("Upload ONNX decoder").run()
    data = tiny_decoder()
    at.file_uploader(key="llm_onnx_upload").set_value(
        ("tiny.onnx", data, "application/octet-stream")).run()
    assert_clean(at)
    table = at.dataframe[0].value
    want = roofcast.llm(data, table["device"].tolist())
    assert table["tpot_ms"].tolist() == pytest.approx(want["tpot_ms"].tolist(), rel=1e-12)


def test_onnx_upload_over_the_limit_or_broken_is_an_error_not_a_crash(monkeypatch):
    from roofcast.app import state

    at = llm_page()
    at.radio(key="llm_source").set_value("Upload ONNX decoder").run()
    at.file_uploader(key="llm_onnx_upload").set_value(
        ("broken.onnx", b"not an onnx model", "application/octet-stream")).run()
    assert not at.exception
    assert at.error
    monkeypatch.setattr(state, "MAX_UPLOAD_BYTES", 8)
    at.file_uploader(key="llm_onnx_upload").set_value(
        ("big.onnx", b"0123456789abcdef", "application/octet-stream")).run()
    assert not at.exception
    assert any("over the upload limit" in e.value for e in at.error)
