"""``roofcast app``: the Streamlit command line it runs and its option checks (the server itself
is started by test_e2e_browser.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from roofcast.app.cli import build_parser, main
from roofcast.app.commands.app import APP_SCRIPT, streamlit_command


def test_command_runs_the_app_script_headless_on_the_port():
    cmd = streamlit_command(8765, "127.0.0.1")
    assert cmd[:4] == [sys.executable, "-m", "streamlit", "run"]
    assert Path(cmd[4]) == APP_SCRIPT
    assert APP_SCRIPT.is_file()
    pairs = dict(zip(cmd[5::2], cmd[6::2], strict=True))
    assert pairs["--server.headless"] == "true"
    assert pairs["--server.port"] == "8765"
    assert pairs["--server.address"] == "127.0.0.1"
    assert pairs["--server.maxUploadSize"] == "200"
    assert "--server.port" not in streamlit_command()


def test_app_is_a_registered_subcommand():
    args = build_parser().parse_args(["app", "--port", "9000"])
    assert args.port == 9000


@pytest.mark.parametrize("port", ["0", "70000", "http"])
def test_bad_port_is_refused(port, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["app", "--port", port])
    assert exc.value.code == 2
    assert "port" in capsys.readouterr().err
