"""argparse ``type=`` converters shared by the subcommands (bad values exit 2 with one line)."""

from __future__ import annotations

import argparse


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{value} must be >= {low}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    return _int_at_least(text, 0)


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _int_at_least(text, 1)
