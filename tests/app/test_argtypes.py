"""Shared argparse converters: values, and the one-line messages for bad ones."""

import argparse

import pytest

from roofcast.app.argtypes import name_list, nonnegative_int, positive_int, positive_int_list


def test_lists_strip_and_drop_empty_items():
    assert name_list(" fp32, fp16 ,") == ["fp32", "fp16"]
    assert positive_int_list("1,8, 32") == [1, 8, 32]


@pytest.mark.parametrize(("fn", "text", "message"), [
    (name_list, " , ", r"' , ': give comma-separated names, e.g. fp32,fp16"),
    (positive_int_list, "", r"'': give comma-separated integers, e.g. 1,8,32"),
    (positive_int_list, "1,0", r"0 must be >= 1"),
    (positive_int_list, "1,x", r"'x' is not an integer"),
    (positive_int, "-3", r"-3 must be >= 1"),
    (nonnegative_int, "-1", r"-1 must be >= 0"),
])
def test_bad_values_say_what_is_wrong(fn, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        fn(text)


def test_thread_counts_are_bounded_by_an_environment_variable(monkeypatch):
    from roofcast.app.argtypes import thread_count, thread_count_list

    assert thread_count_list("1,64") == [1, 64]
    with pytest.raises(argparse.ArgumentTypeError,
                       match=r"^1000000000000000000000 threads is over the limit of 65536 CPU "
                             r"threads .*ROOFCAST_MAX_THREADS$"):
        thread_count(str(10**21))
    monkeypatch.setenv("ROOFCAST_MAX_THREADS", "8")
    with pytest.raises(argparse.ArgumentTypeError, match="over the limit of 8 CPU threads"):
        thread_count_list("4,9")
    monkeypatch.setenv("ROOFCAST_MAX_THREADS", "many")
    with pytest.raises(argparse.ArgumentTypeError,
                       match=r"^ROOFCAST_MAX_THREADS='many' is not a positive integer"):
        thread_count("4")
