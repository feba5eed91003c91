"""Every test runs with Python's Ctrl-C handler, even when the suite was started in the
background by a shell without job control (SIGINT then arrives ignored): ``tests/conftest.py``
puts it back, so a test's children do not inherit an ignored SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys

CHILD = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"


def test_sigint_is_pythons_handler_here_and_in_a_child():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "False"
