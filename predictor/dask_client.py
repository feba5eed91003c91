"""One ``--scheduler`` text, one Dask client: shared by sweeps and distributed training.

``parse_scheduler(text) -> SchedulerSpec`` reads ``local`` (in process, no Dask),
``dask-local:N`` (a ``distributed.LocalCluster`` of N one-thread worker processes,
1 <= N <= ``MAX_LOCAL_WORKERS``, shut down with the client) or ``dask://HOST:PORT`` (a running
scheduler, left running). ``open_client(spec, worker_modules)`` is the context both users
enter (``PARSERS`` and ``OPENERS`` are the registries, keyed by the prefix); for ``dask://`` it
checks, each with its own one-line ``DaskSchedulerError``, that the scheduler answers within
``CONNECT_TIMEOUT_S``, has a worker within ``WORKERS_TIMEOUT_S`` and that every worker imports
``worker_modules``. The client is never the process's default. ``distributed`` is imported
only inside ``open_client``. Ctrl-C reaches this process alone and prints no Dask traceback;
closing is bounded by ``CLOSE_TIMEOUT_S``, then surviving local workers are killed.
Rationale: docs/design/module-notes.md.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from roofcast.predictor.errors import PredictionError

#: seconds to reach a ``dask://`` scheduler before giving up with a clear error
CONNECT_TIMEOUT_S = 10.0
#: seconds a ``dask://`` scheduler may take to have at least one worker
WORKERS_TIMEOUT_S = 30.0
#: the largest ``dask-local:N`` (each worker is a process importing the predictor)
MAX_LOCAL_WORKERS = 256
#: seconds the client and a local cluster each get to close
CLOSE_TIMEOUT_S = 10.0
#: seconds the workers of ``dask-local:N`` may take to start
LOCAL_START_TIMEOUT_S = 120.0

_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]+)$")
_FORMS = "local, dask-local:N or dask://HOST:PORT"


class DaskSchedulerError(PredictionError):
    """A ``--scheduler`` text is malformed, or its Dask cluster is unreachable or unusable: the
    message says what to write or start."""


@dataclass(frozen=True)
class SchedulerSpec:
    """A parsed ``--scheduler``: ``kind`` "local" | "dask-local" | "dask"; ``workers`` the N of
    ``dask-local:N`` (else 0); ``address`` the ``tcp://HOST:PORT`` of ``dask://`` (else "")."""

    kind: str
    workers: int = 0
    address: str = ""

    @property
    def is_dask(self) -> bool:
        return self.kind != "local"


# ---------------------------------------------------------------- parsing


def split_scheduler(text: str) -> tuple[str, str]:
    """``"dask://h:1"`` -> ``("dask", "h:1")``; ``"dask-local:2"`` -> ``("dask-local", "2")``;
    ``"local"`` -> ``("local", "")``."""
    text = text.strip()
    if "://" in text:
        prefix, address = text.split("://", 1)
    else:
        prefix, _, address = text.partition(":")
    return prefix.strip(), address.strip()


def parse_local_workers(address: str) -> int:
    """``"2"`` or ``"dask-local:2"`` -> 2 (1 <= N <= ``MAX_LOCAL_WORKERS``)."""
    text = address.strip().removeprefix("dask-local").removeprefix(":")
    if not text.isdigit() or not 1 <= int(text) <= MAX_LOCAL_WORKERS:
        raise DaskSchedulerError(
            f"bad scheduler 'dask-local:{text}': write dask-local:N with N the number of worker "
            f"processes, 1 to {MAX_LOCAL_WORKERS} (e.g. dask-local:2)")
    return int(text)


def parse_remote_address(address: str) -> str:
    """``"HOST:PORT"``, ``"//HOST:PORT"`` or ``"dask://HOST:PORT"`` -> ``"tcp://HOST:PORT"``."""
    text = address.strip()
    for prefix in ("dask://", "dask:", "tcp://", "//"):
        text = text.removeprefix(prefix)
    match = _HOST_PORT.match(text)
    if match is None or not 1 <= int(match["port"]) <= 65535:
        raise DaskSchedulerError(
            f"bad scheduler address {address!r}: write dask://HOST:PORT, the address "
            "`dask scheduler` prints (e.g. dask://10.0.0.5:8786), or dask-local:N for N "
            "workers on this machine")
    return f"tcp://{match['host']}:{match['port']}"


def _parse_local(address: str) -> SchedulerSpec:
    if address:
        raise DaskSchedulerError(f"scheduler 'local' takes no address (got {address!r})")
    return SchedulerSpec("local")


#: prefix -> address parser (``parse_scheduler``)
PARSERS: dict[str, Callable[[str], SchedulerSpec]] = {
    "local": _parse_local,
    "dask-local": lambda a: SchedulerSpec("dask-local", workers=parse_local_workers(a)),
    "dask": lambda a: SchedulerSpec("dask", address=parse_remote_address(a)),
}


def parse_scheduler(text: str | None) -> SchedulerSpec:
    """``local`` | ``dask-local:N`` | ``dask://HOST:PORT`` -> ``SchedulerSpec`` (module
    docstring); ``DaskSchedulerError`` for anything else."""
    prefix, address = split_scheduler(text or "local")
    parser = PARSERS.get(prefix)
    if parser is None:
        raise DaskSchedulerError(f"unknown scheduler {(text or '').strip()!r}; write {_FORMS}")
    return parser(address)


