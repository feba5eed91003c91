"""Hypothetical (what-if) devices: a base device plus overrides and scale factors.

Three ways in, one implementation (:func:`derive_from_doc`):

- Python: ``derive(get_device("h100-sxm"), mem_bw_GBps=6700, l2_MB=100)``;
- a device file with ``base = "h100-sxm"`` plus any keys of the schema and scale factors;
- inline wherever a device id is accepted: ``"h100-sxm:mem_bw_GBps=6700,l2_MB=100"``.

``what_if_root(id)``: the (derived device, catalog device at the root of its ``base`` chain) of a
device derived in this process, so a learned efficiency can be taken from the
real device while the what-if figures set the bound (docs/design/road.md).

Rationale: ``docs/design/module-notes.md`` (roofcast.hw_catalog.derive).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.schema import (
    FIELDS_BY_PATH,
    FLAT_NAMES,
    FREEFORM_TABLES,
    SCALES,
    doc_to_spec,
    get_path,
    leaf_paths,
    set_path,
    spec_to_doc,
)
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.hw_catalog.validate import scale_problem, validate_document

_IDENTITY_KEYS = ("id", "base", "name", "aliases", "sources", "notes")
#: derived device id -> (derived spec, root spec); oldest entries go past ``_MAX_ROOTS``.
_ROOTS: dict[str, tuple[HardwareSpec, HardwareSpec]] = {}
_MAX_ROOTS = 4096


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _unknown_key(key: str) -> HardwareSpecError:
    names = [*FLAT_NAMES, *SCALES]
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return HardwareSpecError(
        f"unknown hardware key {key!r} for a derived device{hint} (keys are the device-file "
        f"keys such as mem_bw_GBps, l2_MB, units, launch_overhead_us, matrix_bf16_TOPS, or "
        f"scales such as mem_bw_scale, peak_scale)")


def _coerce(key: str, field_type: str, value: Any) -> Any:
    """Convert an inline string (or Python value) to the key's type."""
    if field_type == "str":
        return str(value)
    if field_type == "str_list":
        return [v.strip() for v in value.split(";")] if isinstance(value, str) else list(value)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise HardwareSpecError(f"value of {key!r} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise HardwareSpecError(f"value of {key!r} must be a finite number, got {value!r}")
    if field_type == "int":
        if not number.is_integer():
            raise HardwareSpecError(f"value of {key!r} must be an integer, got {value!r}")
        return int(number)
    return int(number) if isinstance(value, int) else number


def split_changes(changes: Mapping[str, Any]
                  ) -> tuple[dict[tuple[str, ...], Any], dict[str, float]]:
    """Map user key names to (schema path -> value, scale name -> factor); unknown keys raise."""
    overrides: dict[tuple[str, ...], Any] = {}
    scales: dict[str, float] = {}
    for key, value in changes.items():
        if key in SCALES:
            scales[key] = _coerce(key, "number", value)
            problem = scale_problem(key, scales[key])
            if problem:
                raise HardwareSpecError(problem)
        elif key in FLAT_NAMES:
            path = FLAT_NAMES[key]
            if path == ("id",) or path == ("base",):
                raise HardwareSpecError(f"{key!r} cannot be overridden; pass id= separately")
            overrides[path] = _coerce(key, FIELDS_BY_PATH[path].type, value)
        else:
            raise _unknown_key(key)
    return overrides, scales


def derive(base: HardwareSpec, id: str | None = None, **changes: Any) -> HardwareSpec:
    """A what-if device from ``base`` with overrides/scales in TOML key names.

    >>> derive(get_device("h100-sxm"), mem_bw_GBps=6700, l2_MB=100).mem_bw_Bps
    6700000000000.0
    """
    if not changes:
        raise HardwareSpecError("derive() needs at least one override or scale factor")
    overrides, scales = split_changes(changes)
    desc = ", ".join(f"{k}={_fmt(v)}" for k, v in changes.items())
    dev_id = id or f"{base.id}:" + ",".join(f"{k}={_fmt(v)}" for k, v in changes.items())
    return derive_from_doc(base, overrides, scales, dev_id=dev_id, desc=desc,
                           label=f"derived device {dev_id!r}", check_id=False)


def derive_from_doc(
    base: HardwareSpec,
    overrides: Mapping[tuple[str, ...], Any],
    scales: Mapping[str, float],
    *,
    dev_id: str,
    desc: str,
    label: str,
    origin: str = "derived",
    path: str | None = None,
    check_id: bool = True,
) -> HardwareSpec:
    """Apply overrides (schema path -> value) then scales to ``base``; validate; build a spec."""
    doc = spec_to_doc(base)
    for key in ("aliases", "base", *FREEFORM_TABLES):
        doc.pop(key, None)
    explicit = []
    for key_path, value in overrides.items():
        if key_path[0] in _IDENTITY_KEYS:
            continue
        set_path(doc, key_path, value)
        explicit.append(key_path)
    for scale, factor in scales.items():
        for prefix in SCALES[scale]:
            for leaf in leaf_paths(doc):
                if leaf[: len(prefix)] != prefix:
                    continue
                value = get_path(doc, leaf) * factor
                if FIELDS_BY_PATH[leaf].type == "int":
                    value = max(1, round(value))
                set_path(doc, leaf, value)
    doc["id"] = dev_id
    doc["base"] = base.id
    doc["name"] = overrides.get(("name",)) or f"{base.name} [{desc}]"
    if ("aliases",) in overrides:
        doc["aliases"] = list(overrides[("aliases",)])
    note = f"Hypothetical device derived from '{base.id}' ({desc}); not a real product."
    extra_notes = overrides.get(("notes",))
    doc["notes"] = " ".join(n for n in (note, extra_notes, base.notes) if n)
    doc["sources"] = [*overrides.get(("sources",), ()), *base.sources,
                      f"derived from '{base.id}' by {desc} (what-if values, not datasheet "
                      f"figures)"]
    validate_document(doc, label, range_paths=explicit, check_id=check_id)
    spec = doc_to_spec(doc, origin=origin, path=path)
    _remember(spec, base)
    return spec


def _remember(spec: HardwareSpec, base: HardwareSpec) -> None:
    """Record ``spec``'s root: ``base``, or ``base``'s root when ``base`` is derived too."""
    root = _ROOTS[base.id][1] if base.is_derived and base.id in _ROOTS else base
    _ROOTS.pop(spec.id, None)
    _ROOTS[spec.id] = (spec, root)
    while len(_ROOTS) > _MAX_ROOTS:
        _ROOTS.pop(next(iter(_ROOTS)))


def what_if_root(device_id: str) -> tuple[HardwareSpec, HardwareSpec] | None:
    """(derived spec, root catalog spec) of a device derived in this process, else None."""
    return _ROOTS.get(device_id)


def derive_from_file_doc(base: HardwareSpec, doc: Mapping[str, Any], *, label: str,
                         origin: str, path: str) -> HardwareSpec:
    """Build the device of a derived file (``base = ...``) already structure-checked."""
    overrides = {p: get_path(doc, p) for p in leaf_paths(doc)
                 if p[0] not in SCALES and p[0] not in FREEFORM_TABLES and p != ("base",)}
    scales = {k: doc[k] for k in SCALES if k in doc}
    parts = [f"{'.'.join(p)}={_fmt(v)}" for p, v in overrides.items()
             if p[0] not in _IDENTITY_KEYS]
    parts += [f"{k}={_fmt(v)}" for k, v in scales.items()]
    desc = ", ".join(parts) or "no changes"
    return derive_from_doc(base, overrides, scales, dev_id=doc["id"], desc=desc, label=label,
                           origin=origin, path=path)


def parse_inline(text: str) -> tuple[str, dict[str, str]]:
    """Split ``"h100-sxm:mem_bw_GBps=6700,l2_MB=100"`` into ``("h100-sxm", {...})``.

    Values stay strings here; :func:`derive` converts them by the key's type.
    """
    base, sep, rest = text.partition(":")
    base = base.strip()
    if not sep or not base:
        raise HardwareSpecError(
            f"inline device {text!r} must look like 'BASE:key=value,key=value' "
            f"(e.g. 'h100-sxm:mem_bw_GBps=6700,l2_MB=100')")
    changes: dict[str, str] = {}
    for item in rest.split(","):
        if not item.strip():
            continue
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise HardwareSpecError(
                f"inline device {text!r}: {item.strip()!r} is not key=value "
                f"(e.g. mem_bw_GBps=6700)")
        if key in changes:
            raise HardwareSpecError(f"inline device {text!r}: key {key!r} given twice")
        changes[key] = value
    if not changes:
        raise HardwareSpecError(f"inline device {text!r} has no key=value changes after ':'")
    return base, changes
