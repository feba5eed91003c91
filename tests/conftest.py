"""Every test sees an empty user data folder and no learned-model override, never the
developer's: an installed active model (``roofcast models use``) or ``$ROOFCAST_LEARNED_MODEL``
would change what ``--estimator learned|auto`` predicts, and the measurement store lives there.
The user runtime folder is an empty one too (a developer's own execution profiles stay out),
and so is the cache folder (``$XDG_CACHE_HOME``: the CLI's graph cache never reaches ~/.cache).
Hypothesis keeps no example database and its other files in a temporary folder: no
``.hypothesis/`` appears in the current folder, which the hostile corpus watches.
SIGINT is Python's Ctrl-C handler in every test, as in a terminal: a suite started in the
background by a shell without job control inherits SIGINT ignored (POSIX), which every child
of a test would inherit too; and a test that changes the handler without restoring it fails.
The modules of ``LONG_FIRST`` are collected first: with ``--dist worksteal`` the two workers then
end on short tests, not one of them on a minute-long browser test while the other waits."""

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
#: modules holding the suite's longest tests (10-55 s each on 2 cores, `pytest --durations`)
LONG_FIRST = ("tests/app/test_e2e_browser.py", "tests/training_data/test_recount_work.py",
              "tests/hostile/test_corpus.py", "tests/acceptance/test_zoo_counts.py",
              "tests/benchmarks/test_tp_pp_serving.py", "tests/predictor/test_invariants.py",
              "tests/hostile/test_fuzz.py", "tests/test_import_structure.py")
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # `pytest &` from a script
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``LONG_FIRST`` modules first (stable: the order inside a module is kept)."""
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        return LONG_FIRST.index(path) if path in LONG_FIRST else len(LONG_FIRST)

    items.sort(key=rank)


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
