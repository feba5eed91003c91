"""argparse ``type=`` converters shared by the subcommands (bad values exit 2 with one line)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass


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


@dataclass(frozen=True)
class OneOf:
    """argparse ``type=`` for a name out of a list that lives in a heavy module: ``names()``
    is called only when a value is given (never while the parser is built or its help printed,
    which argparse's ``choices=`` would do), and an unknown value is an error listing the
    names, e.g. ``OneOf(estimator_names, "estimator")``."""

    names: Callable[[], Iterable[str]]
    what: str

    def __call__(self, text: str) -> str:
        known = tuple(self.names())
        if text not in known:
            raise argparse.ArgumentTypeError(
                f"unknown {self.what} {text!r}; choose one of: {', '.join(known)}")
        return text
