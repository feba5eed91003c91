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


def advisor_page(**state) -> AppTest:
    """The Advisor page opened with ``state`` in the session."""
    at = AppTest.from_file(str(APP), default_timeout=180)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page("views/advisor.py")
    at.run()
    return at


def test_advisor_page_matches_the_library():
    at = advisor_page(device="xeon-8480plus", model_ref="zoo:mobilenet_v2")
    at.radio(key="adv_objective").set_value("throughput").run()
    at.selectbox(key="adv_max_b").set_value(8).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    expected = advise(lambda b: load_graph("mobilenet_v2", [], b), "xeon-8480plus",
                      "throughput", batch=1, max_batch=8, precisions=["fp32", "fp16", "bf16"],
                      estimator="auto")
    shown = {m.label: m.value for m in at.metric}
    assert shown["Predicted throughput gain"] == f"{expected.predicted_gain:.3g}×"
    rec = expected.row(expected.recommended)["throughput_samples_per_s"]
    assert shown["Recommended: samples/s"] == f"{rec:,.1f}"
    # both settings in full, field by field (a metric would cut them)
    settings = at.table[0].value
    assert settings.loc["intra-op threads", "recommended"] == str(expected.recommended.threads)
    assert settings.loc["intra-op threads", "onnxruntime-cpu default"] == "56"
    assert settings.loc["batch", "recommended"] == str(expected.recommended.batch)
    at.radio(key="adv_vary").set_value("batch").run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 1


def test_advisor_on_a_gpu_says_nothing_of_threads():
    """On a GPU the framework picks its threads: no intra-op thread setting, count or column."""
    at = advisor_page(device="h100-sxm")
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    expected = advise(lambda b: load_graph("resnet50", [], b), "h100-sxm", "latency", batch=1,
                      precisions=["fp32", "fp16", "bf16"], estimator="auto")
    assert "intra" not in expected.recommended.label()
    assert "×" not in expected.recommended.label()  # no inter-op thread count either
    settings = at.table[0].value
    assert list(settings.index) == ["inter-op", "batch", "precision", "graph fusions",
                                    "mode"]
    assert settings.loc["inter-op", "recommended"] == (
        "parallel (concurrent streams)" if expected.recommended.inter_op else "sequential")
    table = at.dataframe[0].value
    assert not [c for c in table.columns if "thread" in c]
    assert list(table["setting"]) == list(expected.table["setting"].head(len(table)))
    words = " ".join([*(m.value for m in at.markdown), *(i.value for i in at.info),
                      *(str(m.value) + m.label for m in at.metric),
                      *settings.to_numpy().ravel().tolist(), *settings.index,
                      *table["setting"]]).lower()
    assert "thread" not in words
    assert "intra" not in words
    assert "cpu" not in words


def test_advisor_names_the_runtime_that_runs_on_the_device():
    """An H100 runs pytorch-eager by default: the page compares with its defaults, never with
    ONNX Runtime's (a CPU runtime)."""
    at = advisor_page(device="h100-sxm")
    assert not at.exception, [e.value for e in at.exception]
    labels = [m.label for m in at.metric]
    assert "pytorch-eager default: step time" in labels
    assert next(iter(at.table[0].value.columns)) == "pytorch-eager default"
    page = " ".join([*(c.value for c in at.caption), *labels])
    assert "ONNX Runtime" not in page
