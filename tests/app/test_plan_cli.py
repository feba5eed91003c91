"""``roofcast plan`` through ``app.cli.main``: bad input as one line without a traceback, before
any model is loaded; the ranked output in every format, the verdict when nothing fits, and the
atomic ``--output`` (``tests/app/test_plan_e2e.py`` runs real models end to end)."""

from __future__ import annotations

import json

import pytest

from roofcast.app.output_file import render
from roofcast.app.parallel_report import closest_sentence, plan_rows, search_output
from roofcast.parallel_api import plan
from tests.app.test_parallel_flags import arg_error, user_error
from tests.predictor.parallel.engine_helpers import FakeSource


@pytest.mark.parametrize(("argv", "match"), [
    (("llama-3.1-8b", "--system", "hgx-h100"), "--global-batch"),
    (("llama-3.1-8b", "--global-batch", "8"), "give --system ID"),
    (("llama-3.1-8b", "--system", "hgx-h100", "--hw", "h100-sxm", "--global-batch", "8"),
     "not both"),
    (("llama-3.1-8b", "--system", "nope-box", "--global-batch", "8"), "nope-box"),
    (("llama-3.1-8b", "--hw", "h100-sxm", "--global-batch", "8"), "--devices"),
    (("llama-3.1-8b", "--system", "hgx-h100", "--mode", "serve", "--dim", "x=1"), "--dim"),
    (("llama-3.1-8b", "--system", "hgx-h100", "--global-batch", "8", "--output-tokens", "9"),
     "--output-tokens applies to --mode serve"),
])
def test_bad_requests_are_one_line_errors(capsys, argv, match):
    assert match in user_error(capsys, "plan", *argv)


@pytest.mark.parametrize(("argv", "match"), [
    (("--zero", "0,5"), "no ZeRO stage"),
    (("--mode", "fly"), "invalid choice"),
    (("--top", "-1"), "must be >= 0"),
    (("--recompute", "maybe"), "invalid choice"),
])
def test_malformed_values_are_refused_by_the_parser(capsys, argv, match):
    assert match in arg_error(capsys, "plan", "llama-3.1-8b", "--system", "hgx-h100",
                              "--global-batch", "8", *argv)


def test_output_into_a_folder_is_refused_before_any_work(capsys, tmp_path):
    err = user_error(capsys, "plan", "llama-3.1-8b", "--system", "hgx-h100", "--global-batch",
                     "8", "--output", str(tmp_path))
    assert "is a folder" in err


# ----------------------------------------------------------------------------- the report
def test_ranked_table_shows_the_breakdown_memory_and_the_best_plan():
    search = plan(FakeSource(), "hgx-h100", global_batch=64)
    tables, extra = search_output(search, "table", 5, {"model": "fake"})
    text = render(tables, "table", extra)
    for column in ("compute_s", "exposed_comm_s", "bubble_s", "optimizer_s", "memory_GiB",
                   "over_GiB"):
        assert column in text
    assert extra["best"] == search.best.plan.label()
    assert "verdict" not in extra
    assert len(tables["plans"].rows) == 5
    assert tables["plans"].total_rows == len(search.table)


def test_when_nothing_fits_the_verdict_names_the_closest_plan_and_its_excess():
    search = plan(FakeSource(d=65536), "hgx-h100", global_batch=64)
    _, extra = search_output(search, "table", 5, {"model": "fake"})
    closest = search.closest.as_dict()
    over = closest["over_bytes"] / 2**30
    assert extra["verdict"].startswith(f"no plan fits: the closest, {closest['plan']},")
    assert f"{over:.4g} GiB over" in extra["verdict"]
    assert "best" not in extra


def test_json_and_csv_hold_every_column_of_the_search():
    search = plan(FakeSource(), "hgx-h100", global_batch=16)
    tables, extra = search_output(search, "json", None, {"model": "fake"})
    doc = json.loads(render(tables, "json", extra))
    assert len(doc["plans"]) == len(search.table)
    assert set(search.table.columns) <= set(doc["plans"][0])
    tables, extra = search_output(search, "csv", None, {"model": "fake"})
    lines = render(tables, "csv", extra).strip().splitlines()
    assert len(lines) == len(search.table) + 1
    assert lines[0].startswith("rank,plan,")


def test_closest_sentence_is_none_when_a_plan_fits():
    rows = plan_rows(plan(FakeSource(), "hgx-h100", global_batch=16).table)
    assert closest_sentence(rows) is None
    assert "every one was rejected" in closest_sentence([])
