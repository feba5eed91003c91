"""benchmarks/accuracy_report.py: the generated docs/accuracy.md is dated, names the command of
every table, keeps its history, and a failing section is reported in the file, not raised."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def report():
    return load_benchmark("accuracy_report")


def test_every_section_runs_an_existing_benchmark(report):
    assert all((ROOT / "benchmarks" / s.args[0]).is_file() for s in report.SECTIONS)


def test_the_committed_report_is_generated_and_dated(report):
    text = report.OUTPUT.read_text()
    assert re.search(r"^Generated \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC by `python benchmarks/"
                     r"accuracy_report.py`", text, re.M)
    for section in report.SECTIONS:
        assert f"`python benchmarks/{section.args[0]}" in text
    assert report.HISTORY in text


def test_a_rerun_keeps_the_history_and_reports_a_failure(report, tmp_path, monkeypatch):
    out = tmp_path / "accuracy.md"
    out.write_text("# old\n\nold tables\n\n## History\n\n### 2026-11-22: a figure\n")
    broken = report.Section("broken", "A broken section", "fails on purpose",
                            ("no_such_benchmark.py",))
    monkeypatch.setattr(report, "SECTIONS", (broken,))
    assert report.main(["--output", str(out)]) == 0
    text = out.read_text()
    assert "old tables" not in text
    assert "## A broken section" in text
    assert "FAILED (exit" in text
    assert text.endswith("## History\n\n### 2026-11-22: a figure\n")
    assert f"Generated {datetime.now(UTC):%Y-%m-%d}" in text
