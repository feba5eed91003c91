"""The Sweep explorer page driven with ``AppTest``, on a real sweep (``run_sweep`` of two zoo
models x four devices and an unknown one, written by ``output.write_dataset``): loaded from a
folder path or an uploaded zip, its metrics, Pareto chart and summary are the library's for the
same cells, filters narrow them, and a path outside the working directory or a hostile zip is
an ``st.error``, never an exception."""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import plotly.io as pio
import pytest

from roofcast.app import charts
from roofcast.app.views import sweep as sweep_view
from roofcast.predictor.sweeps.output import pareto_front, summary, write_dataset
from roofcast.predictor.sweeps.schedulers import run_sweep
from roofcast.predictor.sweeps.types import SweepSpec
from tests.app.test_pages import (  # noqa: F401 (isolated: a fixture)
    assert_clean,
    figure,
    isolated,
    start,
    values,
)
from tests.app.test_sweep_page_loading import (
    fake_cells,
    fake_serving_cells,
    write_sweep,
    zip_folder,
)

PAGE = "sweep"
GRAPH_CHART = "Graph cells: latency vs $/throughput"
SERVING_CHART = "LLM serving: e2e latency vs $/(tokens/s)"
FRONT, SUMMARY, CELLS = 0, 1, 2  # the page's tables, in order
SPEC = SweepSpec(models=("mobilenet_v2", "resnet50"),
                 devices=("h100-sxm", "a100-80gb-sxm", "t4", "xeon-8480plus", "no-such-gpu"),
                 batches=(1, 8), precisions=("fp32", "fp16"))


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The sweep's cells and its folder."""
    result = run_sweep(SPEC)
    folder = write_dataset(result, tmp_path_factory.mktemp("sweeps") / "s1")
    return result.cells, folder


@pytest.fixture
def work(swept, tmp_path, monkeypatch):
    """A working directory holding the sweep under runs/s1."""
    cells, folder = swept
    (tmp_path / "runs").mkdir()
    shutil.copytree(folder, tmp_path / "runs" / "s1")
    monkeypatch.chdir(tmp_path)
    return cells


def front_points(fig: dict) -> dict[str, list[float]]:
    return {t["name"].removesuffix(" Pareto front"): values(t["x"]) for t in fig["data"]
            if t["name"].endswith("Pareto front")}


def assert_shows(at, cells, loaded=None) -> None:
    """The page's metrics are those of the ``loaded`` sweep (default: ``cells``); its front
    and summary the library's for the selected ``cells``."""
    loaded = cells if loaded is None else loaded
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Cells"] == f"{len(loaded):,}"
    assert metrics["Cells with an error"] == f"{int((loaded['error'] != '').sum()):,}"
    assert at.subheader[0].value == f"Pareto front ({len(cells):,} cells selected)"
    front = pareto_front(cells)
    got = front_points(figure(at, GRAPH_CHART))
    assert set(got) == set(front["model"])
    for model, rows in front.groupby("model"):
        assert got[model] == pytest.approx(sorted(rows["time_s"] * 1e3), rel=1e-12)
    shown_front = at.dataframe[FRONT].value
    assert shown_front["time_s"].tolist() == pytest.approx(front["time_s"].tolist(), rel=1e-12)
    table = at.dataframe[SUMMARY].value
    want = summary(cells)
    assert table["hardware"].tolist() == want["hardware"].tolist()
    assert table["family"].tolist() == want["family"].tolist()
    assert table["best_time_s"].tolist() == pytest.approx(want["best_time_s"].tolist(),
                                                          rel=1e-12, nan_ok=True)


def test_folder_path_shows_the_sweep_its_front_and_summary(work):
    at = start(PAGE, sweep_path="runs/s1")
    assert_clean(at)
    assert (work["error"] != "").sum() == 8  # the unknown device fails its own cells only
    assert_shows(at, work)
    cells = at.dataframe[CELLS].value
    assert cells["cell_id"].tolist() == work["cell_id"].tolist()


