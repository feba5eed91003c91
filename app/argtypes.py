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


def thread_count(text: str) -> int:
    """CPU threads: an integer from 1 to ``ROOFCAST_MAX_THREADS`` (``graph_import.budgets``)."""
    from roofcast.graph_import.budgets import THREADS

    value = positive_int(text)
    try:
        return THREADS.check(value, f"{text.strip()} threads", argparse.ArgumentTypeError)
    except ValueError as exc:  # ROOFCAST_MAX_THREADS itself is bad: say so, not "invalid value"
        raise argparse.ArgumentTypeError(str(exc)) from None


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


def thread_count_list(text: str) -> list[int]:
    """Comma-separated thread counts (``1,4,8``), each checked by ``thread_count``."""
    return [thread_count(t) for t in comma_items(text, "thread counts", "1,4,8")]


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


def runtime_help() -> str:
    """The ``--runtime`` help: where the list is and each device kind's default (from the
    catalog's table, so the text cannot drift from what runs)."""
    from roofcast.predictor.runtimes.catalog import DEFAULTS

    defaults = ", ".join(f"{name} on {kind}s" for kind, name in DEFAULTS.items())
    return (f"execution runtime whose kernels, dispatch floor and math defaults are modelled "
            f"(`roofcast runtimes` lists them; default: {defaults})")


def runtime_menu() -> str:
    """Every runtime, one line each: ``name (device kinds): description``; a user profile that
    cannot be loaded says why instead."""
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.runtimes import get_runtime, runtime_names

    lines = []
    for name in runtime_names():
        try:
            prof = get_runtime(name)
        except PredictionError as exc:
            lines.append(f"  {name}: unusable ({exc})")
            continue
        lines.append(f"  {name} ({', '.join(prof.device_kinds)}): {prof.description}")
    return "\n".join(lines)


def runtime_name(text: str) -> str:
    """argparse ``type=`` for ``--runtime``: a runtime of the catalog (built-in or the user's
    folder). Only the file names are read for a known name; an unknown one is an error listing
    every runtime with its device kinds and one-line description. Whether the runtime runs on
    the chosen device is checked when the device is known
    (``predictor.runtimes.resolve_runtime``). A broken user folder (a profile shadowing a
    built-in, too many files) is reported with its own message, not argparse's "invalid
    value"."""
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.runtimes import runtime_names

    try:
        names = runtime_names()
    except PredictionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if text in names:
        return text
    raise argparse.ArgumentTypeError(f"unknown runtime {text!r}; choose one of:\n{runtime_menu()}")


def zero_stage(text: str) -> int:
    """argparse ``type=`` for ``--zero``: a ZeRO stage 0, 1, 2 or 3 (Rajbhandari et al. 2020:
    0 none, 1 optimizer states sharded over the data-parallel group, 2 + gradients,
    3 + parameters)."""
    if text.strip() not in ("0", "1", "2", "3"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is no ZeRO stage; use 0 (none), 1 (optimizer states sharded), "
            f"2 (+ gradients) or 3 (+ parameters)")
    return int(text)


def zero_stages(text: str) -> tuple[int, ...]:
    """Comma-separated ZeRO stages (``0,1``), each checked by ``zero_stage``, in order, once."""
    return tuple(dict.fromkeys(zero_stage(t) for t in comma_items(text, "ZeRO stages", "0,1")))


def system_list(text: str) -> list[str]:
    """Comma-separated system refs (``hgx-h100,dgx-a100``), keeping what-if specs whole: a
    part with '=' but no ':' continues the previous what-if spec
    (``hgx-h100:nodes=4,nic_GBps=100,dgx-a100`` is two systems)."""
    out: list[str] = []
    for part in comma_items(text, "system ids", "hgx-h100,dgx-a100"):
        if out and "=" in part and ":" not in part and ":" in out[-1]:
            out[-1] += "," + part
        else:
            out.append(part)
    return out
