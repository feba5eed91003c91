"""The Plan explorer page driven with ``AppTest``: its table, metrics and charts are
``roofcast.plan``'s for the same inputs; nothing-fits shows the closest plan's excess; a bad
request (a device count no plan divides) is an ``st.error``, never an exception."""

from __future__ import annotations

import pytest

import roofcast
from roofcast.app.charts import fmt_time
from tests.app.test_pages import (  # noqa: F401 (isolated: a fixture)
    assert_clean,
    figure,
    isolated,
    start,
    values,
)

PAGE = "plan"
SMALL = {"plan_llm": "llama-3.1-8b", "plan_system": "hgx-h100", "plan_global_batch": 64}


def test_page_ranks_the_plans_as_the_api_does():
    at = start(PAGE, **SMALL)
    assert_clean(at)
    search = roofcast.plan("llama-3.1-8b", "hgx-h100", global_batch=64)
    table = at.dataframe[0].value
    want = search.table.head(10)
    assert table["plan"].tolist() == want["plan"].tolist()
    assert table["step_s"].tolist() == pytest.approx(want["step_s"].tolist(), rel=1e-12)
    assert table["memory_GiB"].tolist() == pytest.approx(
        (want["memory_bytes"] / 2**30).tolist(), rel=1e-12)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Best plan"] == search.best.plan.label()
    assert metrics["Step time"] == fmt_time(search.best.step_s)
    bars = figure(at, "Step time per plan")
    compute = next(t for t in bars["data"] if t["name"] == "compute")
    assert values(compute["x"]) == pytest.approx(want["compute_s"].tolist(), rel=1e-12)
    memory = figure(at, "Memory per device")
    assert {t["name"] for t in memory["data"]} >= {"weights", "optimizer states",
                                                   "device capacity"}


def test_nothing_fits_warns_with_the_closest_plans_excess():
    at = start(PAGE, plan_llm="llama-3.1-405b", plan_system="hgx-h100", plan_global_batch=64)
    assert_clean(at)
    search = roofcast.plan("llama-3.1-405b", "hgx-h100", global_batch=64)
    over = search.closest.memory.over_bytes / 2**30
    warning = at.warning[0].value
    assert warning.startswith(f"no plan fits: the closest, {search.closest.plan.label()},")
    assert f"{over:.4g} GiB over" in warning
    assert not at.metric


def test_device_times_count_and_bad_counts():
    at = start(PAGE, **SMALL, plan_placement="Device × count", plan_device="h100-sxm",
               plan_count=8)
    assert_clean(at)
    search = roofcast.plan("llama-3.1-8b", hw="h100-sxm", devices=8, global_batch=64)
    assert at.dataframe[0].value["plan"].tolist() == search.table["plan"].head(10).tolist()
    at = start(PAGE, **SMALL, plan_placement="Device × count", plan_device="h100-sxm",
               plan_count=12)
    assert not at.exception
    assert at.error
    assert "nodes of 8" in at.error[0].value


def test_serving_mode_ranks_the_serving_plans_as_the_api_does():
    at = start(PAGE, plan_llm="llama-3.1-70b", plan_system="hgx-h100", plan_mode="serve",
               plan_seq=512)
    assert_clean(at)
    want = roofcast.plan("llama-3.1-70b", "hgx-h100", mode="serve", seq_tokens=512)
    table = at.dataframe[0].value
    assert table["plan"].tolist() == want["plan"].head(10).tolist()
    assert table["tokens_per_s"].tolist() == pytest.approx(
        want["tokens_per_s"].head(10).tolist(), rel=1e-12, nan_ok=True)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Best plan"] == want["plan"].iloc[0]
    bars = figure(at, "Serving plans")
    assert values(bars["data"][0]["x"]) == pytest.approx(
        want["tokens_per_s"].head(10).tolist(), rel=1e-12, nan_ok=True)


def test_serving_mode_asks_for_an_llm_config():
    at = start(PAGE, plan_model_source="Zoo ONNX model", plan_mode="serve")
    assert_clean(at)
    assert "LLM configs" in at.info[0].value


def test_rates_read_as_whole_numbers_from_a_thousand():
    from roofcast.app.views.plan import rate_text

    assert rate_text(41826.4) == "41,826"
    assert rate_text(999.94) == "999.9"
    assert rate_text(7.447) == "7.447"
