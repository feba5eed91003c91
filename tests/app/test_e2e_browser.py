"""End to end in a real headless browser: ``roofcast app`` serves the app and Chromium (driven by
Selenium) uses it as a person would.

* A zoo model file uploaded through the Model page's file input, the predicted time read off the
  Predict page: the library's figure for the same inputs.
* The app's fixes of issue 13, checked on what the browser draws (``docs/take_screenshots.py``
  shoots the same pages): the Slowest kernels chart runs slowest first (equal times by their own
  work, not graph order); on Compare no figure is covered by a bar, whisker or marker; the
  Advisor's metric values fit their boxes and say nothing of threads on a GPU; the Measurements
  page lists the rows ``roofcast measure`` just wrote to the default store; an upload with an
  unbound dim is explained with the app's controls, not CLI flags.
* The newcomer frictions of issue 25, checked as drawn, each page also saved as a PNG (in
  ``ROOFCAST_E2E_SHOTS`` when set, to look at): the op mix while a dim is unbound, nodes vs
  costed kernels, LLM cards in human units, chart titles clear of the toolbar and legends clear
  of the axis title, no stray backticks in the sidebar, the Advisor's runtime named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roofcast.app.charts import fmt_time, kernel_labels, slowest_first
from roofcast.app.cli import main
from roofcast.app.wording import cli_flags
from roofcast.graph_import import import_model, summary
from roofcast.predictor.config import RunConfig
from roofcast.predictor.simulate import predict_graph
from roofcast.training_data import zoo
from roofcast.training_data.store import Store
from tests.app.browser import (
    chromium,
    chromium_paths,
    go_to_page,
    idle,
    main_text,
    overlaps,
    plotly_charts,
    rects,
    running_app,
    wait_for,
    y_tick_labels,
)
from tests.app.test_pages import tiny_onnx
from tests.training_data.collect_helpers import conv_matmul_model

pytestmark = pytest.mark.skipif(
    chromium_paths() is None,
    reason="Chromium / chromedriver not installed (apt-get install chromium chromium-driver; "
           ".ci/run installs them)")


def test_upload_zoo_model_and_read_predicted_time(tmp_path):
    from selenium.webdriver.common.by import By

    path = zoo.model_path("mobilenet_v2")
    env = {"ROOFCAST_HW_DIR": str(tmp_path / "devices"),
           "ROOFCAST_DATA_DIR": str(tmp_path / "data")}
    with running_app(env) as url, chromium() as driver:
        driver.get(url)
        file_input = wait_for(driver, lambda d: d.find_element(
            By.CSS_SELECTOR, '[data-testid="stFileUploader"] input[type="file"]'))
        idle(driver)
        file_input.send_keys(str(path))
        wait_for(
            driver,
            lambda d: any(
                "Current model: mobilenet_v2" in h.text
                for h in d.find_elements(By.CSS_SELECTOR, "h3")
            ),
        )
        idle(driver)
        assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
        go_to_page(driver, "Predict")
        shown = wait_for(driver, lambda d: d.find_element(By.ID, "roofcast-time-s"))
        seconds = float(shown.get_attribute("data-seconds"))
        metric = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')[0].text
    graph = import_model(path, dims={"batch": 1}, name="mobilenet_v2")
    want = predict_graph(graph, "h100-sxm", RunConfig(dims={"batch": 1}), "time-roofline")
    assert seconds == want.time_s
    assert metric.strip() == fmt_time(want.time_s)


def test_issue13_app_fixes_as_drawn(tmp_path, monkeypatch):
    from selenium.webdriver.common.by import By

    env = {"ROOFCAST_HW_DIR": str(tmp_path / "devices"),
           "ROOFCAST_DATA_DIR": str(tmp_path / "data")}  # learned model: the shipped one
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    measured = tmp_path / "measured.onnx"
    measured.write_bytes(conv_matmul_model().SerializeToString())
    assert main(["measure", str(measured), "--batch", "1", "--repeats", "1", "--warmup", "0",
                 "--format", "csv"]) == 0  # no --store: the default store
    stored = Store().read()
    unbound = tmp_path / "unbound.onnx"
    unbound.write_bytes(tiny_onnx("N"))
    per_op = predict_graph(import_model(zoo.model_path("resnet50"), dims={"batch": 1}),
                           "h100-sxm", RunConfig(dims={"batch": 1})).per_op
    with running_app(env) as url, chromium() as driver:
        driver.get(url)
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]'))
        idle(driver)

        # Predict: slowest first; at batch 1 every kernel ties on the launch floor
        go_to_page(driver, "Predict")
        chart = wait_for(driver, lambda d: plotly_charts(d)[0] if plotly_charts(d) else False)
        want = list(kernel_labels(slowest_first(per_op)).head(20))
        assert y_tick_labels(driver, chart) == want
        assert want != list(kernel_labels(per_op).head(20))  # not graph order

        # Compare: devices as rows; every figure clear of bars, whiskers and markers
        go_to_page(driver, "Compare hardware")
        # the page draws its figures one by one after its heading (idle is not the end of it
        # under load): wait for all six before reading them
        charts = wait_for(driver, lambda d: (lambda c: c if len(c) == 6 else False)(
            plotly_charts(d)), 180)
        for chart in charts[:2]:
            labels = rects(driver, chart, ".annotation-text")
            marks = rects(driver, chart, ".bars path, .errorbar path, .scatterlayer .point")
            assert len(labels) == 5
            assert marks
            covered = [(a["text"], b) for a in labels for b in marks if overlaps(a, b)]
            assert covered == []
            ticks = rects(driver, chart, ".yaxislayer-above .ytick text")
            assert all(t["bottom"] - t["top"] < 2 * (t["right"] - t["left"]) for t in ticks)
        assert "both at their lower bound" in driver.page_source

        # Advisor on a GPU: values fit their boxes; no word of threads
        go_to_page(driver, "Advisor", timeout=180, heading="Configuration advisor")
        values = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')
        assert values
        cut = [v.text for v in values if driver.execute_script(
            "const e = arguments[0]; const c = e.querySelector('div') || e;"
            "return c.scrollWidth > c.clientWidth + 1;", v)]
        assert cut == []
        text = main_text(driver).lower()
        assert "inter-op" in text
        assert "thread" not in text
        assert "intra" not in text

        # Measurements: the rows roofcast measure wrote, from the same default store
        go_to_page(driver, "Measurements & retrain")
        wait_for(driver, lambda d: f"{len(stored)} stored rows of local" in main_text(d))
        assert str(Store().path) in main_text(driver)

        # an upload with an unbound dim: the app's controls, no CLI flag
        go_to_page(driver, "Model")
        driver.find_element(By.CSS_SELECTOR, '[data-testid="stFileUploader"] input[type="file"]'
                            ).send_keys(str(unbound))
        wait_for(driver, lambda d: "Current model: unbound" in main_text(d))
        go_to_page(driver, "Predict")
        error = wait_for(driver, lambda d: d.find_element(
            By.CSS_SELECTOR, '[data-testid="stAlertContentError"]')).text
        assert "symbolic dims N have no size: give each one on the Model page" in error
        assert cli_flags(error) == []
        assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')


def _shot(driver, folder: Path, name: str) -> None:
    """Save the page (grown to its content height) as ``folder/name.png``."""
    height = driver.execute_script(
        "const m = document.querySelector('[data-testid=\"stMainBlockContainer\"]');"
        "return m ? m.scrollHeight : document.body.scrollHeight;")
    driver.set_window_size(1440, min(max(int(height) + 120, 900), 4000))
    driver.save_screenshot(str(folder / f"{name}.png"))
    driver.set_window_size(1440, 1000)


def _radio(driver, label: str) -> None:
    from selenium.webdriver.common.by import By

    wait_for(driver, lambda d: next((e for e in d.find_elements(
        By.CSS_SELECTOR, '[role="radiogroup"] label') if e.text.strip() == label), False)).click()
    idle(driver)


def _layout_clashes(driver) -> list[tuple[str, str]]:
    """(chart title, what) for every drawn chart whose title touches the toolbar or whose legend
    touches the x axis title."""
    clashes = []
    for chart in plotly_charts(driver):
        title, toolbar = rects(driver, chart, ".gtitle"), rects(driver, chart, ".modebar")
        name = title[0]["text"] if title else "?"
        if not title or not toolbar:
            clashes.append((name, "no title or no toolbar drawn"))
        if any(overlaps(t, m) for t in title for m in toolbar):
            clashes.append((name, "title under the toolbar"))
        legend = rects(driver, chart, ".legend .bg")
        if any(overlaps(g, x) for g in legend for x in rects(driver, chart, ".g-xtitle text")):
            clashes.append((name, "legend over the x axis title"))
    return clashes


def test_issue25_newcomer_frictions_as_drawn(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    shots = Path(os.environ.get("ROOFCAST_E2E_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    env = {"ROOFCAST_HW_DIR": str(tmp_path / "devices"),
           "ROOFCAST_DATA_DIR": str(tmp_path / "data")}  # learned model: the shipped one
    unbound = tmp_path / "unbound.onnx"
    unbound.write_bytes(tiny_onnx("N"))
    graph = import_model(zoo.model_path("resnet50"), dims={"batch": 1})
    with running_app(env) as url, chromium() as driver:
        driver.get(url)
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]'))
        idle(driver)

        # Advisor on an H100: compared with the runtime that runs there, not ONNX Runtime
        go_to_page(driver, "Advisor", timeout=180, heading="Configuration advisor")
        wait_for(driver, lambda d: "pytorch-eager default" in main_text(d), 180)
        own = [e.text for e in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricLabel"]'
                                                    ', [data-testid="stTable"] th, '
                                                    '[data-testid="stCaptionContainer"]')]
        assert "pytorch-eager default: step time" in own
        assert not [t for t in own if "ONNX Runtime" in t]  # the page's words (the reasons:
        # the library's)
        _shot(driver, shots, "advisor_h100")

        # Model: nodes and costed kernels in one sentence
        go_to_page(driver, "Model")
        text = main_text(driver)
        assert f"{len(graph)} nodes: {len(summary.op_table(graph))} costed kernels" in text
        assert f"({len(graph)})" not in text
        _shot(driver, shots, "model_resnet50")

        # every chart of the other pages: titles clear of the toolbar, legends of axis titles
        for page in ("Predict", "Compare hardware", "Plan explorer"):
            go_to_page(driver, page, timeout=180)
            wait_for(driver, lambda d: plotly_charts(d), 180)
            idle(driver, 180)
            assert _layout_clashes(driver) == [], page
        _shot(driver, shots, "plan")

        # LLM serving, llama-3.1-70b at as many requests as fit: seconds, an explained dash
        go_to_page(driver, "LLM serving", timeout=180)
        box = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSelectbox"] input')[0]
        box.click()
        box.send_keys("llama-3.1-70b", Keys.ENTER)
        idle(driver, 180)
        _radio(driver, "As many as fit")
        wait_for(driver, lambda d: len(plotly_charts(d)) == 3, 180)
        idle(driver, 180)
        values = [v.text for v in driver.find_elements(By.CSS_SELECTOR,
                                                       '[data-testid="stMetricValue"]')]
        assert values[:4] == ["—"] * 4  # h100-sxm: the 70B model does not fit
        assert "not predicted, the model does not fit on h100-sxm" in main_text(driver)
        assert [v for v in values if v.endswith(" s")]
        assert not [v for v in values if "nan" in v or "e+" in v]
        assert _layout_clashes(driver) == []
        memory = plotly_charts(driver)[2]
        assert rects(driver, memory, ".legend .bg")
        assert rects(driver, memory, ".g-xtitle text")
        _shot(driver, shots, "llm_70b")

        # the sidebar with no LLM chosen yet: no stray backticks
        _radio(driver, "Upload config.json")
        sidebar = driver.find_element(By.CSS_SELECTOR, '[data-testid="stSidebarUserContent"]')
        assert "LLM none chosen" in sidebar.text.replace("\n", " ")
        assert "`" not in sidebar.text
        sidebar.screenshot(str(shots / "llm_no_model_sidebar.png"))

        # Model, a dim unbound (last: the other pages need a model they can predict): the op
        # mix counts nodes and names the dim to bind
        go_to_page(driver, "Model")
        driver.find_element(By.CSS_SELECTOR, '[data-testid="stFileUploader"] input[type="file"]'
                            ).send_keys(str(unbound))
        wait_for(driver, lambda d: "Current model: unbound" in main_text(d))
        idle(driver)
        assert "The op mix by FLOPs needs a size for N" in main_text(driver)
        chart = wait_for(driver, lambda d: plotly_charts(d)[0] if plotly_charts(d) else False)
        assert rects(driver, chart, ".gtitle")[0]["text"] == "Op mix by node count"
        assert sorted(y_tick_labels(driver, chart)) == ["MatMul", "Relu"]
        bars = rects(driver, chart, ".bars path")
        assert len(bars) == 2
        assert all(b["right"] - b["left"] > 50 for b in bars)  # drawn, not an empty -1..1 axis
        _shot(driver, shots, "model_unbound")
