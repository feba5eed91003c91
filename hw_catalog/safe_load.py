"""TOML and JSON parsed without trusting them: one guarded loader for every data file a user names.

``load_toml(data, label, error=)`` and ``load_json(data, label, error=)`` take the bytes (the caller
read at most its size cap) and refuse, with ``error`` naming ``label``, before parsing:

- more than ``max_bytes`` (default ``MAX_BYTES``); bytes that are not UTF-8;
- a dotted key of more than ``MAX_KEY_PARTS`` parts (``tomllib`` keeps every prefix of a dotted
  key while parsing: memory grows with the square of its length);
- brackets/braces nested more than ``MAX_NESTING`` deep (both parsers recurse: 5000 nested
  arrays raise ``RecursionError``); counted in one linear scan that skips strings and comments.

A syntax error, an integer too long to convert or ``NaN``/``Infinity`` in JSON is the same one-line
``error``. The scans are linear in the text, so any input is refused within its size cap.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

MAX_BYTES = 1 << 20
MAX_KEY_PARTS = 32
MAX_NESTING = 64

# One dotted-key part (bare, "basic" with escapes, or 'literal') and a dot; a run of MAX_KEY_PARTS
# of them starts where a key can (line start, after whitespace, '[', '{' or ','). Possessive
# quantifiers keep the scan linear.
_PART = r"""(?:"(?:[^"\\\n]|\\.)*+"|'[^'\n]*+'|[A-Za-z0-9_-]++)"""
_DEEP_KEY = re.compile(rf"(?:^|(?<=[\s\[{{,]))(?:{_PART}[ \t]*+\.[ \t]*+){{{MAX_KEY_PARTS}}}",
                       re.MULTILINE)
# What the nesting scan steps over in one match: strings, comments and other characters.
_TOML_SKIP = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*+"""|\'\'\'(?:[^\']|\'(?!\'\'))*+\'\'\''
                        r'|"(?:[^"\\\n]|\\.)*+"|\'[^\'\n]*+\'|#[^\n]*+|[^"\'#\[\]{}]++',
                        re.DOTALL)
_JSON_SKIP = re.compile(r'"(?:[^"\\]|\\.)*+"|[^"\[\]{}]++', re.DOTALL)


def _text(data: bytes | str, label: str, max_bytes: int, error: type[Exception]) -> str:
    size = len(data)
    if size > max_bytes:
        raise error(f"{label}: {size} bytes, over the {max_bytes}-byte limit for this file")
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{label}: not UTF-8 text (byte {exc.start}); is this a binary "
                    "file?") from None


def nesting_depth(text: str, skip: re.Pattern[str] = _TOML_SKIP) -> int:
    """The deepest nesting of ``[``/``{`` in ``text`` outside strings and comments (linear)."""
    depth = deepest = pos = 0
    while pos < len(text):
        match = skip.match(text, pos)
        if match and match.end() > pos:
            pos = match.end()
            continue
        char = text[pos]
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
        pos += 1  # an unterminated string: the parser reports it
    return deepest


def _check_nesting(text: str, label: str, skip: re.Pattern[str], error: type[Exception]) -> None:
    if nesting_depth(text, skip) > MAX_NESTING:
        raise error(f"{label}: arrays or tables nested too deeply (more than {MAX_NESTING} "
                    "levels); a data file this deep is corrupt or hostile")


def load_toml(data: bytes | str, label: str, *, error: type[Exception] = ValueError,
              max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """The parsed TOML document of ``data`` (module docstring); ``error`` naming ``label``."""
    text = _text(data, label, max_bytes, error)
    deep = _DEEP_KEY.search(text)
    if deep:
        line = text.count("\n", 0, deep.start()) + 1
        raise error(f"{label}: line {line}: a dotted key with more than {MAX_KEY_PARTS} parts")
    _check_nesting(text, label, _TOML_SKIP, error)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{label}: TOML syntax error: {exc}") from None
    except (RecursionError, ValueError) as exc:  # a too long integer literal
        raise error(f"{label}: TOML value cannot be read: {type(exc).__name__}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_json(data: bytes | str, label: str, *, error: type[Exception] = ValueError,
              max_bytes: int = MAX_BYTES) -> Any:
    """The parsed JSON value of ``data`` (module docstring); ``error`` naming ``label``."""
    text = _text(data, label, max_bytes, error)
    _check_nesting(text, label, _JSON_SKIP, error)
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise error(f"{label}: JSON syntax error: {exc}") from None
    except (RecursionError, ValueError) as exc:
        raise error(f"{label}: JSON value cannot be read: {exc}") from None
