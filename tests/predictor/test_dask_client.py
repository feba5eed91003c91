"""``predictor.dask_client``: the one ``--scheduler`` parser and client opener of sweeps and
distributed training (no cluster started here: the clusters run in
tests/predictor/sweeps/test_dask_cluster.py and tests/predictor/learned/test_distributed*.py)."""

from __future__ import annotations

import sys
import time

import pytest

from roofcast.predictor import dask_client as dc
from roofcast.predictor.errors import PredictionError


@pytest.mark.parametrize(("text", "spec"), [
    ("local", dc.SchedulerSpec("local")), ("", dc.SchedulerSpec("local")),
    (None, dc.SchedulerSpec("local")),
    ("dask-local:2", dc.SchedulerSpec("dask-local", workers=2)),
    (" dask-local:16 ", dc.SchedulerSpec("dask-local", workers=16)),
    ("dask://10.0.0.1:8786", dc.SchedulerSpec("dask", address="tcp://10.0.0.1:8786")),
])
def test_scheduler_texts(text, spec):
    assert dc.parse_scheduler(text) == spec
    assert spec.is_dask == (spec.kind != "local")


@pytest.mark.parametrize(("text", "message"), [
    ("yarn", "unknown scheduler 'yarn'; write local, dask-local:N or dask://HOST:PORT"),
    ("local:3", "scheduler 'local' takes no address"),
    ("dask-local:x", "write dask-local:N"), ("dask-local:0", "write dask-local:N"),
    ("dask-local", "write dask-local:N"), ("dask://nohost", "write dask://HOST:PORT"),
])
def test_bad_scheduler_texts_are_one_line_prediction_errors(text, message):
    with pytest.raises(PredictionError, match=message) as info:
        dc.parse_scheduler(text)
    assert isinstance(info.value, dc.DaskSchedulerError)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("text", "n"), [("2", 2), ("dask-local:3", 3), (" 1 ", 1)])
def test_local_workers_parsed(text, n):
    assert dc.parse_local_workers(text) == n


@pytest.mark.parametrize("text", ["", "0", "-1", "two", "1.5", str(dc.MAX_LOCAL_WORKERS + 1)])
def test_bad_local_workers_say_what_to_write(text):
    with pytest.raises(dc.DaskSchedulerError, match=r"write dask-local:N"):
        dc.parse_local_workers(text)


@pytest.mark.parametrize(("text", "url"), [
    ("10.0.0.5:8786", "tcp://10.0.0.5:8786"), ("dask://sched.local:8786", "tcp://sched.local:8786"),
    ("//h:1", "tcp://h:1"), ("tcp://h:65535", "tcp://h:65535"), ("[::1]:8786", "tcp://[::1]:8786"),
])
def test_remote_address_parsed(text, url):
    assert dc.parse_remote_address(text) == url


@pytest.mark.parametrize("text",
                         ["", "nohost", "h:port", "h:0", "h:70000", "h:1:2", ":8786", "a b:1"])
def test_bad_remote_address_says_what_to_write(text):
    with pytest.raises(dc.DaskSchedulerError, match=r"write dask://HOST:PORT"):
        dc.parse_remote_address(text)


def test_parsing_needs_no_dask(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # "import distributed" now fails
    assert dc.parse_scheduler("dask-local:2").workers == 2


def test_the_local_scheduler_has_no_client():
    with pytest.raises(dc.DaskSchedulerError, match="no Dask client"), dc.open_client("local"):
        pass


def test_an_unreachable_scheduler_fails_within_the_timeout(monkeypatch):
    monkeypatch.setattr(dc, "CONNECT_TIMEOUT_S", 1.0)
    start = time.perf_counter()
    with pytest.raises(dc.DaskSchedulerError,
                       match=r"cannot reach a Dask scheduler at tcp://127.0.0.1:1 within 1 s"), \
            dc.open_client("dask://127.0.0.1:1"):
        pass
    assert time.perf_counter() - start < 15  # 1 s timeout + connection teardown, not a hang
