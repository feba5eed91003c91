"""A minimal TOML writer for device documents (the standard library only reads TOML).

Supports what device files use: strings, booleans, integers, floats, lists of those, and
nested tables. Top-level scalars come first, then each table as a ``[dotted.header]``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} to TOML")


def dumps(doc: Mapping[str, Any]) -> str:
    """Serialise a nested mapping to TOML text (round-trips through ``tomllib.loads``)."""
    lines: list[str] = []
    _emit(doc, (), lines)
    return "\n".join(lines).strip() + "\n"


def _emit(table: Mapping[str, Any], prefix: tuple[str, ...], lines: list[str]) -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    if prefix and (scalars or not tables):
        lines.append("")
        lines.append("[" + ".".join(_key(k) for k in prefix) + "]")
    for key, value in scalars:
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in tables:
        _emit(value, (*prefix, key), lines)
