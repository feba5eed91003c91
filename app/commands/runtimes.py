"""``roofcast runtimes [list]`` and ``roofcast runtimes show NAME``: the execution profiles.

A runtime (ONNX Runtime, PyTorch eager, torch.compile, TensorRT, ...) is the third input of a
prediction beside the model and the device: which kernels it launches for the graph's nodes,
the time one kernel costs at least on each device kind, its math defaults. ``list``: name,
device kinds, one-line description, origin and file of every profile, built-in and the user's
(``$ROOFCAST_RUNTIME_DIR``, else ``~/.config/roofcast/runtimes``); a user file that cannot be
used is named with its problem on stderr. ``show``: every field of one profile, its
kernel-mapping patterns (when each applies, what it does) and its dispatch floors.
"""

from __future__ import annotations

import argparse
import warnings
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from roofcast.app.output import Table, add_format_arg, emit

if TYPE_CHECKING:
    from roofcast.predictor.runtimes import ExecutionProfile

LIST_COLUMNS = ("name", "device_kinds", "description", "origin", "source")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runtimes", help="execution runtimes: list, show one profile",
                       description=__doc__)
    add_format_arg(p)
    p.set_defaults(func=run_list)
    rt_sub = p.add_subparsers(dest="runtimes_command")
    p_list = rt_sub.add_parser("list", help="every runtime profile (built-in and user folder)")
    add_format_arg(p_list)
    p_list.set_defaults(func=run_list)
    p_show = rt_sub.add_parser("show", help="every field of one runtime profile")
    p_show.add_argument("name", help="runtime name (roofcast runtimes list)")
    add_format_arg(p_show)
    p_show.set_defaults(func=run_show)


def origin(prof: ExecutionProfile) -> str:
    """``built-in`` for a profile shipped with roofcast, else ``user``."""
    from pathlib import Path

    from roofcast.predictor.runtimes.catalog import BUILTIN_DIR

    return "built-in" if Path(prof.source).parent == BUILTIN_DIR else "user"


def loaded_profiles() -> tuple[list[ExecutionProfile], list[str]]:
    """(every profile that loads, one message per user file that does not)."""
    from roofcast.predictor.errors import PredictionError
    from roofcast.predictor.runtimes import get_runtime, runtime_names

    good, bad = [], []
    for name in runtime_names():
        try:
            good.append(get_runtime(name))
        except PredictionError as exc:
            bad.append(f"runtime {name!r} skipped: {exc}")
    return good, bad


def run_list(args: argparse.Namespace) -> int:
    from roofcast.predictor.runtimes import user_dir

    good, bad = loaded_profiles()
    for message in bad:
        warnings.warn(message, stacklevel=1)
    rows = [{"name": p.name, "device_kinds": ", ".join(p.device_kinds),
             "description": p.description, "origin": origin(p), "source": p.source}
            for p in good]
    emit({"runtimes": Table.from_records(rows, LIST_COLUMNS)}, args.format,
         extra={"runtimes": len(rows), "user_folder": str(user_dir())})
    return 0


def _cell(value: Any) -> Any:
    """A profile field for the key/value table: lists comma-joined, mappings ``k=v``."""
    if isinstance(value, tuple | list):
        return ", ".join(map(str, value))
    if isinstance(value, dict) or hasattr(value, "items"):
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in value.items())
    return value


def _plain(value: Any) -> Any:
    """A profile field as JSON: tuples as lists, mappings as objects."""
    if isinstance(value, tuple):
        return list(value)
    if hasattr(value, "items"):
        return dict(value.items())
    return value


def pattern_rows(prof: ExecutionProfile) -> list[dict[str, str]]:
    """One row per kernel-mapping pattern: when it applies and the first paragraph of its
    docstring."""
    from roofcast.predictor.runtimes import rules  # noqa: F401  (registers the patterns)
    from roofcast.predictor.runtimes.patterns import PATTERNS

    rows = []
    for when, names in (("always", prof.patterns), ("with fusion", prof.fusion_patterns)):
        for name in names:
            first = (PATTERNS[name].__doc__ or "").strip().split("\n\n")[0]
            rows.append({"pattern": name, "applies": when, "does": " ".join(first.split())})
    return rows


def floor_rows(prof: ExecutionProfile) -> list[dict[str, Any]]:
    """One row per device kind the runtime runs on: its per-kernel dispatch floor (µs), or the
    device's own launch overhead where the profile gives none (or replays a captured graph)."""
    rows = []
    for kind in prof.device_kinds:
        own = prof.graph_capture or kind not in prof.dispatch_floor_us
        rows.append({"device_kind": kind,
                     "dispatch_floor_us": None if own else prof.dispatch_floor_us[kind],
                     "from": ("the device's launch_overhead_us (graph capture)"
                              if prof.graph_capture else
                              "the device's launch_overhead_us" if own else "this profile")})
    return rows


def run_show(args: argparse.Namespace) -> int:
    from roofcast.predictor.runtimes import get_runtime

    prof = get_runtime(args.name)
    values = {f.name: getattr(prof, f.name) for f in fields(prof)}
    tables = {
        "pattern_rules": Table.from_records(pattern_rows(prof), ("pattern", "applies", "does")),
        "dispatch_floors": Table.from_records(floor_rows(prof),
                                              ("device_kind", "dispatch_floor_us", "from")),
    }
    if args.format == "json":
        emit(tables, args.format, extra={"origin": origin(prof),
                                         **{k: _plain(v) for k, v in values.items()}})
        return 0
    fields_table = Table.from_records(
        [{"field": k, "value": _cell(v)} for k, v in values.items()], ("field", "value"))
    emit({"fields": fields_table, **tables}, args.format, extra={"origin": origin(prof)})
    return 0
