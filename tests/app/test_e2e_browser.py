"""End to end in a real headless browser: ``roofcast app`` serves the app, Chromium (driven by
Selenium) uploads a zoo model file through the Model page's file input, opens the Predict page and
reads the predicted time off it; the figure must be the library's for the same inputs."""

from __future__ import annotations

import pytest

from roofcast.app.charts import fmt_time
from roofcast.graph_import import import_model
from roofcast.predictor.config import RunConfig
from roofcast.predictor.simulate import predict_graph
from roofcast.training_data import zoo
from tests.app.browser import chromium, chromium_paths, go_to_page, idle, running_app, wait_for

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
        wait_for(driver, lambda d: any(
            "Current model: mobilenet_v2" in h.text for h in d.find_elements(By.CSS_SELECTOR, "h3")))
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