def test_filters_narrow_the_cells_and_the_front(work):
    at = start(PAGE, sweep_path="runs/s1")
    at.multiselect(key="sweep_f_model").set_value(["resnet50"])
    at.multiselect(key="sweep_f_precision").set_value(["fp16"]).run()
    assert_clean(at)
    want = work[(work["model"] == "resnet50") & (work["precision"] == "fp16")]
    assert at.dataframe[CELLS].value["cell_id"].tolist() == \
        want["cell_id"].tolist()
    assert_shows(at, want, loaded=work)
    at.multiselect(key="sweep_f_device").set_value([]).run()
    assert_clean(at)
    assert "No cell matches" in at.info[0].value


def test_zip_upload_shows_the_same_sweep(work, swept):
    at = start(PAGE, sweep_source="Zipped folder")
    assert "Upload a zip" in at.info[0].value
    at.file_uploader(key="sweep_zip").set_value(
        ("s1.zip", zip_folder(swept[1]), "application/zip")).run()
    assert_clean(at)
    assert_shows(at, work)


@pytest.mark.parametrize(("state", "words"), [
    ({"sweep_path": "/etc"}, "outside the working directory"),
    ({"sweep_path": "../.."}, "outside the working directory"),
    ({"sweep_path": "runs/empty"}, "no .parquet files"),
])
def test_bad_folders_are_page_errors(work, state, words):
    (Path.cwd() / "runs" / "empty").mkdir()
    at = start(PAGE, **state)
    assert not at.exception
    assert words in at.error[0].value