# ---------------------------------------------------------------- clients


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored within the block (main thread only): processes started meanwhile inherit
    that, so Ctrl-C reaches this process alone, not the workers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Ctrl-C within the block is held and raised as ``KeyboardInterrupt`` when it ends (main
    thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if pressed:
        raise KeyboardInterrupt


def _wait_workers(cluster: Any, n: int) -> None:
    """Poll (interruptible) until ``n`` workers are up, at most ``LOCAL_START_TIMEOUT_S``."""
    end = time.monotonic() + LOCAL_START_TIMEOUT_S
    while len(cluster.scheduler_info.get("workers", {})) < n:
        if time.monotonic() > end:
            raise DaskSchedulerError(f"the {n} local Dask worker(s) did not start within "
                                     f"{LOCAL_START_TIMEOUT_S:g} s; try fewer (dask-local:N) "
                                     "or --scheduler local")
        time.sleep(0.05)


def _wait_spawned(n: int, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Wait until ``n`` worker processes (multiprocessing children) exist, at most
    ``timeout_s``."""
    import psutil  # a dependency of distributed

    me = psutil.Process()
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        with contextlib.suppress(psutil.Error):
            spawned = [c for c in me.children() if "spawn_main" in " ".join(c.cmdline())]
            if len(spawned) >= n:
                return
        time.sleep(0.02)


def close_quietly(*closables: Any, quiet: bool = False) -> None:
    """``close(timeout=CLOSE_TIMEOUT_S)`` each of ``closables`` (a Client, a cluster; None
    skipped), never raising an ``Exception`` and with SIGINT ignored; with ``quiet`` (an
    interrupt), ``distributed``'s loggers are silenced meanwhile (workers being stopped log
    connection errors)."""
    log = logging.getLogger("distributed")
    level = log.level
    if quiet:
        log.setLevel(logging.CRITICAL + 1)
    try:
        with _sigint_ignored():  # a second Ctrl-C does not break the shutdown it waits for
            for item in closables:
                if item is not None:
                    with contextlib.suppress(Exception):
                        item.close(timeout=CLOSE_TIMEOUT_S)
    finally:
        log.setLevel(level)


def _children() -> set[int]:
    """Process ids of this process's descendants (psutil: a dependency of distributed)."""
    import psutil

    with contextlib.suppress(psutil.Error):
        return {p.pid for p in psutil.Process().children(recursive=True)}
    return set()


def kill_survivors(before: set[int]) -> None:
    """Kill every worker process (a multiprocessing ``spawn_main`` descendant) started since
    ``before`` that outlived its cluster's close, e.g. one stuck past the close timeout."""
    import psutil

    for pid in _children() - before:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if "spawn_main" in " ".join(proc.cmdline()):
                proc.kill()


@contextmanager
def _local_cluster(spec: SchedulerSpec, worker_modules: Sequence[str]) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    cluster = client = None
    interrupted = False
    before = _children()
    try:
        with _sigint_deferred():  # Ctrl-C inside distributed's start-up calls breaks them
            # workers log only critical records: a task's failure is its cells' error, and a
            # worker stopped mid-task would log its lost scheduler connection as a traceback
            cluster = LocalCluster(n_workers=0, threads_per_worker=1, processes=True,
                                   dashboard_address=":0", silence_logs=logging.CRITICAL)
            with _sigint_ignored():
                cluster.scale(spec.workers)
                _wait_spawned(spec.workers)
            client = Client(cluster, set_as_default=False)
        _wait_workers(cluster, spec.workers)
        yield client
    except BaseException:
        interrupted = True
        raise
    finally:
        close_quietly(client, cluster, quiet=interrupted)
        kill_survivors(before)


@contextmanager
def _remote(spec: SchedulerSpec, worker_modules: Sequence[str]) -> Iterator[Any]:
    from distributed import Client

    url = spec.address
    try:
        client = Client(url, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise DaskSchedulerError(
            f"cannot reach a Dask scheduler at {url} within {CONNECT_TIMEOUT_S:g} s ({exc}); "
            "start one (`dask scheduler`, then `dask worker " + url + "`) or use dask-local:N"
        ) from exc
    interrupted = False
    try:
        try:
            client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
        except TimeoutError as exc:
            raise DaskSchedulerError(
                f"the Dask scheduler at {url} has no workers after {WORKERS_TIMEOUT_S:g} s; "
                f"start some with `dask worker {url}` (roofcast installed on their machines)"
            ) from exc
        for module in worker_modules:
            try:
                client.run(importlib.import_module, module)
            except ImportError as exc:
                raise DaskSchedulerError(
                    f"a worker of the Dask cluster at {url} cannot import {module} ({exc}); "
                    "install roofcast (this version) in every worker's environment") from exc
        yield client
    except BaseException:
        interrupted = True
        raise
    finally:
        close_quietly(client, quiet=interrupted)


def _no_client(spec: SchedulerSpec, worker_modules: Sequence[str]) -> AbstractContextManager:
    raise DaskSchedulerError("scheduler 'local' runs in this process: it has no Dask client")


#: ``SchedulerSpec.kind`` -> ``(spec, worker_modules) -> context yielding a Client``
OPENERS: dict[str, Callable[[SchedulerSpec, Sequence[str]], AbstractContextManager]] = {
    "local": _no_client, "dask-local": _local_cluster, "dask": _remote}


def open_client(scheduler: str | SchedulerSpec,
                worker_modules: Sequence[str] = ()) -> AbstractContextManager:
    """A context yielding a ``distributed.Client`` for ``scheduler`` (module docstring): a
    fresh LocalCluster (shut down on exit) or a checked connection to a running scheduler
    (closed on exit, the cluster left running). ``worker_modules``: modules every worker of a
    ``dask://`` cluster must import."""
    spec = scheduler if isinstance(scheduler, SchedulerSpec) else parse_scheduler(scheduler)
    return OPENERS[spec.kind](spec, tuple(worker_modules))
