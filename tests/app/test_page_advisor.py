"""The Advisor page driven with ``streamlit.testing.v1.AppTest``: its metrics match the library's
advice for the same inputs, and the trajectory chart renders."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from roofcast import app
from roofcast.app.model_ref import load_graph
from roofcast.predictor.advisor import advise

APP = Path(app.__file__).resolve().parent / "streamlit_app.py"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(tmp_path / "devices"))
    monkeypatch.setenv("ROOFCAST_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ROOFCAST_LEARNED_MODEL", str(tmp_path / "no-model"))


def test_advisor_page_matches_the_library():
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.session_state["device"] = "xeon-8480plus"
    at.session_state["model_ref"] = "zoo:mobilenet_v2"
    at.run()
    at.switch_page("pages/advisor.py")
    at.run()
    at.radio(key="adv_objective").set_value("throughput").run()
    at.selectbox(key="adv_max_b").set_value(8).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    expected = advise(lambda b: load_graph("mobilenet_v2", [], b), "xeon-8480plus",
                      "throughput", batch=1, max_batch=8, precisions=["fp32", "fp16", "bf16"],
                      estimator="auto")
    shown = {m.label: m.value for m in at.metric}
    assert shown["Recommended"] == expected.recommended.label()
    assert shown["ONNX Runtime default"] == expected.default.label()
    assert shown["Predicted throughput gain"] == f"{expected.predicted_gain:.3g}×"
    at.radio(key="adv_vary").set_value("batch").run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 1
