"""The LLM page's request-rate section driven with ``AppTest``: off by default, then TTFT and
TPOT percentiles against the rate per device (the simulation's figures) and the planner."""

from __future__ import annotations

import plotly.io as pio

from roofcast import api
from roofcast.app.views.llm_rate import RATE_STEPS
from tests.app.test_pages import assert_clean, isolated, start, values  # noqa: F401 (fixture)


def _page(**state):
    return start("llm", llm_devices=["h100-sxm", "l40s"], llm_output=32, **state)


def _rate_charts(at) -> list:
    charts = [pio.from_json(c.proto.spec) for c in at.get("plotly_chart")]
    return [c for c in charts if "against request rate" in (c.layout.title.text or "")]


def test_the_section_is_off_until_asked_and_then_charts_percentiles_per_device():
    at = _page()
    assert_clean(at)
    assert _rate_charts(at) == []
    at.toggle(key="llm_simulate").set_value(True).run()
    assert_clean(at)
    ttft, tpot = _rate_charts(at)
    for chart in (ttft, tpot):
        names = {t.name for t in chart.data}
        assert {"h100-sxm, p50", "h100-sxm, p99", "l40s, p50", "l40s, p99"} <= names
        assert all(values(t.x) == [2.0 * k for k in RATE_STEPS] for t in chart.data)
    p99 = next(t for t in tpot.data if t.name == "h100-sxm, p99")
    want = api.llm("llama-3.1-8b", "h100-sxm", rate=2.0, requests=300, output_tokens=32)
    assert values(p99.y)[RATE_STEPS.index(1.0)] == want["tpot_p99_ms"].iloc[0]


def test_the_planner_names_the_cheapest_device():
    at = _page(llm_simulate=True, llm_rate=4.0)
    at.button(key="llm_plan").click().run()
    assert_clean(at)
    assert at.success
    assert "Cheapest meeting the SLOs at 4 requests/s" in at.success[0].value
