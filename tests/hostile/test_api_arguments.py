"""The Python API and the CLI flags it serves refuse bad arguments before any work: a wrong
type is a one-line ``TypeError``, a value out of range a one-line ``ValueError``, each naming
the keyword (the flag on the CLI) and what is allowed; the upper bounds of
``graph_import.budgets`` are raisable by their environment variable; no empty result without a
reason and no silent default for a value given (``roofcast.api_checks``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofcast
from roofcast import api_checks
from roofcast.app.cli import main
from roofcast.graph_import.budgets import BATCH, GLOBAL_BATCH, TOKENS
from roofcast.predictor.errors import PredictionError
from tests.hostile.helpers import deadline

LLM = "llama-3.1-8b"
SYSTEM = "hgx-h100"

#: (call, error type, words the one-line message must hold)
CALLS = {
    "llm hw=42": (lambda: roofcast.llm(LLM, 42), TypeError, ["hw=42", "device id"]),
    "llm system=123": (lambda: roofcast.llm(LLM, system=123), TypeError, ["system=123"]),
    "llm system=[id]": (lambda: roofcast.llm(LLM, system=[SYSTEM]), TypeError, ["system="]),
    "plan system=42": (lambda: roofcast.plan(LLM, 42), TypeError, ["system=42"]),
    "plan global_batch='64'": (lambda: roofcast.plan(LLM, SYSTEM, global_batch="64"),
                               TypeError, ["global_batch=", "'64'", "integer from 1 to"]),
    "llm input_tokens=nan": (lambda: roofcast.llm(LLM, "h100-sxm", input_tokens=math.nan),
                             TypeError, ["input_tokens=", "nan"]),
    "plan global_batch=0": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=0), ValueError,
                            ["global_batch=", "got 0"]),
    "plan global_batch=-8": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=-8), ValueError,
                             ["global_batch=", "got -8"]),
    "plan global_batch=64.5": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=64.5),
                               TypeError, ["global_batch=", "64.5"]),
    "plan global_batch=nan": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=math.nan),
                              TypeError, ["global_batch=", "nan"]),
    "plan global_batch=True": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=True),
                               TypeError, ["global_batch="]),
    "plan serve global_batch=0": (
        lambda: roofcast.plan(LLM, SYSTEM, mode="serve", global_batch=0), ValueError,
        ["global_batch="]),
    "plan seq_tokens=0": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=64, seq_tokens=0),
                          ValueError, ["seq_tokens=", "got 0"]),
    "plan zero=[5]": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=64, zero=[5]),
                      TypeError, ["zero="]),
    "plan mode=fly": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=64, mode="fly"),
                      ValueError, ["mode", "train"]),
    "predict system global_batch=0": (
        lambda: roofcast.predict(LLM, system=SYSTEM, global_batch=0), ValueError,
        ["global_batch=", "got 0"]),
    "predict batch=0": (lambda: roofcast.predict("resnet50", "h100-sxm", batch=0), ValueError,
                        ["batch=", "got 0"]),
    "predict hw=['h100-sxm']": (lambda: roofcast.predict("resnet50", ["h100-sxm"]), TypeError,
                                ["hw="]),
    "compare hws='h100-sxm'": (lambda: roofcast.compare("resnet50", "h100-sxm"), TypeError,
                               ["hws", "list"]),
    "sweep batches=5": (lambda: roofcast.sweep("resnet50", ["h100-sxm"], 5), TypeError,
                        ["batches"]),
    "device(42)": (lambda: roofcast.device(42), TypeError, ["hw=42"]),
    "system(42)": (lambda: roofcast.system(42), TypeError, ["system=42"]),
    "compare hws=[42]": (lambda: roofcast.compare("resnet50", [42]), TypeError, ["hw=42"]),
    "sweep precisions='fp32'": (
        lambda: roofcast.sweep("resnet50", ["h100-sxm"], [1], precisions="fp32"), TypeError,
        ["precisions", "'fp32'"]),
    "train devices=5": (lambda: roofcast.train(["bundled"], devices=5), TypeError,
                        ["devices="]),
    "llm batch=10**30": (lambda: roofcast.llm(LLM, "h100-sxm", batch=10**30), ValueError,
                         ["batch=", str(10**30), "ROOFCAST_MAX_BATCH"]),
    "llm concurrency='lots'": (lambda: roofcast.llm(LLM, "h100-sxm", concurrency="lots"),
                               TypeError, ["concurrency="]),
    "llm tp=0": (lambda: roofcast.llm(LLM, system=SYSTEM, tp=0), ValueError, ["tp="]),
    "plan devices=8*10**12": (
        lambda: roofcast.plan(LLM, hw="rtx-3090", devices=8 * 10**12, global_batch=8),
        ValueError, ["devices=", "ROOFCAST_MAX_DEVICES"]),
    "plan global_batch=2**31": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=2**31),
                                ValueError, ["global_batch=", "ROOFCAST_MAX_GLOBAL_BATCH"]),
    "plan global_batch=10**18": (lambda: roofcast.plan(LLM, SYSTEM, global_batch=10**18),
                                 ValueError, ["global_batch=", "ROOFCAST_MAX_GLOBAL_BATCH"]),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(CALLS))
def test_the_api_refuses_bad_arguments_before_any_work(case):
    call, error, words = CALLS[case]
    with deadline(30), pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    assert "--" not in message  # the Python surface names keywords, not flags
    for word in words:
        assert word in message, message


#: (argv, the flag, the variable that raises the limit) of the issue's unbounded flags
FLAGS = [
    (["plan", LLM, "--system", SYSTEM, "--global-batch", "2147483648"], "--global-batch",
     "ROOFCAST_MAX_GLOBAL_BATCH"),
    (["plan", LLM, "--system", SYSTEM, "--global-batch", str(10**18)], "--global-batch",
     "ROOFCAST_MAX_GLOBAL_BATCH"),
    (["predict", "resnet50", "--hw", "rtx-3090", "--devices", "8000000000000"], "--devices",
     "ROOFCAST_MAX_DEVICES"),
    (["llm", LLM, "--hw", "h100-sxm", "--batch", str(10**30)], "--batch", "ROOFCAST_MAX_BATCH"),
    (["llm", LLM, "--hw", "h100-sxm", "--input-tokens", str(2**30)], "--input-tokens",
     "ROOFCAST_MAX_TOKENS"),
    (["llm", LLM, "--hw", "h100-sxm", "--concurrency", str(2**30)], "--concurrency",
     "ROOFCAST_MAX_BATCH"),
    (["plan", LLM, "--system", SYSTEM, "--mode", "serve", "--seq", str(2**30)], "--seq",
     "ROOFCAST_MAX_TOKENS"),
    (["advise", "resnet50", "--hw", "h100-sxm", "--max-batch", str(10**11)], "--max-batch",
     "ROOFCAST_MAX_BATCH"),
    (["predict", LLM, "--system", SYSTEM, "--global-batch", "64", "--tp", str(10**11)], "--tp",
     "ROOFCAST_MAX_DEVICES"),
    (["predict", LLM, "--system", SYSTEM, "--global-batch", "64", "--micro-batches",
      str(10**11)], "--micro-batches", "ROOFCAST_MAX_GLOBAL_BATCH"),
    (["llm", LLM, "--hw", "h100-sxm", "--devices", str(10**11), "--tp", "2"], "--devices",
     "ROOFCAST_MAX_DEVICES"),
    (["sweep", "resnet50", "--hw", "h100-sxm", "--batches", f"1,{10**11}"], "--batches",
     "ROOFCAST_MAX_BATCH"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("argv", "flag", "variable"), FLAGS, ids=lambda v: str(v)[:40])
def test_cli_bounds_name_the_flag_the_range_and_the_variable(argv, flag, variable, capsys):
    with deadline(30):
        assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert flag in err
    assert variable in err
    assert "allowed: 1 to" in err


def test_a_limit_is_raisable_by_its_variable(monkeypatch):
    monkeypatch.setenv("ROOFCAST_MAX_BATCH", "10")
    with pytest.raises(ValueError, match="ROOFCAST_MAX_BATCH"):
        api_checks.batch(11)
    assert api_checks.batch(10) == 10
    monkeypatch.setenv("ROOFCAST_MAX_BATCH", "2000000")
    assert api_checks.batch(2_000_000) == 2_000_000
    monkeypatch.setenv("ROOFCAST_MAX_BATCH", "many")
    with pytest.raises(ValueError, match="ROOFCAST_MAX_BATCH='many' is not a positive integer"):
        api_checks.batch(1)


NOT_INTEGERS = st.one_of(st.floats(allow_nan=True), st.text(max_size=8), st.booleans(),
                         st.lists(st.integers(), max_size=2), st.binary(max_size=4))


def _outcome(value, limit) -> tuple[str, object]:
    try:
        return "ok", api_checks.count(value, "some-flag", limit)
    except api_checks.ArgumentTypeError as exc:
        return "type", exc
    except PredictionError as exc:
        return "range", exc


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.one_of(st.integers(), st.integers(-2**62, 2**62).map(np.int64), NOT_INTEGERS),
       st.sampled_from([BATCH, TOKENS, GLOBAL_BATCH]))
def test_count_accepts_exactly_the_integers_in_range(value, limit):
    """Property: ``count`` returns the value for an int in 1..cap and raises a one-line
    TypeError (not an integer) or ValueError (out of range) naming the flag otherwise."""
    integer = not isinstance(value, bool) and isinstance(value, int | np.integer)
    kind, got = _outcome(value, limit)
    expected = ("type" if not integer else
                "ok" if 1 <= value <= limit.value() else "range")
    assert kind == expected
    if kind == "ok":
        assert got == value
        assert type(got) is int
    else:
        assert isinstance(got, TypeError if kind == "type" else ValueError)
        assert "--some-flag" in str(got)
        assert "\n" not in str(got)


@pytest.mark.timeout(120)
@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.one_of(st.integers(max_value=0), st.integers(min_value=2**24 + 1), NOT_INTEGERS,
                 st.none()))
def test_plan_never_returns_an_empty_search_for_a_bad_global_batch(value):
    """Property: a global batch that is not an integer in range (or missing) is refused with
    a one-line message naming ``global_batch``; no search result comes back."""
    with pytest.raises((TypeError, ValueError)) as info:
        roofcast.plan(LLM, SYSTEM, global_batch=value)
    assert "global_batch" in str(info.value)
    assert "\n" not in str(info.value)
