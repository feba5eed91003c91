"""``roofcast train --from`` / ``roofcast.train(sources=)``: an empty source list is refused
(it used to train on the defaults silently) and so is a source named twice (its rows counted
twice), before any data is read."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofcast
from roofcast.api_checks import distinct_names
from roofcast.app.cli import main
from roofcast.predictor.errors import PredictionError
from tests.hostile.helpers import deadline


@pytest.mark.parametrize(("given", "words"), [
    (["--from", ""], "needs one or more names"),
    (["--from", ",,,"], "needs one or more names"),
    (["--from", " , "], "needs one or more names"),
    (["--from", "bundled,bundled"], "'bundled' more than once"),
    (["--from", "bundled", "--from", "public,bundled"], "'bundled' more than once"),
])
def test_cli_refuses_empty_or_repeated_sources(given, words, capsys):
    with deadline(30):
        assert main(["train", *given, "--no-save"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--from" in err
    assert words in err


@pytest.mark.parametrize(("sources", "error"), [
    ([], ValueError), (["bundled", "bundled"], ValueError), ("bundled", TypeError),
    ([""], ValueError), ([None], ValueError), (42, TypeError),
])
def test_the_api_refuses_them_too(sources, error):
    with pytest.raises(error, match="sources="):
        roofcast.train(sources)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.lists(st.one_of(st.sampled_from(["bundled", "public", "store", " ", ""]),
                          st.text(max_size=6)), max_size=5))
def test_distinct_names_keeps_each_nonempty_name_once_or_refuses(values):
    """Property: the result is the stripped names, all non-empty and distinct; anything else
    is a refusal."""
    stripped = [v.strip() for v in values]
    try:
        got = distinct_names(values, "from", "bundled,public")
    except PredictionError:
        assert not stripped or "" in stripped or len(set(stripped)) < len(stripped)
        return
    assert got == stripped
    assert all(got)
    assert len(set(got)) == len(got)
