"""Contract tests over every built-in device file (these cover every data file in the repo)."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import pytest

from roofcast.hw_catalog import BUILTIN_DIR, load_catalog
from roofcast.hw_catalog.catalog import normalize_name, read_toml
from roofcast.hw_catalog.schema import PEAK_FIELDS, get_path
from roofcast.hw_catalog.validate import RANGES, validate_document

DEVICE_FILES = sorted(BUILTIN_DIR.glob("*.toml"))
EMPTY = Path("/nonexistent-roofcast-user-folder")


def _catalog():
    return load_catalog(BUILTIN_DIR, EMPTY)


def test_there_are_device_files():
    assert len(DEVICE_FILES) >= 1


@pytest.mark.parametrize("path", DEVICE_FILES, ids=lambda p: p.stem)
def test_file_validates_and_names_its_sources(path: Path):
    doc = read_toml(path)
    validate_document(doc, str(path), derived="base" in doc)
    assert doc["id"] == path.stem
    if "base" not in doc:
        assert len(doc["sources"]) >= 1
        assert all(len(s.strip()) >= 10 for s in doc["sources"]), "a source must say something"
        assert "release_year" in doc, "built-in files give release_year"
        assert get_path(doc, ("power", "tdp_W")) is not None, "built-in files give tdp_W"


@pytest.mark.parametrize("path", DEVICE_FILES, ids=lambda p: p.stem)
def test_magnitudes_plausible_for_kind(path: Path):
    spec = _catalog().devices[path.stem]
    doc = read_toml(path)
    for f in PEAK_FIELDS:
        value = get_path(doc, f.path)
        if value is not None:
            lo, hi = RANGES[f.range_key][spec.kind]
            assert lo <= value <= hi
    lo, hi = RANGES["memory.bandwidth_GBps"][spec.kind]
    assert lo * 1e9 <= spec.mem_bw_Bps <= hi * 1e9
    assert spec.mem_capacity_bytes > spec.l2_bytes, "memory is larger than the last-level cache"
    # a matrix unit is never slower than the vector unit for the same dtype
    for (engine, dtype), value in spec.peak_flops.items():
        vec = spec.peak_flops.get(("vector", dtype))
        if engine == "matrix" and vec is not None:
            assert value >= vec * 0.99, f"matrix {dtype} slower than vector {dtype}"


@pytest.mark.parametrize("path", DEVICE_FILES, ids=lambda p: p.stem)
def test_fp32_peaks_resolve(path: Path):
    """Predictors need an fp32 peak on both engines for every device (fallbacks allowed)."""
    spec = _catalog().devices[path.stem]
    for engine in ("matrix", "vector"):
        lookup = spec.peak(engine, "float")
        assert math.isfinite(lookup.flops_per_s)
        assert lookup.flops_per_s > 0


def test_ids_and_aliases_unique_across_files():
    seen: dict[str, str] = {}
    for path in DEVICE_FILES:
        doc = read_toml(path)
        for name in {normalize_name(n) for n in [doc["id"], doc.get("name", ""),
                                                  *doc.get("aliases", [])] if n}:
            assert name not in seen or seen[name] == doc["id"], (
                f"{name!r} used by {seen.get(name)} and {doc['id']}")
            seen[name] = doc["id"]


def test_whole_catalog_loads_and_specs_hash_and_pickle():
    catalog = _catalog()
    assert set(catalog.devices) == {p.stem for p in DEVICE_FILES}
    for spec in catalog.devices.values():
        assert pickle.loads(pickle.dumps(spec)) == spec
        assert isinstance(hash(spec), int)


@pytest.mark.parametrize("path", DEVICE_FILES, ids=lambda p: p.stem)
def test_every_alias_resolves_to_its_device(path: Path):
    catalog = _catalog()
    doc = read_toml(path)
    for name in [doc["id"], *doc.get("aliases", [])]:
        assert catalog.resolve(name) == doc["id"]
