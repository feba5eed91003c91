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


def as_from_a_shell() -> None:
    """Start the child as a terminal would: SIGINT/SIGTERM at their defaults and unblocked. A
    child inherits an ignored SIGINT, and an earlier test in the same pytest worker can leave
    one ignored (both tests below then fail exactly as in a full ``-n 2`` run)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("sig", "rc"), [(signal.SIGTERM, 143), (signal.SIGINT, -signal.SIGINT)])
def test_signal_mid_sweep_leaves_no_temporary_files(tmp_path, sig, rc):
    spec = write_spec(tmp_path / "spec", SMALL)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(spec), str(out / "res")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_from_a_shell)
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


LONG_SPEC = """[sweep]
models = ["resnet50", "bert_base"]
devices = ["kind:gpu", "kind:cpu"]
batches = [1, 2, 4, 8, 16, 32, 64]
modes = ["infer", "train"]
precisions = ["fp32", "fp16"]
"""


def test_ctrl_c_under_dask_local_prints_no_traceback_and_leaves_nothing(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group, twice) mid-sweep on dask-local:2: one
    line, no traceback, no temporary folder, no worker process left."""
    import os
    import time

    (tmp_path / "s.toml").write_text(LONG_SPEC)
    proc = subprocess.Popen([sys.executable, "-m", "roofcast.app.cli", "sweep", "s.toml",
                             "--scheduler", "dask-local:2", "--output", "out"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=as_from_a_shell)
    try:
        line = ""
        while "cells" not in line:  # the progress bar: the sweep has been planned
            line = proc.stderr.readline()
            assert line, "the sweep ended before it could be interrupted"
        time.sleep(3)
        for _ in range(2):
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.5)
        err = proc.stderr.read()
        proc.wait(timeout=120)
    finally:
        proc.kill()
    # 130 from the CLI, or killed by the second SIGINT while the interpreter exits
    assert proc.returncode in (130, -signal.SIGINT)
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]
    time.sleep(2)
    with pytest.raises(ProcessLookupError):  # no process of its group is left
        os.killpg(proc.pid, 0)
