"""The runtime in the app: a "Runtime" selector (the device kind's runtimes, its default first
selected, the one-line description under it) carried into predict / compare / advisor and the
worker, and captions that state the runtime and the estimator modelled."""

from __future__ import annotations

import pytest

from roofcast.app import worker
from roofcast.app.model_ref import load_graph
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.runtimes import default_runtime_name, get_runtime, runtime_names
from roofcast.predictor.simulate import predict_graph
from tests.app.test_pages import assert_clean, shown_seconds, start


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """User device / runtime folders, measurement store and learned-model folder in a temp dir."""
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(tmp_path / "devices"))
    monkeypatch.setenv("ROOFCAST_RUNTIME_DIR", str(tmp_path / "runtimes"))
    monkeypatch.setenv("ROOFCAST_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ROOFCAST_LEARNED_MODEL", str(tmp_path / "no-model"))
    return tmp_path


def runs_on(kind: str) -> list[str]:
    return [n for n in runtime_names() if get_runtime(n).runs_on(kind)]


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


def test_runtime_selector_defaults_by_device_kind_with_its_description():
    at = start("predict")
    box = at.selectbox(key="_w_predict_runtime")
    assert box.value == default_runtime_name("gpu")  # the session's device, h100-sxm
    assert list(box.options) == [f"{n} (default on a gpu)" if n == default_runtime_name("gpu")
                                 else n for n in runs_on("gpu")]
    text = captions(at)
    assert get_runtime(box.value).description in text
    assert f"runtime **{box.value}**" in text
    assert "estimator **time-roofline**" in text
    at.selectbox(key="_w_predict_device").set_value("xeon-8480plus").run()
    assert_clean(at)
    box = at.selectbox(key="_w_predict_runtime")
    assert box.value == default_runtime_name("cpu")
    assert len(box.options) == len(runs_on("cpu"))
    assert at.session_state["runtime"] is None  # the default: each device's own on Compare
    assert f"runtime **{default_runtime_name('cpu')}**" in captions(at)


def test_a_chosen_runtime_reaches_the_prediction_and_the_captions():
    at = start("predict")
    at.selectbox(key="_w_predict_runtime").set_value("tensorrt")
    at.selectbox(key="_w_predict_estimator").set_value("roofline").run()
    assert_clean(at)
    assert at.session_state["runtime"] == "tensorrt"
    cfg = RunConfig(dims={"batch": 1}, runtime="tensorrt")
    want = predict_graph(load_graph("resnet50", (), 1), "h100-sxm", cfg, "roofline")
    assert shown_seconds(at) == want.time_s
    text = captions(at)
    assert "runtime **tensorrt**" in text
    assert "estimator **roofline**" in text
    assert get_runtime("tensorrt").description in text
    at.switch_page("views/roofline.py").run()  # the choice carries across pages
    assert_clean(at)
    assert at.selectbox(key="_w_roofline_runtime").value == "tensorrt"
    assert "runtime tensorrt" in captions(at)


def test_compare_names_each_devices_runtime():
    at = start("compare")
    at.multiselect(key="compare_devices").set_value(["h100-sxm", "xeon-8480plus"]).run()
    assert_clean(at)
    shown = at.dataframe[0].value
    assert dict(zip(shown["device"], shown["runtime"], strict=True)) == {
        "h100-sxm": default_runtime_name("gpu"), "xeon-8480plus": default_runtime_name("cpu")}
    text = captions(at)
    assert "each device's default runtime" in text
    assert "estimator **time-roofline**" in text
    at = start("compare", runtime="torch-compile")
    at.multiselect(key="compare_devices").set_value(["h100-sxm", "xeon-8480plus"]).run()
    assert_clean(at)
    assert set(at.dataframe[0].value["runtime"]) == {"torch-compile"}
    assert "runtime torch-compile" in captions(at)


def test_advisor_passes_the_runtime_and_states_it(monkeypatch):
    import roofcast.predictor.advisor as advisor

    seen = []
    real = advisor.advise
    monkeypatch.setattr(advisor, "advise", lambda *a, **k: (seen.append(k.get("runtime")),
                                                            real(*a, **k))[1])
    at = start("advisor", device="xeon-8480plus", estimator="roofline")
    at.selectbox(key="_w_advisor_runtime").set_value("torch-compile").run()
    assert_clean(at)
    assert seen[-1] == "torch-compile"
    assert "runtime **torch-compile**" in captions(at)
    assert "estimator **roofline**" in captions(at)


def test_a_broken_user_runtime_profile_is_a_warning_not_a_failure(isolated):
    folder = isolated / "runtimes"
    folder.mkdir()
    (folder / "mine.toml").write_text('name = "mine"\ndescription = "x"\n'
                                      'device_kinds = ["gpu"]\nturbo = 1\n')
    (folder / "good.toml").write_text('name = "good"\ndescription = "My GPU stack"\n'
                                      'device_kinds = ["gpu"]\n')
    at = start("predict")
    assert not at.exception
    assert any("mine.toml: unknown keys ['turbo']" in w.value for w in at.warning)
    assert "good" in at.selectbox(key="_w_predict_runtime").options
    assert shown_seconds(at) > 0


def test_the_worker_carries_the_runtime():
    """An upload is predicted and searched in the worker: the runtime crosses the process
    boundary into the child's RunConfigs (an unknown name there comes back as the same user
    error)."""
    from roofcast.hw_catalog import get_device
    from roofcast.training_data import zoo

    data = zoo.model_path("mobilenet_v2").read_bytes()
    settings = {"batch": 1, "max_batch": 1, "precisions": ["fp32"], "estimator": "roofline"}
    args = (data, {}, "mobilenet_v2", 2**28, "batch")
    advice = worker.run_limited(worker.advise_upload, *args, get_device("xeon-8480plus"),
                                "latency", {**settings, "runtime": "torch-compile"})
    assert advice.device == "xeon-8480plus"
    with pytest.raises(PredictionError, match="unknown runtime 'nope'"):
        worker.run_limited(worker.advise_upload, *args, get_device("xeon-8480plus"), "latency",
                           {**settings, "runtime": "nope"})
    graph = worker.run_limited(worker.import_upload, data, {"batch": 1}, "m", 2**28)
    pred = worker.run_limited(worker.predict_upload, graph, "h100-sxm", (),
                              RunConfig(dims={"batch": 1}, runtime="tensorrt"), "roofline")
    assert pred.config.runtime == "tensorrt"


def test_compare_refuses_a_chosen_runtime_on_a_device_it_does_not_run_on():
    at = start("compare", runtime="tensorrt")
    at.multiselect(key="compare_devices").set_value(["h100-sxm", "xeon-8480plus"]).run()
    assert not at.exception
    assert any("runtime 'tensorrt' runs on gpu devices, not cpu" in e.value for e in at.error)


@pytest.mark.parametrize("page", ["predict", "advisor", "roofline", "whatif", "compare"])
def test_a_user_profile_shadowing_a_built_in_is_an_error_on_every_page(isolated, page):
    folder = isolated / "runtimes"
    folder.mkdir()
    (folder / "tensorrt.toml").write_text('name = "tensorrt"\ndescription = "mine"\n'
                                          'device_kinds = ["gpu"]\n')
    at = start(page)
    assert not at.exception, [e.value for e in at.exception]
    assert any("runtime 'tensorrt' is already defined" in e.value for e in at.error)
