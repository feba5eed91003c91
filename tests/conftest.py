"""Every test sees an empty user data folder and no learned-model override, never the
developer's: an installed active model (``roofcast models use``) or ``$ROOFCAST_LEARNED_MODEL``
would change what ``--estimator learned|auto`` predicts, and the measurement store lives there.
The user runtime folder is an empty one too (a developer's own execution profiles stay out)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_user_data(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ROOFCAST_DATA_DIR", str(tmp_path_factory.mktemp("roofcast-data")))
    monkeypatch.delenv("ROOFCAST_LEARNED_MODEL", raising=False)
    monkeypatch.setenv("ROOFCAST_RUNTIME_DIR", str(tmp_path_factory.mktemp("roofcast-runtimes")))
