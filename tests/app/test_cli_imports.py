"""Building the CLI parser imports nothing heavy, so `roofcast --help` answers at once.

Each check runs in a fresh interpreter (this test process has imported everything already)
and lists the heavy packages that ended up in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from roofcast.app.cli import COMMAND_MODULES

HEAVY = ("numpy", "pandas", "onnx", "networkx", "sklearn", "scipy", "xgboost", "streamlit",
         "onnxruntime", "plotly")

PROBE = """
import contextlib, io, json, sys
from roofcast.app.cli import build_parser
parser = build_parser()
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    parser.parse_args(sys.argv[1:])
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


def heavy_modules_after(*argv: str) -> list[str]:
    """The heavy packages imported by building the parser and parsing ``argv``."""
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


@pytest.mark.parametrize("argv", [
    ("--help",),
    ("hw", "list"),
    *((name, "--help") for name in COMMAND_MODULES),
    ("hw", "show", "--help"),
    ("data", "import", "--help"),
    ("predict", "resnet50", "--hw", "t4"),
    ("predict", "resnet50", "--hw", "t4", "--runtime", "pytorch-eager", "--no-fusion"),
    ("runtimes", "show", "--help"),
    ("inspect", "resnet50", "--top", "0", "--format", "csv"),
])
def test_parsing_imports_nothing_heavy(argv):
    assert heavy_modules_after(*argv) == []


RUN_PROBE = """
import contextlib, io, json, sys
from roofcast.app.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps([code, sorted(m for m in {heavy} if m in sys.modules)]))
"""


def test_inspect_runs_without_table_or_learning_libraries():
    """``roofcast inspect`` needs onnx (and numpy under it) but neither pandas nor the learned
    side: each of those costs a large part of its half-second budget."""
    proc = subprocess.run([sys.executable, "-c", RUN_PROBE.format(heavy=HEAVY), "inspect",
                           "resnet50"], capture_output=True, text=True, check=True)
    code, heavy = json.loads(proc.stdout)
    assert code == 0
    assert "onnx" in heavy  # the probe sees imports: inspecting does import the model
    assert not {"pandas", "sklearn", "scipy", "xgboost", "streamlit", "plotly"} & set(heavy)
