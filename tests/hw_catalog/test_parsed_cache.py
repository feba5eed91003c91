"""The parsed device-file cache: a catalog read from it equals one parsed afresh; an edited file,
a damaged or foreign entry, or a document JSON cannot hold is parsed afresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import roofcast.hw_catalog.catalog as catalog_module
from roofcast.disk_cache import used
from roofcast.hw_catalog import load_catalog
from roofcast.hw_catalog.parsed_cache import ENTRY, ParsedFiles, code_digest


@pytest.fixture
def entry(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "roofcast" / "catalog" / ENTRY


def fresh_catalog(fixture_dir: Path, user: Path):
    catalog_module._load_cached.cache_clear()  # the in-process cache would answer first
    return load_catalog(fixture_dir, user)


def test_a_catalog_from_the_cache_equals_one_parsed_afresh(fixture_dir, tmp_path, entry,
                                                           monkeypatch):
    parsed = fresh_catalog(fixture_dir, tmp_path / "none")
    assert not entry.exists()  # off outside used()
    with used():
        fresh_catalog(fixture_dir, tmp_path / "none")
    stored = json.loads(entry.read_text())
    assert stored["code"] == code_digest()
    assert len(stored["docs"]) == len(list(fixture_dir.glob("*.toml")))

    def no_toml(data, label):
        raise AssertionError(f"{label} parsed again")

    monkeypatch.setattr("roofcast.hw_catalog.parsed_cache.parse_toml", no_toml)
    with used():
        cached = fresh_catalog(fixture_dir, tmp_path / "none")
    assert cached.devices == parsed.devices
    assert cached.names == parsed.names


def test_an_edited_file_is_parsed_afresh(entry):
    first = b'id = "x"\nvalue = 1\n'
    with used():
        files = ParsedFiles()
        assert files.parse(first, "x.toml") == {"id": "x", "value": 1}
        files.save()
        again = ParsedFiles()
    assert list(again.known.values()) == [{"id": "x", "value": 1}]
    assert again.parse(b'id = "x"\nvalue = 2\n', "x.toml") == {"id": "x", "value": 2}


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],
    lambda text: "[" * 100_000,
    lambda text: json.dumps({**json.loads(text), "code": "another parser"}),
    lambda text: json.dumps({**json.loads(text), "docs": ["not", "a", "mapping"]}),
])
def test_a_damaged_or_foreign_entry_is_ignored_and_rewritten(entry, damage):
    data = b'id = "x"\nvalue = 1\n'
    with used():
        files = ParsedFiles()
        files.parse(data, "x.toml")
        files.save()
        entry.write_text(damage(entry.read_text()))
        again = ParsedFiles()
        assert again.known == {}
        assert again.parse(data, "x.toml") == {"id": "x", "value": 1}
        again.save()
        assert len(ParsedFiles().known) == 1


def test_a_document_json_cannot_hold_is_not_stored(entry):
    with used():
        files = ParsedFiles()
        doc = files.parse(b'id = "x"\nwhen = 2026-11-28\nodd = nan\n', "x.toml")
        files.save()
    assert doc["id"] == "x"
    assert not entry.exists()
