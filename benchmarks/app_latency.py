"""How long the app takes to update after a slider move on ResNet-50 (issue 26: under 0.3 s).

*Compute* (always; ``--compute-only``: nothing else): what the What-if page computes after a
bandwidth-slider move with its caches warm (model imported, base prediction cached): the
what-if device derived and predicted (the body of ``state._predict_cached``) and the page's
tables (``op_gains``, ``dominance``, the bound shares), on h100-sxm for each road that may be
the default (``time-roofline``, ``roofline+eff``, ``auto``); wall and CPU seconds (CPU: what
to compare on a loaded machine).

Then drives the real app script with ``streamlit.testing.v1.AppTest`` (the same page code, state and
caches a browser session runs) and times ``AppTest.run()`` — one full rerun of the page on the
server — after each widget change:

* What-if page, memory-bandwidth slider through every factor: *cold* (a what-if device not seen
  before: derive + predict) and *warm* (the same values again: cache hits);
* What-if page, all five sliders moved one after another (cold);
* Predict page, batch size 2, 4, 8, 16, 32 (cold: re-import at the new batch + predict).

With ``--browser`` (needs chromium + chromium-driver): the same bandwidth slider moved with the
keyboard in headless Chromium against ``roofcast app``, timed from the key press until the
what-if metric on the page shows the new figure (websocket round trip, rerun and rendering).
Run: ``python benchmarks/app_latency.py [--compute-only] [--browser]``; prints one table
(seconds).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _timed(at) -> float:
    t0 = time.perf_counter()
    at.run()
    dt = time.perf_counter() - t0
    if at.exception or at.error:
        raise RuntimeError([e.value for e in (*at.exception, *at.error)])
    return dt


ROADS = ("time-roofline", "roofline+eff", "auto")


def compute_rows(base_id: str = "h100-sxm") -> list[tuple[str, list[float]]]:
    """Seconds of the What-if page's work per bandwidth factor (module docstring), per road."""
    from roofcast.app.views.whatif import FACTORS, dominance, op_gains
    from roofcast.hw_catalog import derive, get_device
    from roofcast.models import load_model
    from roofcast.predictor.config import run_config
    from roofcast.predictor.estimator_registry import as_estimator
    from roofcast.predictor.simulate import predict_graph

    graph = load_model("resnet50").graph  # st.cache_data keeps it
    config = run_config(graph)
    hw = get_device(base_id)
    rows = []
    for road in ROADS:
        est = as_estimator(road)  # the page keeps it (state._estimator)
        base = predict_graph(graph, hw, config, est)  # cached on the page
        wall, cpu = [], []
        for f in (f for f in FACTORS if f != 1.0):
            t0, c0 = time.perf_counter(), time.process_time()
            whatif = derive(hw, mem_bw_scale=f)
            new = predict_graph(graph, whatif, config, est)
            op_gains(base.per_op, new.per_op)
            dominance(whatif, new, 1.0)
            new.per_op.groupby("bound")["time_s"].sum().idxmax()
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        rows += [(f"compute: bandwidth factor, {road} (wall)", wall),
                 (f"compute: bandwidth factor, {road} (CPU)", cpu)]
    return rows


def main() -> int:
    rows = compute_rows()
    if "--compute-only" not in sys.argv:
        rows += app_rows()
    print(f"{'update after':<50} {'n':>3} {'median_s':>9} {'max_s':>7}  each_s")
    for name, times in rows:
        each = " ".join(f"{t:.2f}" for t in times)
        print(f"{name:<50} {len(times):>3} {statistics.median(times):>9.3f} {max(times):>7.3f}"
              f"  {each}")
    return 0


def app_rows() -> list[tuple[str, list[float]]]:
    """Full reruns of the app script (``AppTest``) after each widget change."""
    from streamlit.testing.v1 import AppTest

    from roofcast.app.views.whatif import FACTORS, KNOBS

    tmp = tempfile.mkdtemp(prefix="roofcast-bench-")
    os.environ["ROOFCAST_HW_DIR"] = str(Path(tmp) / "devices")
    at = AppTest.from_file(str(ROOT / "app" / "streamlit_app.py"), default_timeout=300)
    t0 = time.perf_counter()
    at.run()
    first = time.perf_counter() - t0
    at.switch_page("views/whatif.py")
    t0 = time.perf_counter()
    at.run()
    whatif_open = time.perf_counter() - t0
    values = [f for f in FACTORS if f != 1.0]
    rows = []
    for label in ("cold", "warm"):
        times = []
        for f in values:
            at.select_slider(key="whatif_mem_bw_scale").set_value(f)
            times.append(_timed(at))
        rows.append((f"what-if: bandwidth slider ({label})", times))
    at.select_slider(key="whatif_mem_bw_scale").set_value(1.0)
    _timed(at)
    times = []
    for key, _, _ in KNOBS:
        at.select_slider(key=f"whatif_{key}").set_value(1.5)
        times.append(_timed(at))
    rows.append(("what-if: each of 5 sliders to 1.5x (cold)", times))
    at.switch_page("views/predict.py")
    _timed(at)
    times = []
    for b in (2, 4, 8, 16, 32):
        at.number_input(key="_w_predict_batch").set_value(b)
        times.append(_timed(at))
    rows.append(("predict: batch 2..32 (cold, re-import)", times))

    if "--browser" in sys.argv:
        rows += browser_rows()
    rows.insert(0, ("app: first page load (imports, cold caches)", [first]))
    rows.insert(1, ("app: what-if page open", [whatif_open]))
    return rows


def browser_rows() -> list[tuple[str, list[float]]]:
    """Key press -> new what-if figure on the page, in headless Chromium (cold, then warm)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from tests.app.browser import chromium, go_to_page, idle, running_app, wait_for

    def shown(d) -> str:
        """The what-if changes the page last rendered (hidden marker), or ''."""
        found = d.find_elements(By.ID, "roofcast-whatif")
        try:
            return found[0].get_attribute("data-changes") if found else ""
        except Exception:  # re-rendered between find and read
            return ""

    tmp = tempfile.mkdtemp(prefix="roofcast-bench-")
    out = []
    with running_app({"ROOFCAST_HW_DIR": f"{tmp}/devices"}) as url, chromium() as d:
        d.get(url)
        wait_for(d, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]'))
        idle(d)
        go_to_page(d, "What-if device")
        time.sleep(2.0)  # let the browser finish drawing the page's charts first
        steps = ["mem_bw_scale=1.25", "mem_bw_scale=1.5", "mem_bw_scale=2", "mem_bw_scale=3",
                 "mem_bw_scale=4", "mem_bw_scale=8"]
        for label, key, targets in (("cold", Keys.ARROW_RIGHT, steps),
                                    ("warm", Keys.ARROW_LEFT, [*steps[-2::-1], "none"])):
            times = []
            for target in targets:
                thumb = d.find_element(By.CSS_SELECTOR,
                                       'input[type="range"][aria-label="Memory bandwidth"]')
                d.execute_script("arguments[0].focus();", thumb)
                t0 = time.perf_counter()
                ActionChains(d).send_keys(key).perform()
                while shown(d) != target:
                    if time.perf_counter() - t0 > 30:
                        raise RuntimeError(f"the page shows {shown(d)!r}, not {target!r}, "
                                           "after 30 s")
                    time.sleep(0.02)
                times.append(time.perf_counter() - t0)
                idle(d)
            out.append((f"browser: bandwidth slider key press ({label})", times))
    return out


if __name__ == "__main__":
    sys.exit(main())
