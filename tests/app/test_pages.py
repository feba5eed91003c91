"""Every page of the Streamlit app driven with ``streamlit.testing.v1.AppTest``: widgets set,
outputs compared with what the library returns for the same inputs, user errors shown as
``st.error`` (never an exception)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import numpy as np
import onnx
import plotly.io as pio
import pytest
from onnx import TensorProto, helper, numpy_helper
from streamlit.testing.v1 import AppTest

from roofcast import app
from roofcast.app.charts import fmt_time
from roofcast.app.model_ref import load_graph
from roofcast.app.wording import cli_flags
from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.graph_import import import_model, summary
from roofcast.graph_import.errors import ModelImportError
from roofcast.hw_catalog import derive, get_device
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.simulate import predict_graph

APP = Path(app.__file__).resolve().parent / "streamlit_app.py"
DATA = Path(__file__).parent / "data"
TIMEOUT = 120


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """User device folder and measurement store in a temp dir; the learned model is the shipped
    one (the conftest drops any override): today's serving engines time their steps with it."""
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(tmp_path / "devices"))
    monkeypatch.setenv("ROOFCAST_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


#: the road the page tests pin (their figures are analytical; the default road is learned and
#: these tests point the learned model at a missing folder): pass ``estimator=`` to change it.
PINNED_ESTIMATOR = "time-roofline"


def start(page: str | None = None, **state) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    for key, value in {"estimator": PINNED_ESTIMATOR, **state}.items():
        at.session_state[key] = value
    at.run()
    if page:
        at.switch_page(f"views/{page}.py")
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def metric(at: AppTest, label: str) -> str:
    found = [m.value for m in at.metric if m.label == label]
    assert found, f"no metric {label!r} among {[m.label for m in at.metric]}"
    return found[0]


def shown_seconds(at: AppTest) -> float:
    """The predicted time the Predict page writes in full precision (hidden span)."""
    for md in at.markdown:
        m = re.search(r'data-seconds="([^"]+)"', md.value)
        if m:
            return float(m.group(1))
    raise AssertionError("no predicted time on the page")


def values(data) -> list:
    """A figure's data array as a list (plotly's JSON writes numpy arrays as typed base64)."""
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).tolist()
    return list(data)


def figure(at, title: str) -> dict:
    """The plotly chart of the page whose title is ``title``, as a dict."""
    for chart in at.get("plotly_chart"):
        fig = pio.from_json(chart.proto.spec).to_plotly_json()
        if fig["layout"]["title"]["text"] == title:
            return fig
    raise AssertionError(f"no chart {title!r}")


