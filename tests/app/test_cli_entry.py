"""The console script ``entry()``: ``main()``'s exit code and output, atexit handlers run, and
the interpreter's teardown skipped only when the main thread is alone.

Each case runs in a fresh interpreter: ``entry`` ends the process.
"""

from __future__ import annotations

import subprocess
import sys

from roofcast.app.cli import main

RUN = """
import atexit, sys, threading
atexit.register(lambda: print("atexit ran", file=sys.stderr))
if {thread}:
    def late() -> None:  # a non-daemon thread still running when the command ends
        threading.Event().wait(2.0)
        print("thread ended", file=sys.stderr, flush=True)
    threading.Thread(target=late).start()
sys.argv = ["roofcast", *{argv!r}]
from roofcast.app.cli import entry
entry()
"""


def run_entry(*argv: str, thread: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN.format(argv=list(argv), thread=thread)],
                          capture_output=True, text=True, timeout=120)


def test_entry_prints_what_main_prints_and_runs_atexit(capsys) -> None:
    assert main(["hw", "list"]) == 0
    expected = capsys.readouterr().out
    proc = run_entry("hw", "list")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected  # flushed in full before the process ends
    assert proc.stderr.strip().splitlines()[-1] == "atexit ran"


def test_entry_keeps_a_user_errors_exit_code_and_line() -> None:
    proc = run_entry("hw", "show", "no-such-device")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("roofcast hw: error: ")
    assert lines[-1] == "atexit ran"


def test_entry_exits_normally_while_another_thread_runs() -> None:
    proc = run_entry("hw", "list", thread=True)
    assert proc.returncode == 0
    assert proc.stdout.startswith("devices: ")
    assert proc.stderr.strip().splitlines()[-2:] == ["thread ended", "atexit ran"]
