"""``roofcast app --address``: an empty or malformed address is refused (Streamlit would listen
on every interface without a word); an every-interface address starts with a warning line."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofcast.app.cli import main
from roofcast.app.commands import app as app_command


@pytest.mark.parametrize("address", ["", " ", "\t", "-h", "a b", "host\x1b[31m", "x" * 300])
def test_a_bad_address_is_refused_with_exit_2(address, capsys):
    with pytest.raises(SystemExit) as info:  # argparse's usage error
        main(["app", f"--address={address}"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "is not an address to listen on" in err
    assert "\x1b" not in err


class _FakeServer:
    def __init__(self, cmd):
        self.cmd = cmd

    def wait(self, timeout=None):
        return 0

    def terminate(self):
        pass


@pytest.mark.parametrize(("address", "warned"), [("0.0.0.0", True), ("::", True),
                                                  ("127.0.0.1", False), ("localhost", False)])
def test_every_interface_is_said_out_loud(address, warned, monkeypatch, capsys):
    started = []
    monkeypatch.setattr(app_command.subprocess, "Popen",
                        lambda cmd: started.append(cmd) or _FakeServer(cmd))
    assert main(["app", "--address", address]) == 0
    assert started[0][started[0].index("--server.address") + 1] == address
    err = capsys.readouterr().err
    assert ("listens on every interface" in err) is warned


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.text(max_size=40))
def test_an_accepted_address_is_one_plain_token(text):
    """Property: whatever text is given, the address either is refused by argparse's type or
    is a non-empty token without spaces, control characters or a leading '-'."""
    try:
        got = app_command._address(text)
    except argparse.ArgumentTypeError:
        return
    assert got == text
    assert got
    assert got.isascii()
    assert got.isprintable()
    assert not any(c.isspace() for c in got)
    assert not got.startswith("-")
