"""Headless-browser harness: start ``roofcast app`` on a free port and drive Debian's Chromium
with Selenium (no browser download: ``/usr/bin/chromium`` + ``/usr/bin/chromedriver``).

Used by ``test_e2e_browser.py`` and ``docs/take_screenshots.py``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser")
CHROME_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run")
START_TIMEOUT_S = 90.0


def chromium_paths() -> tuple[str, str] | None:
    """(chromium, chromedriver) executables, or None when either is absent."""
    browser = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def roofcast_command() -> list[str]:
    """``roofcast`` beside this Python (the installed entry point).

    Else ``python -m roofcast.app.cli``.
    """
    script = Path(sys.executable).with_name("roofcast")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "roofcast.app.cli"]


@contextmanager
def running_app(env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Start ``roofcast app --port N --address 127.0.0.1``; yield its URL; stop it (its whole
    process group, which this function created)."""
    port = free_port()
    cmd = [*roofcast_command(), "app", "--port", str(port), "--address", "127.0.0.1"]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(proc, url, log)
            yield url
        finally:
            _stop(proc)


def _wait_healthy(proc: subprocess.Popen, url: str, log) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"roofcast app exited ({proc.returncode}): "
                               f"{log.read().decode(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"roofcast app did not answer on {url} within "
                               f"{START_TIMEOUT_S:.0f} s")
        time.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    """Stop the app's process group (created by ``running_app``)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@contextmanager
def chromium(width: int = 1440, height: int = 1000) -> Iterator[object]:
    """A headless Chromium WebDriver with a fresh profile folder."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    paths = chromium_paths()
    if paths is None:
        raise RuntimeError("chromium and chromedriver are needed (apt-get install chromium "
                           "chromium-driver)")
    browser, driver_path = paths
    with tempfile.TemporaryDirectory(prefix="roofcast-chrome-") as profile:
        opts = webdriver.ChromeOptions()
        opts.binary_location = browser
        for flag in CHROME_FLAGS:
            opts.add_argument(flag)
        opts.add_argument(f"--user-data-dir={profile}")
        opts.add_argument(f"--window-size={width},{height}")
        driver = webdriver.Chrome(service=Service(driver_path), options=opts)
        try:
            yield driver
        finally:
            driver.quit()


def wait_for(driver, condition, timeout: float = 90.0):
    """``condition(driver)`` once truthy; an element replaced by a rerun while the condition
    reads it (stale) counts as not yet."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.25,
                         ignored_exceptions=(StaleElementReferenceException,)).until(condition)


def idle(driver, timeout: float = 90.0) -> None:
    """Wait until the Streamlit script has finished running (no 'running' status widget)."""
    from selenium.webdriver.common.by import By

    time.sleep(0.5)
    wait_for(driver, lambda d: not d.find_elements(By.CSS_SELECTOR,
                                                   '[data-testid="stStatusWidget"]'), timeout)
    time.sleep(0.3)


def go_to_page(driver, title: str, timeout: float = 90.0, heading: str | None = None) -> None:
    """Click the sidebar navigation link of the page called ``title`` (keeps the session) and
    wait for its heading (``heading``, default the title)."""
    from selenium.webdriver.common.by import By

    def link(d):
        for a in d.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNav"] a'):
            if a.text.strip().endswith(title):
                return a
        return False

    wait_for(driver, link, timeout).click()
    wait_for(driver, lambda d: any(h.text.strip() == (heading or title) for h in
                                   d.find_elements(By.CSS_SELECTOR, "h1")), timeout)
    idle(driver, timeout)


def main_text(driver) -> str:
    """The visible text of the page's main block (not the sidebar)."""
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text


def rects(driver, root, selector: str) -> list[dict]:
    """Bounding boxes (left, top, right, bottom; page pixels) of the elements matching
    ``selector`` under the element ``root``, with their text."""
    return driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll(arguments[1])).map(e => {"
        "const r = e.getBoundingClientRect();"
        "return {left: r.left, top: r.top, right: r.right, bottom: r.bottom,"
        "        text: e.textContent};});", root, selector)


def overlaps(a: dict, b: dict) -> bool:
    """Whether two boxes of ``rects`` share an area (touching edges do not count)."""
    return (min(a["right"], b["right"]) - max(a["left"], b["left"]) > 0.5
            and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 0.5)


def plotly_charts(driver) -> list:
    """The rendered Plotly figures of the page, in page order."""
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")


def y_tick_labels(driver, chart) -> list[str]:
    """A chart's y-axis tick labels from top to bottom, as drawn."""
    ticks = rects(driver, chart, ".yaxislayer-above .ytick text")
    return [t["text"] for t in sorted(ticks, key=lambda t: t["top"])]