def test_hostile_zip_is_a_page_error_and_writes_nothing(work, tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../../escaped.parquet", b"x")
    at = start(PAGE, sweep_source="Zipped folder")
    at.file_uploader(key="sweep_zip").set_value(("evil.zip", buf.getvalue(),
                                                 "application/zip")).run()
    assert not at.exception
    assert "climbs out of the folder" in at.error[0].value
    assert not list(tmp_path.parent.rglob("escaped.parquet"))


def test_pareto_chart_draws_each_models_front_and_cells():
    cells = fake_cells()
    front = pareto_front(cells)
    fig = charts.sweep_pareto(cells, front).to_plotly_json()
    names = [t["name"] for t in fig["data"]]
    assert sorted(names) == sorted(f"{m} {w}" for m in ("resnet50", "bert_base")
                                   for w in ("cells", "Pareto front"))
    drawn = sum(len(values(t["x"])) for t in fig["data"] if t["name"].endswith("cells"))
    priced = cells["usd_per_throughput"].notna().sum()
    assert drawn == priced < len(cells)  # the device without a price is not drawn


@pytest.fixture
def mixed(tmp_path, monkeypatch):
    """A working directory holding a sweep of graph cells and LLM serving cells (two request
    shapes, three devices and a system: entry, speedups over the a100) under runs/mixed."""
    cells = pd.concat([fake_cells(), fake_serving_cells()], ignore_index=True)
    write_sweep(cells, tmp_path / "runs" / "mixed")
    monkeypatch.chdir(tmp_path)
    return cells.sort_values("cell_id", ignore_index=True)


def test_serving_cells_get_their_own_chart_priced_per_token_rate(mixed):
    at = start(PAGE, sweep_path="runs/mixed")
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Families"] == "2"
    assert metrics["Hardware"] == "4"  # three devices and system:hgx-h100
    serving = mixed[mixed["family"] == "serving"]
    fig = figure(at, SERVING_CHART)
    assert fig["layout"]["yaxis"]["title"]["text"].startswith("$ per (token/s)")
    front = pareto_front(serving)
    got = {t["name"].removesuffix(" Pareto front"): (values(t["x"]), values(t["y"]))
           for t in fig["data"] if t["name"].endswith("Pareto front")}
    assert set(got) == {"gpt2 · 64:16", "gpt2 · 256:16"}  # one front per request shape
    for (n_in, n_out), rows in front.groupby(["input_tokens", "output_tokens"]):
        rows = rows.sort_values("time_s")
        x, y = got[f"gpt2 · {n_in}:{n_out}"]
        assert x == pytest.approx((rows["time_s"] * 1e3).tolist(), rel=1e-12)
        assert y == pytest.approx((rows["price_usd"] / rows["tokens_per_s"]).tolist(),
                                  rel=1e-12)
    assert front_points(figure(at, GRAPH_CHART))  # the graph cells keep their chart
    shown = at.dataframe[FRONT].value
    assert {"family", "plan", "n_devices", "input_tokens", "tokens_per_s", "speedup"} <= \
        set(shown.columns)
    best = serving.loc[serving["speedup"].idxmax()]
    assert any(f"{best['speedup']:.3g}x" in c.value and "Best speedup" in c.value
               for c in at.caption)


def test_family_tokens_and_system_filters(mixed):
    at = start(PAGE, sweep_path="runs/mixed")
    at.multiselect(key="sweep_f_family").set_value(["serving"])
    at.multiselect(key="sweep_f_tokens").set_value(["256:16"])
    at.multiselect(key="sweep_f_system").set_value(["hgx-h100"]).run()
    assert_clean(at)
    want = mixed[(mixed["family"] == "serving") & (mixed["input_tokens"] == 256)
                 & (mixed["system"] == "hgx-h100")]
    assert at.dataframe[CELLS].value["cell_id"].tolist() == want["cell_id"].tolist()
    assert len(want) == 2
    summary_rows = at.dataframe[SUMMARY].value
    assert summary_rows["hardware"].tolist() == ["system:hgx-h100"]
    with pytest.raises(AssertionError, match="no chart"):
        figure(at, GRAPH_CHART)  # no graph cell selected: no graph chart
    at.multiselect(key="sweep_f_family").set_value(["graph"]).run()
    assert "No cell matches" in at.info[0].value  # graph cells have no system nor tokens


def test_graph_only_sweep_hides_token_and_speedup_columns(work):
    at = start(PAGE, sweep_path="runs/s1")
    for table in (at.dataframe[FRONT].value, at.dataframe[SUMMARY].value):
        assert not {"input_tokens", "tokens_per_s", "ttft_s", "speedup", "best_speedup",
                    "best_tokens_per_s_per_dollar"} & set(table.columns)
    with pytest.raises(AssertionError, match="no chart"):
        figure(at, SERVING_CHART)


def test_a_sweep_of_the_first_round_is_refused_with_re_run(tmp_path, monkeypatch):
    old = fake_cells().drop(columns=["family", "system", "n_devices", "plan", "input_tokens",
                                     "output_tokens", "tokens_per_s", "ttft_s", "tpot_s",
                                     "speedup"])
    write_sweep(old, tmp_path / "old")
    monkeypatch.chdir(tmp_path)
    at = start(PAGE, sweep_path="old")
    assert not at.exception
    assert "re-run the sweep" in at.error[0].value


def test_a_real_sweep_of_three_families_draws_a_chart_per_family(tmp_path, monkeypatch):
    """run_sweep of a zoo model and gpt2 on two devices and a system: entry, with a plan and
    a baseline: the page draws one chart per family and cost unit that has priced cells, its
    front is the library's, and the summary keeps the system apart from its device."""
    spec = SweepSpec(models=("mobilenet_v2", "llm:gpt2"), llms=("llm:gpt2",),
                     devices=("h100-sxm", "a100-80gb-sxm", "system:hgx-h100"), batches=(1, 8),
                     precisions=("fp16",), modes=("infer", "serve"), plans=("single", "tp2"),
                     input_tokens=(128,), output_tokens=(32,), baseline="a100-80gb-sxm")
    result = run_sweep(spec)
    write_dataset(result, tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    at = start(PAGE, sweep_path="real")
    assert_clean(at)
    cells = result.cells
    front = pareto_front(cells)
    titles = {pio.from_json(c.proto.spec).to_plotly_json()["layout"]["title"]["text"]
              for c in at.get("plotly_chart")}
    want = {sweep_view.PANELS[(f, u)][0] for f, u in zip(front["family"], front["rate_unit"],
                                                        strict=True)}
    assert {GRAPH_CHART, SERVING_CHART, "Parallel plans: step time vs $/throughput",
            "Parallel plans (LLM): step time vs $/(tokens/s)"} <= want
    assert titles == want
    assert at.dataframe[FRONT].value["time_s"].tolist() == pytest.approx(
        front["time_s"].tolist(), rel=1e-12)
    hardware = set(at.dataframe[SUMMARY].value["hardware"])
    assert {"h100-sxm", "system:hgx-h100"} <= hardware
    assert "speedup" in at.dataframe[FRONT].value.columns
