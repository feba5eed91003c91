"""Validation of device documents (parsed TOML) at load time.

Checks, in order: unknown keys (with the closest valid key suggested), types, required keys
(per device kind), positivity, plausible magnitudes per device kind (``RANGES``, data — a value
outside is usually a unit slip such as MB/s written into a GB/s key), and cross-field rules
(id format, kind, sources, price date, link pairs). All problems of one file are reported
together in one ``HardwareSpecError`` whose message starts with the file and names each key.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.schema import (
    ALL_KINDS,
    EXTRA_TOP_KEYS,
    FIELDS,
    FIELDS_BY_PATH,
    FLAT_NAMES,
    FREEFORM_TABLES,
    KINDS,
    PEAK_FIELDS,
    get_path,
)

_G, _C, _A = "gpu", "cpu", "accelerator"


def _same(lo: float, hi: float) -> dict[str, tuple[float, float]]:
    return dict.fromkeys(KINDS, (lo, hi))


RANGES: Mapping[str, Mapping[str, tuple[float, float]]] = {
    # range key (dotted path; peaks per engine) -> kind -> (lo, hi) inclusive, in the key's unit
    "memory.bandwidth_GBps": {_G: (50, 20000), _C: (1, 2000), _A: (10, 20000)},
    "memory.capacity_GB": {_G: (1, 1024), _C: (0.5, 16384), _A: (1, 1024)},
    "peak_TOPS.matrix": {_G: (0.1, 20000), _C: (0.01, 2000), _A: (0.1, 20000)},
    "peak_TOPS.vector": {_G: (0.01, 2000), _C: (0.001, 200), _A: (0.01, 2000)},
    "cache.l2_MB": {_G: (0.1, 1024), _C: (0.1, 4096), _A: (0.1, 1024)},
    "compute.units": {_G: (1, 1000), _C: (1, 1024), _A: (1, 1000)},
    "compute.boost_clock_MHz": _same(100, 6000),
    "overhead.launch_overhead_us": _same(0.1, 1000),
    "power.tdp_W": {_G: (10, 2000), _C: (1, 1000), _A: (1, 3000)},
    "interconnect.host_link_GBps": _same(0.5, 1000),
    "interconnect.device_link_GBps": _same(1, 10000),
    "cache.l1_per_unit_KB": _same(1, 16384),
    "cache.shared_mem_per_unit_KB": _same(1, 16384),
    "cache.l2_bandwidth_GBps": _same(10, 500000),
    "price.list_price_USD": _same(10, 1_000_000),
    "release_year": _same(2000, 2035),
}

SCALE_RANGE: tuple[float, float] = (1e-3, 1e3)
"""Allowed what-if scale factors (``mem_bw_scale``, ``peak_scale``, ...): a factor beyond 1000x
describes no hardware, and chains of such factors overflow to inf or underflow to 0."""
WHATIF_HEADROOM = 1e3
"""A scaled value of a derived device may lie this factor beyond ``RANGES`` (an explicit value
must lie within, like a datasheet figure)."""


def scale_problem(key: str, value: float) -> str | None:
    """Why ``value`` is not a usable scale factor ``key`` (None when it is)."""
    lo, hi = SCALE_RANGE
    if value <= 0:
        return f"scale '{key}' must be positive, got {value!r}"
    if not lo <= value <= hi:
        return (f"scale '{key}' = {value!r} is outside {_range_text(lo, hi)}; a what-if scales "
                f"a figure by at most {hi:g}x either way")
    return None


ID_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DATE_PATTERN = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
_TYPE_WORDS = {"str": "a string", "int": "an integer", "number": "a number",
               "str_list": "a list of strings", "table": "a table"}


def _children(prefix: tuple[str, ...]) -> dict[str, str]:
    """Allowed keys under ``prefix`` -> 'table' or the leaf type."""
    out: dict[str, str] = {}
    for f in FIELDS:
        if f.path[: len(prefix)] == prefix and len(f.path) > len(prefix):
            key = f.path[len(prefix)]
            out[key] = f.type if len(f.path) == len(prefix) + 1 else "table"
    if not prefix:
        out.update(EXTRA_TOP_KEYS)
        out.update(dict.fromkeys(FREEFORM_TABLES, "freeform"))
    return out


def _suggest(key: str, prefix: tuple[str, ...], siblings: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(siblings), n=1, cutoff=0.6)
    if close:
        return f"; did you mean '{'.'.join((*prefix, close[0]))}'?"
    if key in FLAT_NAMES:
        return f"; did you mean '{'.'.join(FLAT_NAMES[key])}'?"
    dotted = [f.dotted for f in FIELDS]
    close = difflib.get_close_matches(".".join((*prefix, key)), dotted, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _type_ok(value: Any, typ: str) -> bool:
    if typ == "str":
        return isinstance(value, str)
    if typ == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if typ == "number":
        return (isinstance(value, int | float) and not isinstance(value, bool)
                and math.isfinite(value))
    if typ == "str_list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if typ in ("table", "freeform"):
        return isinstance(value, Mapping)
    return False


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}" if not isinstance(value, Mapping) else "a table"


def _check_structure(node: Mapping[str, Any], prefix: tuple[str, ...], errors: list[str]
                     ) -> None:
    allowed = _children(prefix)
    for key, value in node.items():
        dotted = ".".join((*prefix, key))
        typ = allowed.get(key)
        if typ is None:
            errors.append(f"unknown key '{dotted}'{_suggest(key, prefix, allowed)}")
            continue
        if not _type_ok(value, typ):
            errors.append(f"key '{dotted}' must be {_TYPE_WORDS.get(typ, typ)}, "
                          f"got {_describe(value)}")
            continue
        if typ == "table":
            _check_structure(value, (*prefix, key), errors)


def _range_text(lo: float, hi: float) -> str:
    return f"{lo:g}..{hi:g}"


def validate_document(
    doc: Mapping[str, Any],
    label: str,
    *,
    derived: bool = False,
    range_paths: Iterable[tuple[str, ...]] | None = None,
    check_id: bool = True,
) -> None:
    """Raise ``HardwareSpecError`` listing every problem of a device document.

    ``label`` names the file (or inline spec) in the message. ``derived=True`` checks a derived
    file *before* merging with its base: only ``id`` and ``base`` are required and magnitudes
    are not checked. ``range_paths`` restricts the magnitude check to those keys (used for a
    merged derived device: explicit overrides are checked, scaled values only for positivity).
    """
    errors: list[str] = []
    _check_structure(doc, (), errors)
    kind = doc.get("kind")
    kind_ok = kind in KINDS
    if kind is not None and isinstance(kind, str) and not kind_ok:
        errors.append(f"key 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    _check_required(doc, kind if kind_ok else None, derived, errors)
    range_set = None if range_paths is None else set(range_paths)
    for path, f in FIELDS_BY_PATH.items():
        bounds = None
        if kind_ok and not derived:
            bounds = RANGES.get(f.range_key, {}).get(kind)
        only_headroom = range_set is not None and path not in range_set
        _check_value(f, get_path(doc, path), kind, bounds, only_headroom, errors)
    _check_scales(doc, derived, errors)
    _check_semantics(doc, errors, check_id=check_id, derived=derived)
    if errors:
        raise HardwareSpecError(f"{label}: " + "; ".join(errors))


def _check_required(doc: Mapping[str, Any], kind: str | None, derived: bool,
                    errors: list[str]) -> None:
    """Required keys: ``id`` and ``base`` for a derived file, else the fields of ``kind``
    (every kind's when the kind is missing or unknown) and at least one peak."""
    if derived:
        for key in ("id", "base"):
            if key not in doc:
                errors.append(f"missing required key '{key}'")
        return
    for f in FIELDS:
        needed = kind in f.required_for if kind is not None else f.required_for == ALL_KINDS
        if needed and get_path(doc, f.path) is None:
            unit = f" (in {f.unit})" if f.unit else ""
            errors.append(f"missing required key '{f.dotted}'{unit}")
    if not any(get_path(doc, f.path) is not None for f in PEAK_FIELDS):
        errors.append("no peak at all: give at least one of [peak_TOPS.matrix] / "
                      "[peak_TOPS.vector] (e.g. peak_TOPS.vector.fp32)")


def _check_value(f, value: Any, kind: Any, bounds: tuple[float, float] | None,
                 only_headroom: bool, errors: list[str]) -> None:
    """One field's value: strings not empty, numbers positive and within ``bounds`` (only
    within the what-if headroom around them when ``only_headroom``)."""
    if f.type in ("str", "str_list") and value is not None and _type_ok(value, f.type):
        empty = value.strip() == "" if f.type == "str" else any(not v.strip() for v in value)
        if empty:
            errors.append(f"key '{f.dotted}' must not be empty")
    if f.type not in ("number", "int") or not _type_ok(value, f.type):
        return
    if value <= 0:
        errors.append(f"key '{f.dotted}' must be positive, got {value!r}")
        return
    if bounds is None:
        return
    lo, hi = bounds
    if only_headroom:
        if not lo / WHATIF_HEADROOM <= value <= hi * WHATIF_HEADROOM:
            errors.append(
                f"{f.dotted} = {value!r} after scaling is more than {WHATIF_HEADROOM:g}x "
                f"outside the plausible range of a {kind} ({_range_text(lo, hi)} {f.unit}); "
                f"use smaller scale factors")
        return
    if not lo <= value <= hi:
        errors.append(
            f"{f.dotted} = {value!r} is implausible for a {kind} (expected "
            f"{_range_text(lo, hi)} {f.unit}); check the unit: the key is in {f.unit}")


def _check_scales(doc: Mapping[str, Any], derived: bool, errors: list[str]) -> None:
    """Scale factors (``mem_bw_scale`` ...) in range, and only beside a ``base``."""
    for key in EXTRA_TOP_KEYS:
        value = doc.get(key)
        problem = (scale_problem(key, value)
                   if key != "base" and _type_ok(value, "number") else None)
        if problem:
            errors.append(problem)
    if not derived and any(k in doc for k in EXTRA_TOP_KEYS if k != "base") and "base" not in doc:
        errors.append("scale factors (e.g. mem_bw_scale) are only allowed with 'base'")


def _check_semantics(doc: Mapping[str, Any], errors: list[str], *, check_id: bool,
                     derived: bool) -> None:
    dev_id = doc.get("id")
    if check_id and isinstance(dev_id, str) and not ID_PATTERN.match(dev_id):
        errors.append(f"id {dev_id!r} must be lowercase letters, digits and single dashes "
                      f"(e.g. 'h100-sxm')")
    sources = doc.get("sources")
    if not derived and isinstance(sources, list) and not sources:
        errors.append("key 'sources' must name at least one source (datasheet, whitepaper)")
    price = doc.get("price")
    if isinstance(price, Mapping) and "list_price_USD" in price:
        for key in ("price_date", "price_source"):
            if key not in price:
                errors.append(f"key 'price.{key}' is required when price.list_price_USD "
                              f"is given")
    date = get_path(doc, ("price", "price_date"))
    if isinstance(date, str) and not DATE_PATTERN.match(date):
        errors.append(f"key 'price.price_date' must look like 'YYYY-MM', got {date!r}")
    link = doc.get("interconnect")
    if isinstance(link, Mapping) and ("device_link" in link) != ("device_link_GBps" in link):
        errors.append("keys 'interconnect.device_link' and 'interconnect.device_link_GBps' "
                      "go together: give both or neither")
