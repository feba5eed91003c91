"""Parsing and checking of user dim bindings (``--dim batch=8``, ``--dim input_ids:1=128``).

A binding key is either a symbolic dim name as written in the model (``batch``) or
``input_name:axis`` (axis counted from 0, negative axes count from the end). Values are
positive integers no larger than ``MAX_DIM``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from graph_import.errors import ModelImportError

MAX_DIM = 2**31 - 1  # one dim beyond int32 range is surely a typo


def parse_dim_specs(specs: Iterable[str]) -> dict[str, int]:
    """``["batch=8", "input_ids:1=128"]`` -> ``{"batch": 8, "input_ids:1": 128}``.

    Raises ModelImportError on a malformed spec or a repeated key with another value.
    """
    dims: dict[str, int] = {}
    for spec in specs:
        key, sep, raw = str(spec).rpartition("=")
        key = key.strip()
        if not sep or not key:
            raise ModelImportError(
                f"bad --dim {spec!r}: expected NAME=VALUE or INPUT:AXIS=VALUE, e.g. --dim batch=8"
            )
        dims_value = _parse_value(key, raw.strip())
        if key in dims and dims[key] != dims_value:
            raise ModelImportError(
                f"--dim {key} given twice ({dims[key]} and {dims_value}); give it once"
            )
        dims[key] = dims_value
    return check_dims(dims)


def check_dims(dims: Mapping[str, int]) -> dict[str, int]:
    """Validate a dims mapping (as passed to ``import_model``); returns a plain dict copy."""
    out: dict[str, int] = {}
    for key, value in dims.items():
        if not isinstance(key, str) or not key.strip():
            raise ModelImportError(f"bad dim name {key!r}: use the model's dim name, e.g. batch")
        if isinstance(value, bool) or not isinstance(value, int):
            value = _parse_value(key, str(value))
        if not 1 <= value <= MAX_DIM:
            raise ModelImportError(
                f"dim {key}={value} is out of range: give a positive integer <= {MAX_DIM}"
            )
        out[key.strip()] = value
    return out


def split_input_axis(key: str) -> tuple[str, int] | None:
    """``"input_ids:1"`` -> ``("input_ids", 1)``; a plain dim name -> None.

    The axis is whatever follows the *last* colon, so input names containing ':' still work.
    """
    name, sep, axis = key.rpartition(":")
    if not sep or not name:
        return None
    try:
        return name, int(axis)
    except ValueError:
        return None


def _parse_value(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ModelImportError(
            f"bad value {raw!r} for dim {key}: give a positive integer, e.g. --dim {key}=8"
        ) from None
