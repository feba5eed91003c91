"""Every test sees an empty user data folder and no learned-model override, never the
developer's: an installed active model (``roofcast models use``) or ``$ROOFCAST_LEARNED_MODEL``
would change what ``--estimator learned|auto`` predicts, and the measurement store lives there.
The user runtime folder is an empty one too (a developer's own execution profiles stay out),
and so is the cache folder (``$XDG_CACHE_HOME``: the CLI's graph cache never reaches ~/.cache).
Hypothesis keeps no example database and its other files in a temporary folder: no
``.hypothesis/`` appears in the current folder, which the hostile corpus watches.
SIGINT is Python's Ctrl-C handler in every test, as in a terminal: a suite started in the
background by a shell without job control inherits SIGINT ignored (POSIX), which every child
of a test would inherit too; and a test that changes the handler without restoring it fails."""

from __future__ import annotations

import atexit
import shutil
import signal
import tempfile

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

settings.register_profile("roofcast", database=None)
settings.load_profile("roofcast")
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="roofcast-hypothesis-")
set_hypothesis_home_dir(_HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # `pytest &` from a script
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _sigint_restored():
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        pytest.fail(f"the test left SIGINT's handler {after!r} (was {before!r}): restore it "
                    "in a finally/fixture")


@pytest.fixture(autouse=True)
def _own_user_data(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ROOFCAST_DATA_DIR", str(tmp_path_factory.mktemp("roofcast-data")))
    monkeypatch.delenv("ROOFCAST_LEARNED_MODEL", raising=False)
    monkeypatch.setenv("ROOFCAST_RUNTIME_DIR", str(tmp_path_factory.mktemp("roofcast-runtimes")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("roofcast-cache")))
