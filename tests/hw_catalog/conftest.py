"""Shared fixtures: the fixture device folder and an isolated, empty user folder."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA_DIR = Path(__file__).parent / "data"


@pytest.fixture
def fixture_dir() -> Path:
    """Folder with fixture-gpu, fixture-oldgpu (P4-like, no matrix unit) and a derived file."""
    return DATA_DIR


@pytest.fixture
def user_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user device folder selected through ROOFCAST_HW_DIR."""
    folder = tmp_path / "user-devices"
    folder.mkdir()
    monkeypatch.setenv("ROOFCAST_HW_DIR", str(folder))
    return folder
