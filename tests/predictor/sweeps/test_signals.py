"""SIGTERM during a streamed sweep cleans up like Ctrl-C: the temporary folder is deleted, no
output folder appears, and the process exits 143 (128 + SIGTERM) without a traceback."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from .helpers import SMALL, write_spec

SCRIPT = """
import sys, time
from roofcast.predictor.sweeps import schedulers
from roofcast.predictor.sweeps.output import DatasetWriter
from roofcast.predictor.sweeps.spec import read_spec

@schedulers.register_scheduler("slow")
def slow(tasks, address, deliver):
    for task in tasks:
        deliver(task, schedulers.run_task(task))
        print("delivered", flush=True)
        time.sleep(60)

schedulers.run_sweep(read_spec(sys.argv[1]), "slow", cells_per_task=1,
                     sink=DatasetWriter(sys.argv[2]))
"""


@pytest.mark.parametrize(("sig", "rc"), [(signal.SIGTERM, 143), (signal.SIGINT, -signal.SIGINT)])
def test_signal_mid_sweep_leaves_no_temporary_files(tmp_path, sig, rc):
    spec = write_spec(tmp_path / "spec", SMALL)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(spec), str(out / "res")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "delivered"
        assert len(list(out.iterdir())) == 1  # the temporary folder, being written
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == rc
    assert list(out.iterdir()) == []
    if sig == signal.SIGTERM:
        assert "Traceback" not in err
