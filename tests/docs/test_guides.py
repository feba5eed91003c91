"""The README is a user guide: short, its two command lines the ones CI runs, and every relative
link of the README and ``docs/*.md`` points at a file or folder of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_short_guide():
    assert len(README.read_text().splitlines()) <= 200


def test_the_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in README.read_text().splitlines()
    assert ("python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/roofcast app"
            in README.read_text().splitlines())


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_relative_links_resolve(guide):
    targets = [t.split("#")[0] for t in LINK.findall(guide.read_text())
               if not t.startswith(("http://", "https://", "#"))]
    missing = [t for t in targets if t and not (guide.parent / t).exists()]
    assert missing == []
    assert guide != README or len(targets) > 10  # the pattern finds the README's links
