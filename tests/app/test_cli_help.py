"""`roofcast --help`, every command's help and `roofcast --version` are for users: no
reStructuredText marks, no module paths of the code base."""

from __future__ import annotations

import argparse
import re

import pytest

import roofcast
from roofcast.app.cli import build_parser, main

#: a module path of the code base (``predictor.sweep``, ``app.commands``, ``roofcast.api``)
MODULE_PATH = re.compile(r"\b(?:predictor|app|graph_import|hw_catalog|training_data)\.[a-z_]+"
                         r"|\broofcast\.(?:api|parallel_api|app|predictor)\b")


def every_parser(parser: argparse.ArgumentParser, name: str = "roofcast"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from every_parser(sub, f"{name} {sub_name}")


PARSERS = dict(every_parser(build_parser()))


def test_every_command_is_walked():
    assert {"roofcast predict", "roofcast hw list", "roofcast sweep"} <= set(PARSERS)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_help_is_plain_text_for_users(name):
    text = PARSERS[name].format_help()
    assert "``" not in text
    assert MODULE_PATH.findall(text) == []


def test_root_help_describes_the_tool_not_the_code():
    text = PARSERS["roofcast"].format_help()
    assert "subcommand per module" not in text
    assert "Predict the time, memory and cost" in text
    assert "--version" in text


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"roofcast {roofcast.__version__}"
