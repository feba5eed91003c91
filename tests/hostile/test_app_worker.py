"""The app's worker process (``app.worker``): uploads are imported and predicted in a child
with a memory and a time limit; reaching one is a clear error, the server lives on."""

from __future__ import annotations

import time

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from roofcast.app import worker
from roofcast.graph_import.errors import ModelImportError
from roofcast.predictor.errors import PredictionError
from tests.app.test_pages import isolated, start, tiny_onnx  # noqa: F401 (autouse fixture)


def allocate_mb(mb: int) -> int:
    return len(bytearray(mb * 2**20))


def sleep_s(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def refuse(message: str) -> None:
    raise PredictionError(message)


def test_a_call_within_the_limits_returns_its_result(monkeypatch):
    monkeypatch.setenv(worker.MEMORY_ENV, "2048")
    assert worker.run_limited(allocate_mb, 50) == 50 * 2**20


def test_memory_over_the_limit_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(worker.MEMORY_ENV, "512")
    with pytest.raises(ModelImportError, match="more than 512 MB") as exc:
        worker.run_limited(allocate_mb, 4096)
    assert worker.MEMORY_ENV in str(exc.value)


def test_time_over_the_limit_kills_the_child(monkeypatch):
    monkeypatch.setenv(worker.TIMEOUT_ENV, "3")
    t0 = time.perf_counter()
    with pytest.raises(ModelImportError, match="within 3 s"):
        worker.run_limited(sleep_s, 60)
    assert time.perf_counter() - t0 < 20


def test_a_user_error_in_the_child_is_raised_as_itself():
    with pytest.raises(PredictionError, match=r"^no such thing$"):
        worker.run_limited(refuse, "no such thing")


@pytest.mark.parametrize("value", ["0", "-1", "lots", "inf", "nan"])
def test_a_bad_limit_setting_is_named(monkeypatch, value):
    monkeypatch.setenv(worker.TIMEOUT_ENV, value)
    with pytest.raises(ModelImportError, match=worker.TIMEOUT_ENV):
        worker.limits()


def heavy_onnx(mb: int) -> bytes:
    """``tiny_onnx`` plus an unused ``mb`` MB initializer (within the upload limit)."""
    model = onnx.load_from_string(tiny_onnx())
    model.graph.initializer.append(
        numpy_helper.from_array(np.zeros(mb * 2**18, np.float32), "ballast"))
    return model.SerializeToString()


def test_upload_over_a_small_memory_limit_shows_an_error_and_the_app_lives_on(monkeypatch):
    """Under a 400 MB limit a tiny upload imports (its child peaks near 350 MB of address
    space); one carrying 150 MB of weights cannot (protobuf's parse runs out of memory, which it
    reports as a malformed file: the worker tells the two apart): the page shows the limit, the
    session keeps the model it had, and the app goes on predicting."""
    monkeypatch.setenv(worker.MEMORY_ENV, "400")
    at = start()
    at.file_uploader(key="onnx_upload").set_value(("tiny.onnx", tiny_onnx("batch"),
                                                    "application/octet-stream")).run()
    assert not at.error, [e.value for e in at.error]
    tiny = at.session_state["model_ref"]
    assert tiny.startswith("upload:")
    at.file_uploader(key="onnx_upload").set_value(("heavy.onnx", heavy_onnx(150),
                                                    "application/octet-stream")).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [e.value for e in at.error]
    assert any("400 MB" in e and "server is unaffected" in e for e in shown), shown
    assert at.session_state["model_ref"] == tiny
    at.switch_page("views/predict.py").run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]


def test_upload_over_a_small_time_limit_shows_an_error(monkeypatch):
    monkeypatch.setenv(worker.TIMEOUT_ENV, "0.01")
    at = start()
    # a dim name no other test uses: the same bytes imported before would come from the cache
    at.file_uploader(key="onnx_upload").set_value(("tiny.onnx", tiny_onnx("timeout_test"),
                                                    "application/octet-stream")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("did not finish within 0.01 s" in e.value for e in at.error), at.error


def test_advisor_on_an_upload_searches_in_the_worker(monkeypatch):
    """The Advisor's search of an uploaded model runs in the worker: its figures equal the
    library's, and under a time limit too small for it the page shows the limit instead."""
    from roofcast.graph_import import import_model
    from roofcast.predictor.advisor import advise

    model = onnx.load_from_string(tiny_onnx("batch"))  # bytes no other test uploads (the page
    model.graph.initializer.append(  # caches by upload): an unused initializer of its own
        numpy_helper.from_array(np.zeros(3, np.float32), "advisor_test"))
    data = model.SerializeToString()
    at = start()
    at.session_state["device"] = "xeon-8480plus"
    at.file_uploader(key="onnx_upload").set_value(("tiny.onnx", data,
                                                    "application/octet-stream")).run()
    assert not at.error, [e.value for e in at.error]
    at.switch_page("views/advisor.py").run()
    at.radio(key="adv_objective").set_value("throughput").run()
    at.selectbox(key="adv_max_b").set_value(8).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    expected = advise(lambda b: import_model(data, dims={"batch": b}, name="tiny"),
                      "xeon-8480plus", "throughput", batch=1, max_batch=8,
                      precisions=["fp32", "fp16", "bf16"],
                      estimator=at.session_state["estimator"])  # the page's road
    shown = {m.label: m.value for m in at.metric}
    assert shown["Predicted throughput gain"] == f"{expected.predicted_gain:.3g}×"
    # a new search whose graphs are all imported already (latency: batch 1 only), under a time
    # limit no search can meet: only a search run in the worker can hit it
    monkeypatch.setenv(worker.TIMEOUT_ENV, "0.01")
    at.radio(key="adv_objective").set_value("latency").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("did not finish within 0.01 s" in e.value for e in at.error), at.error
