"""Shared helpers of the hostile-input tests: a deadline for in-process checks, and a fork
server that runs the CLI as ``python -m roofcast.app.cli`` would, without paying Python's,
pandas' and roofcast's start-up (~1 s of CPU) for each of the corpus' ~400 cases: one warm
interpreter with the modules imported (imports only: no cache filled, no environment read) forks
a fresh child per run, in a new session, under the same address-space limit, folder, environment
and wall-clock limit, and reports exit code, peak RSS and whether it was killed as hung."""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block takes longer than ``seconds``."""
    def _timeout(signum, frame):
        raise TimeoutError(f"still running after {seconds} s (a hang)")

    old = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


SERVER = Path(__file__).with_name("fork_server.py")


class ForkServer:
    """A warm interpreter (``fork_server.py``) answering one CLI run per request, one at a time;
    ``run_cli`` has the signature of ``benchmarks/hostile_inputs.py``'s ``_run_cli``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            cwd=tempfile.gettempdir(), text=True, bufsize=1)

    def run_cli(self, argv, cwd, env, out_err, mem_gib, timeout_s):
        request = {"argv": [str(a) for a in argv], "cwd": str(cwd), "env": dict(env),
                   "out": str(out_err[0]), "err": str(out_err[1]),
                   "mem_bytes": int(mem_gib * 2**30), "timeout_s": float(timeout_s)}
        for path in out_err:  # there even if the child dies before it opens them
            Path(path).write_bytes(b"")
        with self._lock:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fork server ended (exit {self._proc.poll()})")
        reply = json.loads(line)
        usage = SimpleNamespace(ru_maxrss=reply["maxrss_kib"])
        return reply["rc"], usage, reply["hung"], reply["seconds"]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class ForkPool:
    """``count`` fork servers; ``run_cli`` takes whichever is free (one run per server at once)."""

    def __init__(self, count: int) -> None:
        self._free: queue.Queue[ForkServer] = queue.Queue()
        self._all: list[ForkServer] = []
        for _ in range(count):
            server = ForkServer()
            self._all.append(server)
            self._free.put(server)

    def run_cli(self, *args):
        server = self._free.get()
        try:
            return server.run_cli(*args)
        finally:
            self._free.put(server)

    def close(self) -> None:
        for server in self._all:
            server.close()


@contextlib.contextmanager
def fork_pool(count: int) -> Iterator[ForkPool]:
    """A ``ForkPool`` of ``count`` servers, closed (and killed if need be) on the way out."""
    pool = ForkPool(count)
    try:
        yield pool
    finally:
        pool.close()
