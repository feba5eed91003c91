"""Screenshots of every app page for the README, taken in headless Chromium.

Starts ``roofcast app`` (isolated user folders), drives one browser session through the pages
(ResNet-50 at batch 8 on the default device; a what-if device with 2x bandwidth; the test
measurement file imported into the default measurement store with ``roofcast data import`` and
retrained on; an uploaded model with an unbound dim; the LLM serving page with its default model
and devices; the plan explorer with its default model and system) and writes full-page PNGs to
``docs/screenshots/``.

Run: ``python docs/take_screenshots.py [--only llm|plan]`` (needs chromium + chromium-driver
and selenium); ``--only PAGE`` takes that page alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.browser import (  # noqa: E402
    chromium,
    go_to_page,
    idle,
    roofcast_command,
    running_app,
    wait_for,
)
from tests.app.test_pages import tiny_onnx  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
WIDTH = 1440
MEASUREMENTS = ROOT / "tests" / "app" / "data" / "measurements_h100.csv"


def shoot(driver, name: str) -> Path:
    """Resize the window to the page's content height and save ``OUT/name.png``."""
    height = driver.execute_script(
        "const m = document.querySelector('[data-testid=\"stMainBlockContainer\"]');"
        "return m ? m.scrollHeight : document.body.scrollHeight;")
    driver.set_window_size(WIDTH, min(max(int(height) + 120, 900), 4000))
    time.sleep(1.5)
    path = OUT / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(WIDTH, 1000)
    print(f"wrote {path.relative_to(ROOT)}")
    return path


def click_tab(driver, label: str) -> None:
    from selenium.webdriver.common.by import By

    tab = wait_for(driver, lambda d: next((t for t in d.find_elements(By.CSS_SELECTOR,
                                                                      '[role="tab"]')
                                           if t.text.strip() == label), False))
    tab.click()
    idle(driver)
    time.sleep(1.0)


def set_number(driver, label: str, value: int) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR,
                                                    f'input[aria-label="{label}"]'))
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(str(value), Keys.ENTER)
    idle(driver)
    driver.execute_script("document.activeElement.blur();")  # no focus ring in the shot


def llm_page(driver) -> None:
    """The LLM serving page with its default model, devices and lengths (its three charts
    drawn)."""
    from selenium.webdriver.common.by import By

    go_to_page(driver, "LLM serving", timeout=180)
    wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")) == 3,
             timeout=180)
    idle(driver)
    shoot(driver, "llm")


def plan_page(driver) -> None:
    """The plan explorer with its default model and system."""
    go_to_page(driver, "Plan explorer", timeout=180)
    wait_for(driver, lambda d: "plans evaluated" in d.page_source, timeout=180)
    idle(driver)
    shoot(driver, "plan")


#: pages ``--only`` can take alone.
ALONE = {"llm": llm_page, "plan": plan_page}


def only(page: str) -> int:
    if page not in ALONE:
        print(f"--only takes one of: {', '.join(ALONE)}", file=sys.stderr)
        return 2
    with running_app() as url, chromium(WIDTH, 1000) as driver:
        driver.get(url)
        idle(driver)
        ALONE[page](driver)
    return 0


def main() -> int:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    OUT.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="roofcast-shots-")
    env = {"ROOFCAST_HW_DIR": f"{tmp}/devices", "ROOFCAST_DATA_DIR": f"{tmp}/data",
           "ROOFCAST_LEARNED_MODEL": f"{tmp}/no-model"}
    # the default store, as `roofcast data import` fills it (the page reads the same one)
    subprocess.run([*roofcast_command(), "data", "import", str(MEASUREMENTS)],
                   env={**os.environ, **env}, check=True)
    unbound = Path(tmp) / "my_model.onnx"
    unbound.write_bytes(tiny_onnx("N"))
    with running_app(env) as url, chromium(WIDTH, 1000) as driver:
        driver.get(url)
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]'))
        idle(driver)
        go_to_page(driver, "Predict")  # batch 1: every kernel on the launch floor
        wait_for(driver, lambda d: d.find_element(By.ID, "roofcast-time-s"))
        shoot(driver, "predict_batch1")

        go_to_page(driver, "Model")
        set_number(driver, "batch (batch size)", 8)
        shoot(driver, "model")

        go_to_page(driver, "Predict")
        wait_for(driver, lambda d: d.find_element(By.ID, "roofcast-time-s"))
        shoot(driver, "predict")
        click_tab(driver, "Breakdowns")
        shoot(driver, "predict_breakdowns")

        go_to_page(driver, "Roofline")
        time.sleep(1.0)
        shoot(driver, "roofline")
        click_tab(driver, "Time-based roofline")
        shoot(driver, "roofline_time")
        click_tab(driver, "Trajectories")
        shoot(driver, "roofline_trajectories")

        go_to_page(driver, "Advisor", timeout=180, heading="Configuration advisor")
        time.sleep(1.0)
        shoot(driver, "advisor")

        go_to_page(driver, "Compare hardware")
        time.sleep(1.0)
        shoot(driver, "compare")

        go_to_page(driver, "What-if device")
        from selenium.webdriver.common.action_chains import ActionChains

        thumb = wait_for(driver, lambda d: d.find_element(
            By.CSS_SELECTOR, 'input[type="range"][aria-label="Memory bandwidth"]'))
        driver.execute_script("arguments[0].focus();", thumb)
        for _ in range(3):  # 1x -> 1.25x -> 1.5x -> 2x memory bandwidth
            ActionChains(driver).send_keys(Keys.ARROW_RIGHT).perform()
            time.sleep(0.2)
        wait_for(driver, lambda d: "Speedup" in d.page_source)
        idle(driver)
        time.sleep(1.0)
        shoot(driver, "whatif")

        go_to_page(driver, "Measurements & retrain")
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]'))
        idle(driver)
        button = wait_for(driver, lambda d: next(
            (b for b in d.find_elements(By.CSS_SELECTOR, "button") if "Retrain" in b.text),
            False), timeout=180)
        button.click()
        wait_for(driver, lambda d: "Held-out error" in d.page_source, timeout=180)
        idle(driver, timeout=180)
        shoot(driver, "measurements")

        go_to_page(driver, "Model")
        driver.find_element(By.CSS_SELECTOR, '[data-testid="stFileUploader"] input[type="file"]'
                            ).send_keys(str(unbound))
        wait_for(driver, lambda d: "Current model: my_model" in d.page_source)
        idle(driver)
        go_to_page(driver, "Predict")
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR,
                                                   '[data-testid="stAlertContentError"]'))
        shoot(driver, "upload_unbound_dim")

        llm_page(driver)
        plan_page(driver)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(only(args[1] if len(args) > 1 else "") if args[:1] == ["--only"] else main())