def tiny_onnx(dim: str = "N") -> bytes:
    """x[dim, 16] @ w[16, 8] -> Relu: one symbolic dim, weights inline."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, 8])
    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                               helper.make_node("Relu", ["h"], ["y"], name="relu")],
                              "tiny", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


# ----------------------------------------------------------------------------- Model
def test_model_page_shows_the_zoo_model_summary():
    at = start()
    tot = summary.totals(load_graph("resnet50", (), 1))
    assert metric(at, "GFLOPs (forward)") == f"{tot['gflop']:,.2f}"
    assert metric(at, "Parameters") == f"{tot['params'] / 1e6:,.2f} M"
    assert not at.error


def test_model_page_says_nodes_and_costed_kernels_in_one_sentence():
    """ResNet-50: 122 nodes, one of them a free Flatten; the 121 others are the costed kernels
    of the per-op table (no "122 (122)" beside "121 costed ops")."""
    at = start()
    graph = load_graph("resnet50", (), 1)
    tot, ops = summary.totals(graph), summary.op_table(graph)
    assert metric(at, "Nodes") == f"{tot['nodes']:,}"
    sentence = (f"{tot['nodes']} nodes: {len(ops)} costed kernels, "
                f"{tot['costed_nodes'] - len(ops)} free shape or view op(s) (no kernel), "
                f"{tot['nodes'] - tot['costed_nodes']} not costed.")
    assert sentence in [c.value for c in at.caption]
    assert f"Per-op costs ({len(ops)} costed kernels)" in [e.label for e in at.expander]
    assert figure(at, "Op mix by FLOPs")


def test_op_mix_counts_nodes_and_names_the_dims_while_they_are_unbound():
    """An upload whose dim N is unbound has no FLOPs to chart (no node is costed yet): the page
    counts every node by op type and says which dim to bind; bound, it charts the FLOPs."""
    at = start()
    at.file_uploader(key="onnx_upload").set_value(
        ("tiny.onnx", tiny_onnx(), "application/octet-stream")
    ).run()
    assert not at.exception
    assert any("needs a size for N" in i.value for i in at.info), [i.value for i in at.info]
    bars = figure(at, "Op mix by node count")["data"][0]
    assert dict(zip(bars["y"], values(bars["x"]), strict=True)) == {"MatMul": 1, "Relu": 1}
    assert "2 nodes: 0 costed kernels, 0 free shape or view op(s) (no kernel), 2 not costed." in [
        c.value for c in at.caption]
    at.number_input(key="_w_dim_N").set_value(32).run()
    assert not at.info
    assert figure(at, "Op mix by FLOPs")["data"][0]["y"]


def test_picking_a_zoo_model_binds_its_export_dims():
    at = start()
    at.selectbox(key="zoo_choice").set_value("gpt2").run()
    assert not at.exception
    assert at.number_input(key="_w_dim_sequence").value == 128
    tot = summary.totals(load_graph("gpt2", ["sequence=128"], 1))
    assert metric(at, "GFLOPs (forward)") == f"{tot['gflop']:,.2f}"
    at.number_input(key="_w_dim_sequence").set_value(64).run()
    tot64 = summary.totals(load_graph("gpt2", ["sequence=64"], 1))
    assert metric(at, "GFLOPs (forward)") == f"{tot64['gflop']:,.2f}"


def test_bad_upload_shows_the_import_message():
    at = start()
    at.file_uploader(key="onnx_upload").set_value(("broken.onnx", b"not an onnx model",
                                                    "application/octet-stream")).run()
    assert not at.exception
    with pytest.raises(ModelImportError) as exc:
        import_model(b"not an onnx model")
    assert any(str(exc.value) in e.value for e in at.error), [e.value for e in at.error]
    assert at.session_state["model_ref"] == "zoo:resnet50"  # a bad file changes nothing


def test_oversized_upload_is_refused_with_the_limit(monkeypatch):
    from roofcast.app import state

    monkeypatch.setattr(state, "MAX_UPLOAD_BYTES", 100)
    at = start()
    at.file_uploader(key="onnx_upload").set_value(
        ("big.onnx", tiny_onnx(), "application/octet-stream")
    ).run()
    assert any("over the upload limit" in e.value for e in at.error)


def test_upload_with_unbound_dims_then_bound_and_predicted():
    data = tiny_onnx()
    at = start()
    at.file_uploader(key="onnx_upload").set_value(
        ("tiny.onnx", data, "application/octet-stream")
    ).run()
    assert_clean(at)
    assert at.session_state["model_ref"].startswith("upload:")
    assert any("not bound" in w.value and "N" in w.value for w in at.warning)
    # predicting now is a user error that names the app's controls (the library's message,
    # shared with the CLI, names flags)
    with pytest.raises(PredictionError, match="--dim"):
        predict_graph(import_model(data, name="tiny"), "h100-sxm", RunConfig(dims={"batch": 1}),
                      PINNED_ESTIMATOR)
    for page in ("predict", "roofline", "compare", "whatif", "advisor"):
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, page
        shown = [e.value for e in at.error]
        assert len(shown) == 1, (page, shown)
        assert "symbolic dims N have no size" in shown[0], shown
        assert "Model page" in shown[0], shown
        assert cli_flags(shown[0]) == [], shown
    # bind N = 32 on the Model page, then predict
    at.switch_page("views/model.py").run()
    at.number_input(key="_w_dim_N").set_value(32).run()
    assert not any("not bound" in w.value for w in at.warning)
    at.switch_page("views/predict.py").run()
    assert not at.error
    want = predict_graph(import_model(data, dims={"N": 32}, name="tiny"), "h100-sxm",
                         RunConfig(dims={"N": 32, "batch": 1}), PINNED_ESTIMATOR)
    assert shown_seconds(at) == want.time_s


# ----------------------------------------------------------------------------- Predict
def test_predict_resnet50_batch8_on_h100_matches_the_library():
    at = start("predict")
    at.selectbox(key="_w_predict_device").set_value("h100-sxm")
    at.number_input(key="_w_predict_batch").set_value(8).run()
    assert_clean(at)
    want = predict_graph(load_graph("resnet50", (), 8), "h100-sxm", RunConfig(dims={"batch": 8}),
                         "time-roofline")
    assert shown_seconds(at) == want.time_s
    assert metric(at, "Predicted time") == fmt_time(want.time_s)
    assert metric(at, "Throughput (samples/s)") == f"{8 / want.time_s:,.1f}"
    assert len(at.get("plotly_chart")) >= 4
    assert len(at.dataframe) >= 2  # per-op table and memory table
    # "Slowest 20 kernels": the 20 slowest, slowest on top
    slow = pio.from_json(at.get("plotly_chart")[0].proto.spec)
    assert slow.layout.title.text == "Slowest 20 kernels"
    times_us = values(slow.data[0].x)
    assert times_us == sorted(want.per_op["time_s"] * 1e6, reverse=True)[:20]
    assert list(slow.layout.yaxis.categoryarray) == values(slow.data[0].y)
    assert slow.layout.yaxis.autorange == "reversed"
    lower, upper = want.per_op["lower_s"].sum(), want.per_op["upper_s"].sum()
    assert any(f"interval {fmt_time(lower)} – {fmt_time(upper)}" in c.value for c in at.caption)


def test_predict_training_step_with_options():
    at = start("predict")
    at.selectbox(key="_w_predict_mode").set_value("train")
    at.selectbox(key="_w_predict_precision").set_value("bf16")
    at.selectbox(key="_w_predict_fusion").set_value(True)
    at.selectbox(key="_w_predict_estimator").set_value("roofline").run()
    assert_clean(at)
    cfg = RunConfig(dims={"batch": 1}, precision="bf16", mode="train", fusion=True)
    want = predict_graph(load_graph("resnet50", (), 1), "h100-sxm", cfg, "roofline")
    assert shown_seconds(at) == want.time_s
    assert metric(at, "Predicted step time") == fmt_time(want.time_s)


def test_predict_cpu_threads_and_memory_that_does_not_fit():
    at = start("predict")
    at.selectbox(key="_w_predict_device").set_value("xeon-8480plus").run()
    at.number_input(key="_w_predict_threads").set_value(4).run()
    want = predict_graph(load_graph("resnet50", (), 1), "xeon-8480plus",  # the page's fusion
                         RunConfig(dims={"batch": 1}, threads=4, fusion=False),  # toggle: off
                         PINNED_ESTIMATOR)
    assert shown_seconds(at) == want.time_s
    at.selectbox(key="_w_predict_device").set_value("l4")
    at.selectbox(key="_w_predict_mode").set_value("train")
    at.number_input(key="_w_predict_batch").set_value(4096).run()
    assert not at.exception
    assert any("does not fit" in m.delta for m in at.metric if m.delta)
    assert any("lower the batch" in e.value for e in at.error)


# ----------------------------------------------------------------------------- Roofline
def test_roofline_page_draws_rooflines_and_trajectories():
    at = start("roofline")
    assert not at.error
    charts = at.get("plotly_chart")
    assert len(charts) == 3
    roof = pio.from_json(charts[0].proto.spec)
    names = [t.name or "" for t in roof.data]
    assert any(n.startswith("roof:") for n in names)
    assert any("bound ops" in n for n in names)
    timeroof = pio.from_json(charts[1].proto.spec)
    assert any("launch-overhead floor" in (t.name or "") for t in timeroof.data)
    traj = pio.from_json(charts[2].proto.spec)
    lines = [t for t in traj.data if t.mode == "lines+markers+text"]
    assert len(lines) == 8  # "Kernels traced" default
    # default batches 1, 4, 16, 64: four points, the ends labelled
    assert all(list(t.text) == ["1", "", "", "64"] for t in lines)


# ----------------------------------------------------------------------------- Compare
def test_compare_devices_speedup_matches_the_library():
    at = start("compare")
    at.multiselect(key="compare_devices").set_value(["a100-80gb-sxm", "h100-sxm"]).run()
    at.selectbox(key="compare_baseline").set_value("a100-80gb-sxm").run()
    assert_clean(at)
    g = load_graph("resnet50", (), 1)
    a100 = predict_graph(g, "a100-80gb-sxm", RunConfig(dims={"batch": 1}), PINNED_ESTIMATOR)
    h100 = predict_graph(g, "h100-sxm", RunConfig(dims={"batch": 1}), PINNED_ESTIMATOR)
    table = at.dataframe[0].value
    row = table.set_index("device").loc["h100-sxm"]
    assert row["speedup"] == pytest.approx(a100.time_s / h100.time_s, rel=1e-12)
    assert row["time_ms"] == pytest.approx(h100.time_s * 1e3, rel=1e-12)
    assert row["throughput_per_s"] == pytest.approx(1 / h100.time_s, rel=1e-12)
    # like with like: both devices at their lower bounds, both at their upper bounds
    lo = lambda p: p.per_op["lower_s"].sum()  # noqa: E731
    hi = lambda p: p.per_op["upper_s"].sum()  # noqa: E731
    assert row["speedup_at_lower"] == pytest.approx(lo(a100) / lo(h100), rel=1e-9)
    assert row["speedup_at_upper"] == pytest.approx(hi(a100) / hi(h100), rel=1e-9)
    charts = [pio.from_json(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 6
    for fig in charts:  # devices down the y axis (labels never rotate), listed order on top
        bars = [t for t in fig.data if t.type == "bar"]
        assert bars
        assert all(t.orientation == "h" for t in bars)
        assert list(fig.layout.yaxis.categoryarray) == ["a100-80gb-sxm", "h100-sxm"]
        assert fig.layout.yaxis.autorange == "reversed"
    speedup = charts[1]
    assert all(t.error_x.array is None for t in speedup.data)  # no mixed-bound interval
    markers = {t.name: values(t.x) for t in speedup.data if t.type == "scatter"}
    assert markers["both at their lower bound"] == pytest.approx(
        [1.0, row["speedup_at_lower"]], rel=1e-12)
    # every figure is written beside the plot, right of the bars' domain (nothing covers it)
    time_fig = charts[0]
    assert {a.x for a in time_fig.layout.annotations} == {time_fig.layout.xaxis.domain[1] + 0.02}
    assert any(f"{h100.time_s * 1e3:.4g} ms" in a.text for a in time_fig.layout.annotations)


# ----------------------------------------------------------------------------- What-if
def test_whatif_speedup_and_save_as_user_device(isolated):
    at = start("whatif")
    at.select_slider(key="whatif_mem_bw_scale").set_value(2.0).run()
    assert_clean(at)
    g = load_graph("resnet50", (), 1)
    base = predict_graph(g, "h100-sxm", RunConfig(dims={"batch": 1}), PINNED_ESTIMATOR)
    new = predict_graph(g, derive(get_device("h100-sxm"), mem_bw_scale=2.0),
                        RunConfig(dims={"batch": 1}), PINNED_ESTIMATOR)
    assert metric(at, "Speedup") == f"{base.time_s / new.time_s:.3f}×"
    at.text_input(key="whatif_id").set_value("h100-fastmem")
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.error, [e.value for e in at.error]
    assert (isolated / "devices" / "h100-fastmem.toml").is_file()
    assert get_device("h100-fastmem").mem_bw_Bps == pytest.approx(
        2 * get_device("h100-sxm").mem_bw_Bps
    )
    # the new device is in the device lists at once
    at.run()
    assert any(o.startswith("h100-fastmem ") for o in at.selectbox(key="_w_whatif_device").options)
    # a bad id is a message, not a crash
    at.text_input(key="whatif_id").set_value("Bad Id")
    at.button[0].click()
    at.run()
    assert any("lowercase" in e.value for e in at.error)


# ----------------------------------------------------------------------------- Measurements
def test_bad_measurement_csv_lists_the_bad_lines():
    at = start("measurements")
    bad = (b"op_type,device_id,dtype,latency_s\n"
           b"MatMul,h100-sxm,fp32,0.001\n"
           b"MatMul,h100-sxm,fp32,-5\n"
           b"Conv,no-such-gpu,fp32,0.002\n")
    at.file_uploader(key="meas_upload").set_value(("bad.csv", bad, "text/csv")).run()
    assert not at.exception
    text = " ".join(e.value for e in at.error)
    assert "line 3" in text
    assert "line 4" in text
    assert "line 2:" not in text


def test_measurements_vs_prediction_and_retrain():
    data = (DATA / "measurements_h100.csv").read_bytes()
    at = start("measurements")
    at.file_uploader(key="meas_upload").set_value(("m.csv", data, "text/csv")).run()
    assert_clean(at)
    from roofcast.predictor.estimator_registry import make_estimator
    from roofcast.predictor.learned.data import file_set

    ts = file_set(DATA / "measurements_h100.csv")
    pred = make_estimator(GRAPH_ESTIMATOR).predict(ts.X)
    want = float(np.median(100 * np.abs(pred - ts.y_s) / ts.y_s))
    assert metric(at, f"Median |error| of {GRAPH_ESTIMATOR}") == f"{want:.1f} %"
    assert len(at.get("plotly_chart")) == 2
    at.button(key="retrain").click().run()
    assert_clean(at)
    table = at.dataframe[-1].value
    assert set(table["key"]) == {"gpu/matmul"}  # 12 elementwise rows: too few for a model
    assert any("gpu/elementwise: 12 rows" in c.value for c in at.caption)
    assert (table["new model median APE %"] >= 0).all()
    assert any("Held-out error" in m.value for m in at.markdown)
    # the current model's error on these rows, as the library computes it
    from roofcast.predictor.learned.features import model_keys

    try:
        current = make_estimator("learned").predict(ts.X)
    except PredictionError:
        assert table["current model median APE %"].isna().all()
    else:
        rows = model_keys(ts.X) == "gpu/matmul"
        want = float(np.median(100 * np.abs(current[rows] - ts.y_s[rows]) / ts.y_s[rows]))
        got = table.set_index("key").loc["gpu/matmul", "current model median APE %"]
        assert got == pytest.approx(want, rel=1e-12)
    # adopt it: installed and made active, so the app's learned estimator uses it, as
    # predict_graph (and roofcast predict) do without any environment variable
    at.button(key="adopt").click().run()
    assert_clean(at)
    from roofcast.predictor.learned import installed

    assert installed.active_name() == "app"
    assert (installed.active_folder() / "metadata.json").is_file()
    at.switch_page("views/predict.py").run()
    at.selectbox(key="_w_predict_estimator").set_value("learned").run()
    assert_clean(at)
    want = predict_graph(load_graph("resnet50", (), 1), "h100-sxm", RunConfig(dims={"batch": 1}),
                         "learned")
    assert shown_seconds(at) == want.time_s
    assert any("Learned end to end" in i.value for i in at.info)


def test_measurements_page_lists_the_rows_roofcast_measure_wrote(isolated, capsys):
    """``roofcast measure`` without --store writes to the default store; the page reads that
    same store by default (ROOFCAST_DATA_DIR points both at the test's folder)."""
    from roofcast.app.cli import main
    from roofcast.training_data.store import Store
    from tests.training_data.collect_helpers import conv_matmul_model

    model = isolated / "tiny.onnx"
    model.write_bytes(conv_matmul_model().SerializeToString())
    assert main(["measure", str(model), "--batch", "1", "--repeats", "1", "--warmup", "0",
                 "--format", "csv"]) == 0
    written = Store().read()
    assert len(written) == 3
    assert Store().path.parent == isolated / "data"
    at = start("measurements")
    assert not at.exception
    assert at.radio(key="meas_source").value == "measurement store"
    assert any(str(Store().path) in c.value for c in at.caption)
    assert any(f"{len(written)} stored rows of local" in m.value for m in at.success)
    listed = next(d.value for d in at.dataframe if "row_key" in d.value.columns)
    assert list(listed["row_key"]) == list(written["row_key"])
    assert set(listed["model"]) == {"tiny"}
    # 'local' is not calibrated in this folder: the rows are listed, the page says why they are
    # not predicted
    assert any(w.value.startswith("local: its rows are listed but not predicted")
               for w in at.warning)


def test_learned_estimator_without_a_model_is_a_message(isolated, monkeypatch):
    monkeypatch.setenv("ROOFCAST_LEARNED_MODEL", str(isolated / "no-model"))
    at = start("predict")
    at.selectbox(key="_w_predict_estimator").set_value("auto").run()
    assert not at.exception
    with pytest.raises(PredictionError) as exc:
        predict_graph(load_graph("resnet50", (), 1), "h100-sxm", RunConfig(dims={"batch": 1}),
                      "auto")
    assert any(str(exc.value) in e.value for e in at.error)


# ----------------------------------------------------------------------------- shared state
def test_device_and_batch_carry_across_pages():
    at = start("predict")
    at.selectbox(key="_w_predict_device").set_value("a100-80gb-sxm")
    at.number_input(key="_w_predict_batch").set_value(4).run()
    for page in ("roofline", "whatif", "predict"):
        at.switch_page(f"views/{page}.py").run()
        assert_clean(at)
        assert at.session_state["device"] == "a100-80gb-sxm"
        assert at.session_state["batch"] == 4
        assert at.selectbox(key=f"_w_{page}_device").value == "a100-80gb-sxm"
    at.switch_page("views/model.py").run()
    assert at.number_input(key="_w_model_batch").value == 4


def test_sequence_beyond_the_position_table_is_a_message_on_every_page():
    at = start()
    at.selectbox(key="zoo_choice").set_value("gpt2").run()
    at.number_input(key="_w_dim_sequence").set_value(4096).run()
    assert not at.exception
    graph = load_graph("gpt2", ["sequence=4096"], 1)
    assert graph.unresolved  # the library flags the Gather beyond the 1024-row table
    assert any(f"{len(graph.unresolved)} unresolved node(s)" in w.value for w in at.warning)
    assert cli_flags(" ".join(at.dataframe[0].value["detail"])) == []  # the problems table
    with pytest.raises(PredictionError, match="--dim"):
        predict_graph(graph, "h100-sxm", RunConfig(dims={"sequence": 4096, "batch": 1}),
                      PINNED_ESTIMATOR)
    node = sorted(graph.unresolved)[0]
    for page in ("predict", "roofline", "compare", "whatif", "advisor"):
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, page
        shown = " ".join(e.value for e in at.error)
        assert node in shown, (page, shown)
        assert "dim sizes on the Model page" in shown, (page, shown)
        assert cli_flags(shown) == [], (page, shown)


def test_an_overwritten_user_device_is_predicted_afresh():
    from roofcast.hw_catalog.user_devices import save_user_device

    save_user_device("h100-sxm", {"mem_bw_scale": 2.0}, "mine")
    at = start("predict")
    at.selectbox(key="_w_predict_device").set_value("mine").run()
    g = load_graph("resnet50", (), 1)
    assert shown_seconds(at) == predict_graph(g, "mine", RunConfig(dims={"batch": 1}),
                                              PINNED_ESTIMATOR).time_s
    # a twentieth of the bandwidth: resnet50 at batch 1 under pytorch-eager sits on its 15 µs
    # per-kernel floor, which half the bandwidth does not lift
    save_user_device("h100-sxm", {"mem_bw_scale": 0.05}, "mine", overwrite=True)
    at.run()
    want = predict_graph(g, "mine", RunConfig(dims={"batch": 1}), PINNED_ESTIMATOR)
    assert want.time_s > predict_graph(g, "h100-sxm", RunConfig(dims={"batch": 1}),
                                       PINNED_ESTIMATOR).time_s
    assert shown_seconds(at) == want.time_s
