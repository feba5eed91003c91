"""Every test sees an empty user data folder and no learned-model override, never the
developer's: an installed active model (``roofcast models use``) or ``$ROOFCAST_LEARNED_MODEL``
would change what ``--estimator learned|auto`` predicts, and the measurement store lives there.
The user runtime folder is an empty one too (a developer's own execution profiles stay out).
Hypothesis keeps no example database and its other files in a temporary folder: no
``.hypothesis/`` appears in the current folder, which the hostile corpus watches."""

from __future__ import annotations

import atexit
import shutil
import tempfile

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

settings.register_profile("roofcast", database=None)
settings.load_profile("roofcast")
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="roofcast-hypothesis-")
set_hypothesis_home_dir(_HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def _own_user_data(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ROOFCAST_DATA_DIR", str(tmp_path_factory.mktemp("roofcast-data")))
    monkeypatch.delenv("ROOFCAST_LEARNED_MODEL", raising=False)
    monkeypatch.setenv("ROOFCAST_RUNTIME_DIR", str(tmp_path_factory.mktemp("roofcast-runtimes")))
