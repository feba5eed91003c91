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


def comma_items(text: str, what: str, example: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated ``text``; ArgumentTypeError naming
    ``what`` and an ``example`` when there are none."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated {what}, e.g. {example}")
    return items


def name_list(text: str) -> list[str]:
    """Comma-separated names (``fp32,fp16``)."""
    return comma_items(text, "names", "fp32,fp16")


def positive_int_list(text: str) -> list[int]:
    """Comma-separated integers >= 1 (``1,8,32``)."""
    return [positive_int(t) for t in comma_items(text, "integers", "1,8,32")]
