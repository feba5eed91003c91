"""The device-file schema as data: every TOML key, its type, unit, SI conversion and flat names.

One table (``FIELDS``) drives validation (``validate.py``), TOML <-> ``HardwareSpec`` conversion
(below) and the flat key names accepted by ``derive()`` and inline specs
(``mem_bw_GBps=6700``). The human description of the schema is ``devices/SCHEMA.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from roofcast.hw_catalog.frozen import thaw
from roofcast.hw_catalog.spec import ENGINES, PEAK_DTYPES, HardwareSpec

KINDS: tuple[str, ...] = ("gpu", "cpu", "accelerator")
ALL_KINDS = frozenset(KINDS)
ACCELERATOR_KINDS = frozenset({"gpu", "accelerator"})

GiB = 2**30
MiB = 2**20
KiB = 2**10


@dataclass(frozen=True)
class Field:
    """One leaf key of a device file.

    ``type``: ``str``, ``int`` (integer), ``number`` (int or float), ``str_list``.
    ``required_for``: kinds for which the key must be present (empty = optional).
    ``attr``/``factor``: the ``HardwareSpec`` attribute and SI value = TOML value * factor.
    ``flat``: extra names accepted by ``derive()`` and inline specs (the dotted path and, when
    unique, the leaf name are always accepted).
    """

    path: tuple[str, ...]
    type: str
    required_for: frozenset[str] = frozenset()
    attr: str | None = None
    factor: float = 1.0
    unit: str = ""
    flat: tuple[str, ...] = ()

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def range_key(self) -> str:
        """Key of ``validate.RANGES``: the dotted path, peaks grouped per engine."""
        return ".".join(self.path[:2]) if self.path[0] == "peak_TOPS" else self.dotted


_REQ = ALL_KINDS
_BASE_FIELDS: tuple[Field, ...] = (
    Field(("id",), "str", _REQ, "id"),
    Field(("name",), "str", _REQ, "name"),
    Field(("vendor",), "str", _REQ, "vendor"),
    Field(("kind",), "str", _REQ, "kind"),
    Field(("architecture",), "str", _REQ, "architecture"),
    Field(("release_year",), "int", frozenset(), "release_year", unit="year"),
    Field(("aliases",), "str_list", frozenset(), "aliases"),
    Field(("sources",), "str_list", _REQ, "sources"),
    Field(("notes",), "str", frozenset(), "notes"),
    Field(("compute", "units"), "int", _REQ, "units", unit="units"),
    Field(("compute", "unit_name"), "str", _REQ, "unit_name"),
    Field(("compute", "boost_clock_MHz"), "number", _REQ, "clock_Hz", 1e6, "MHz",
          ("clock_MHz",)),
    Field(("memory", "capacity_GB"), "number", _REQ, "mem_capacity_bytes", GiB, "GB",
          ("mem_capacity_GB", "mem_GB")),
    Field(("memory", "bandwidth_GBps"), "number", _REQ, "mem_bw_Bps", 1e9, "GB/s",
          ("mem_bw_GBps",)),
    Field(("memory", "type"), "str", _REQ, "memory_type", flat=("memory_type",)),
    Field(("cache", "l2_MB"), "number", _REQ, "l2_bytes", MiB, "MB", ("llc_MB",)),
    Field(("cache", "l1_per_unit_KB"), "number", frozenset(), "l1_per_unit_bytes", KiB, "KB"),
    Field(("cache", "shared_mem_per_unit_KB"), "number", frozenset(),
          "shared_mem_per_unit_bytes", KiB, "KB"),
    Field(("cache", "l2_bandwidth_GBps"), "number", frozenset(), "l2_bw_Bps", 1e9, "GB/s",
          ("l2_bw_GBps",)),
    Field(("overhead", "launch_overhead_us"), "number", _REQ, "launch_overhead_s", 1e-6, "us"),
    Field(("interconnect", "host_link"), "str", ACCELERATOR_KINDS, "host_link"),
    Field(("interconnect", "host_link_GBps"), "number", ACCELERATOR_KINDS, "host_link_Bps",
          1e9, "GB/s"),
    Field(("interconnect", "device_link"), "str", frozenset(), "device_link"),
    Field(("interconnect", "device_link_GBps"), "number", frozenset(), "device_link_Bps",
          1e9, "GB/s"),
    Field(("power", "tdp_W"), "number", ACCELERATOR_KINDS, "tdp_W", 1.0, "W"),
    Field(("price", "list_price_USD"), "number", frozenset(), "price_usd", 1.0, "USD",
          ("price_USD",)),
    Field(("price", "price_date"), "str", frozenset(), "price_date"),
    Field(("price", "price_source"), "str", frozenset(), "price_source"),
)

PEAK_FIELDS: tuple[Field, ...] = tuple(
    Field(("peak_TOPS", engine, dtype), "number", frozenset(), None, 1e12, "TFLOP/s or TOPS",
          (f"{engine}_{dtype}_TOPS",))
    for engine in ENGINES for dtype in PEAK_DTYPES
)

FIELDS: tuple[Field, ...] = _BASE_FIELDS + PEAK_FIELDS
FIELDS_BY_PATH: Mapping[tuple[str, ...], Field] = {f.path: f for f in FIELDS}

SCALES: Mapping[str, tuple[tuple[str, ...], ...]] = {
    # scale factor key (top level, derived files only) -> path prefixes of the numbers it scales
    "mem_bw_scale": (("memory", "bandwidth_GBps"),),
    "peak_scale": (("peak_TOPS",),),
    "matrix_peak_scale": (("peak_TOPS", "matrix"),),
    "vector_peak_scale": (("peak_TOPS", "vector"),),
    "l2_scale": (("cache", "l2_MB"),),
    "units_scale": (("compute", "units"),),
    "launch_overhead_scale": (("overhead", "launch_overhead_us"),),
}

FREEFORM_TABLES: tuple[str, ...] = ("calibration",)
"""Top-level tables whose content is not checked (raw calibration curves)."""

EXTRA_TOP_KEYS: Mapping[str, str] = {"base": "str", **dict.fromkeys(SCALES, "number")}
"""Top-level keys besides FIELDS: ``base`` and the scale factors (derived files only)."""


def _flat_names() -> dict[str, tuple[str, ...]]:
    leaf_count: dict[str, int] = {}
    for f in FIELDS:
        leaf_count[f.path[-1]] = leaf_count.get(f.path[-1], 0) + 1
    names: dict[str, tuple[str, ...]] = {}
    for f in FIELDS:
        names[f.dotted] = f.path
        if leaf_count[f.path[-1]] == 1:
            names[f.path[-1]] = f.path
        for alias in f.flat:
            names[alias] = f.path
    return names


FLAT_NAMES: Mapping[str, tuple[str, ...]] = _flat_names()
"""Every name ``derive()`` accepts for a field (flat alias, unique leaf name, dotted path)."""


# ---------------------------------------------------------------------------- doc helpers
def get_path(doc: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """Value at ``path`` in a nested mapping, or None."""
    node: Any = doc
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def set_path(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set ``path`` in a nested dict, creating tables on the way."""
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def leaf_paths(doc: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """All leaf key paths of a nested mapping (free-form tables are one leaf)."""
    out: list[tuple[str, ...]] = []
    for key, value in doc.items():
        path = (*prefix, key)
        if isinstance(value, Mapping) and not (not prefix and key in FREEFORM_TABLES):
            out.extend(leaf_paths(value, path))
        else:
            out.append(path)
    return out


# ---------------------------------------------------------------------------- conversion
def doc_to_spec(doc: Mapping[str, Any], *, origin: str = "builtin", path: str | None = None
                ) -> HardwareSpec:
    """Build a ``HardwareSpec`` from a *validated* device document (TOML units -> SI)."""
    kwargs: dict[str, Any] = {}
    for f in _BASE_FIELDS:
        value = get_path(doc, f.path)
        if value is None:
            continue
        if f.type == "number":
            value = float(value) * f.factor
        elif f.type == "str_list":
            value = tuple(value)
        kwargs[f.attr] = value
    peaks = {}
    for f in PEAK_FIELDS:
        value = get_path(doc, f.path)
        if value is not None:
            peaks[(f.path[1], f.path[2])] = float(value) * f.factor
    return HardwareSpec(
        **kwargs, peak_flops=peaks, base=doc.get("base"), origin=origin, path=path,
        calibration=doc.get("calibration", {}),
    )


def _clean_number(x: float) -> float | int:
    """Round away float noise of unit conversion (3.35e12 / 1e9 -> 3350)."""
    r = float(f"{x:.12g}")
    return int(r) if r.is_integer() and abs(r) < 2**53 else r


def spec_to_doc(spec: HardwareSpec) -> dict[str, Any]:
    """The device document (TOML units) of a spec; inverse of :func:`doc_to_spec`."""
    doc: dict[str, Any] = {}
    for f in _BASE_FIELDS:
        value = getattr(spec, f.attr)
        if value is None or (f.type == "str_list" and not value) or (f.attr == "notes"
                                                                       and not value):
            continue
        if f.type == "number":
            value = _clean_number(value / f.factor)
        elif f.type == "str_list":
            value = list(value)
        set_path(doc, f.path, value)
    for (engine, dtype), value in spec.peak_flops.items():
        set_path(doc, ("peak_TOPS", engine, dtype), _clean_number(value / 1e12))
    if spec.base:
        doc["base"] = spec.base
    if spec.calibration:
        doc["calibration"] = thaw(spec.calibration)
    return doc
