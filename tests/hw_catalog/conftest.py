"""Shared fixtures: the fixture device folder, its catalog and GPU, and an isolated, empty user
folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofcast.hw_catalog import load_catalog

DATA_DIR = Path(__file__).parent / "data"


@pytest.fixture
def fixture_dir() -> Path:
    """Folder with fixture-gpu, fixture-oldgpu (P4-like, no matrix unit) and a derived file."""
    return DATA_DIR


@pytest.fixture
def catalog(fixture_dir: Path, tmp_path: Path):
    """The fixture folder's catalog (no user folder)."""
    return load_catalog(fixture_dir, tmp_path / "none")


@pytest.fixture
def gpu(catalog):
    """The catalog's ``fixture-gpu``."""
    return catalog.devices["fixture-gpu"]


@pytest.fixture
def user_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user device folder selected through ROOFCAST_HW_DIR."""
    folder = tmp_path / "user-devices"
    folder.mkdir()
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(folder))
    return folder
