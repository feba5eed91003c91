"""The systems catalog: ``hw_catalog/systems/*.toml`` plus the user's folder, validated.

- Built-in: ``hw_catalog/systems/*.toml`` (schema: ``systems/SCHEMA.md``).
- User folder: ``$ROOFCAST_SYSTEMS_DIR``, else ``$XDG_CONFIG_HOME/roofcast/systems``, else
  ``~/.config/roofcast/systems``; files are read like device files (confined, size-capped,
  UTF-8, TOML) and a bad user file is skipped with a ``DeviceFileWarning``.
- ``get_system(ref)`` takes an id, name or alias (case- and punctuation-insensitive) or a
  what-if ``"hgx-h100:nodes=4,nic_GBps=100"`` (keys: :data:`WHATIF_KEYS`). Every system's
  ``device`` must resolve in the device catalog.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofcast.hw_catalog.catalog import config_folder, get_device, normalize_name
from roofcast.hw_catalog.derive import parse_inline
from roofcast.hw_catalog.device_files import (
    SkippedFiles,
    catalog_files,
    check_file_name,
    fingerprint,
    read_device_file,
)
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.system import FABRIC_KINDS, FabricSpec, NicSpec, SystemSpec

BUILTIN_SYSTEMS_DIR = Path(__file__).resolve().parent / "systems"
SYSTEMS_ENV_VAR = "ROOFCAST_SYSTEMS_DIR"


@dataclass(frozen=True)
class Field:
    """One key of a system file: type (str | str_list | int | number), required, range."""

    type: str
    required: bool = False
    lo: float | None = None
    hi: float | None = None


TOP: dict[str, Field] = {
    "id": Field("str", True), "name": Field("str", True), "aliases": Field("str_list"),
    "device": Field("str", True), "devices_per_node": Field("int", True, 1, 1024),
    "nodes": Field("int", False, 1, 100_000), "sources": Field("str_list", True),
    "notes": Field("str"), "measured_as": Field("str_list"),
}
FABRIC: dict[str, Field] = {
    "kind": Field("str", True), "link_GBps": Field("number", True, 0.1, 100_000),
    "latency_us": Field("number", True, 0.01, 1000),
}
NIC: dict[str, Field] = {
    "count_per_node": Field("int", True, 1, 256), "GBps": Field("number", True, 0.1, 10_000),
    "latency_us": Field("number", True, 0.01, 1000),
}
TABLES: dict[str, tuple[dict[str, Field], bool]] = {"fabric": (FABRIC, True), "nic": (NIC, False)}
"""table -> (its keys, required)"""

WHATIF_KEYS: dict[str, tuple[str, ...]] = {
    "nodes": ("nodes",), "devices_per_node": ("devices_per_node",), "device": ("device",),
    "fabric": ("fabric", "kind"), "link_GBps": ("fabric", "link_GBps"),
    "fabric_latency_us": ("fabric", "latency_us"), "nic_count": ("nic", "count_per_node"),
    "nic_GBps": ("nic", "GBps"), "nic_latency_us": ("nic", "latency_us"),
}
"""what-if key -> path in the system document"""


# ---------------------------------------------------------------------------- validation
def _type_ok(value: Any, typ: str) -> bool:
    if typ == "str":
        return isinstance(value, str) and bool(value.strip())
    if typ == "str_list":
        return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
    if isinstance(value, bool):
        return False
    if typ == "int":
        return isinstance(value, int)
    return isinstance(value, int | float) and math.isfinite(value)


def _check_keys(node: Mapping[str, Any], fields: Mapping[str, Field], where: str,
                errors: list[str]) -> None:
    for key, value in node.items():
        if key in TABLES and fields is TOP:
            continue
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=2, cutoff=0.5)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            errors.append(f"{where}{key}: unknown key{hint}; allowed: {', '.join(fields)}")
            continue
        spec = fields[key]
        if not _type_ok(value, spec.type):
            errors.append(f"{where}{key}: must be {spec.type.replace('_', ' of ')}, "
                          f"got {value!r}")
        elif spec.lo is not None and not (spec.lo <= value <= (spec.hi or math.inf)):
            errors.append(f"{where}{key} = {value}: outside the plausible range "
                          f"[{spec.lo:g}, {spec.hi:g}]")
    for key, spec in fields.items():
        if spec.required and key not in node:
            errors.append(f"{where}{key}: missing (required)")


def validate_system_document(doc: Mapping[str, Any], label: str) -> None:
    """Raise ``HardwareSpecError`` listing every problem of a system document (``label``
    names the file or the what-if spec)."""
    errors: list[str] = []
    _check_keys(doc, TOP, "", errors)
    for table, (fields, required) in TABLES.items():
        if table not in doc:
            if required:
                errors.append(f"[{table}]: missing table (required)")
            continue
        if not isinstance(doc[table], dict):
            errors.append(f"{table}: must be a table [{table}]")
            continue
        _check_keys(doc[table], fields, f"{table}.", errors)
    fabric = doc.get("fabric")
    if isinstance(fabric, dict) and "kind" in fabric and fabric["kind"] not in FABRIC_KINDS:
        errors.append(f"fabric.kind: {fabric['kind']!r} is not one of {', '.join(FABRIC_KINDS)}")
    if doc.get("sources") == []:
        errors.append("sources: empty; name the datasheet each figure comes from")
    if isinstance(doc.get("nodes"), int) and doc["nodes"] > 1 and "nic" not in doc:
        errors.append(f"nodes = {doc['nodes']}: a multi-node system needs a [nic] table "
                      f"(count_per_node, GBps, latency_us; as what-if keys nic_count, nic_GBps, "
                      f"nic_latency_us)")
    if isinstance(doc.get("device"), str) and not errors:
        try:
            get_device(doc["device"])
        except HardwareSpecError as exc:
            errors.append(f"device: {exc}")
    if errors:
        raise HardwareSpecError(f"{label}: " + "; ".join(errors))


def doc_to_system(doc: Mapping[str, Any]) -> SystemSpec:
    """A ``SystemSpec`` from a validated document (device stored as its catalog id)."""
    nic = doc.get("nic")
    return SystemSpec(
        id=doc["id"], name=doc["name"], device=get_device(doc["device"]).id,
        devices_per_node=doc["devices_per_node"], nodes=doc.get("nodes", 1),
        fabric=FabricSpec(doc["fabric"]["kind"], float(doc["fabric"]["link_GBps"]),
                          float(doc["fabric"]["latency_us"])),
        nic=NicSpec(nic["count_per_node"], float(nic["GBps"]), float(nic["latency_us"]))
        if nic else None,
        sources=tuple(doc["sources"]), notes=doc.get("notes", ""),
        aliases=tuple(doc.get("aliases", ())), measured_as=tuple(doc.get("measured_as", ())))


def system_to_doc(spec: SystemSpec) -> dict[str, Any]:
    """The document of a system (inverse of :func:`doc_to_system`)."""
    doc: dict[str, Any] = {
        "id": spec.id, "name": spec.name, "device": spec.device,
        "devices_per_node": spec.devices_per_node, "nodes": spec.nodes,
        "sources": list(spec.sources), "notes": spec.notes,
        "fabric": {"kind": spec.fabric.kind, "link_GBps": spec.fabric.link_GBps,
                   "latency_us": spec.fabric.latency_us},
    }
    if spec.aliases:
        doc["aliases"] = list(spec.aliases)
    if spec.measured_as:
        doc["measured_as"] = list(spec.measured_as)
    if spec.nic:
        doc["nic"] = {"count_per_node": spec.nic.count_per_node, "GBps": spec.nic.GBps,
                      "latency_us": spec.nic.latency_us}
    return doc


# ---------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class SystemCatalog:
    """Loaded systems (id -> spec), the file of each, the name index, skipped user files."""

    systems: Mapping[str, SystemSpec]
    files: Mapping[str, str]
    names: Mapping[str, str]
    skipped: Mapping[str, str]

    def resolve(self, ref: str) -> str:
        key = normalize_name(ref)
        if key in self.names:
            return self.names[key]
        close = difflib.get_close_matches(ref.lower(), list(self.systems), n=4, cutoff=0.4)
        hint = f"closest ids: {', '.join(close)}" if close else "no close match"
        raise HardwareSpecError(
            f"unknown system {ref!r}; {hint}. Known: {', '.join(self.systems)}; a what-if "
            f"system is written 'BASE:key=value', e.g. 'hgx-h100:nodes=4'")


def user_systems_dir() -> Path:
    """The user's system folder (may not exist)."""
    return config_folder(SYSTEMS_ENV_VAR, "systems")


def load_systems(builtin_dir: Path | None = None, user_folder: Path | None = None
                 ) -> SystemCatalog:
    """Systems of ``builtin_dir`` + ``user_folder`` (defaults: package data,
    ``user_systems_dir()``); a built-in problem raises, a user file's is skipped with a warning."""
    builtin = Path(builtin_dir or BUILTIN_SYSTEMS_DIR)
    user = Path(user_folder or user_systems_dir())
    return _load_cached(builtin, user, fingerprint((builtin, user)))


@functools.lru_cache(maxsize=8)
def _load_cached(builtin: Path, user: Path, fingerprint: tuple[Any, ...]) -> SystemCatalog:
    del fingerprint  # only part of the cache key
    skipped = SkippedFiles()
    systems: dict[str, SystemSpec] = {}
    files: dict[str, str] = {}
    names: dict[str, str] = {}
    for folder, path, origin in catalog_files(builtin, user):
        with skipped.guard(path, origin):
            doc = read_device_file(path, folder)
            validate_system_document(doc, str(path))
            sys_id = doc["id"]
            check_file_name(path, sys_id)
            own = {normalize_name(n) for n in (sys_id, doc["name"], *doc.get("aliases", []))}
            for key in own:
                if key in names:
                    raise HardwareSpecError(
                        f"{path}: id, name or alias of {sys_id!r} collides with system "
                        f"{names[key]!r} ({files[names[key]]}); make it unique")
            systems[sys_id] = doc_to_system(doc)
            files[sys_id] = str(path)
            names.update(dict.fromkeys(own, sys_id))
    skipped.warn()
    return SystemCatalog(systems=systems, files=files, names=names,
                         skipped=dict(skipped.problems))


# ---------------------------------------------------------------------------- public API
def derive_system(base: SystemSpec, **changes: Any) -> SystemSpec:
    """A what-if system: ``base`` with :data:`WHATIF_KEYS` changed (values may be strings).

    >>> derive_system(get_system("hgx-h100"), nodes=4).n_devices
    32
    """
    if not changes:
        raise HardwareSpecError("derive_system() needs at least one key=value change")
    doc = system_to_doc(base)
    for key, value in changes.items():
        if key not in WHATIF_KEYS:
            close = difflib.get_close_matches(key, list(WHATIF_KEYS), n=2, cutoff=0.5)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise HardwareSpecError(f"unknown system key {key!r}{hint}; allowed: "
                                    f"{', '.join(WHATIF_KEYS)}")
        path = WHATIF_KEYS[key]
        table = doc
        if len(path) == 2:
            if path[0] not in doc and path[0] != "nic":
                raise HardwareSpecError(
                    f"system {base.id!r} has no [{path[0]}] table, so {key!r} cannot be changed")
            table = doc.setdefault(path[0], {})
        table[path[-1]] = _coerce(key, (TOP | FABRIC | NIC).get(path[-1], Field("str")), value)
    desc = ",".join(f"{k}={v}" for k, v in changes.items())
    doc["id"] = f"{base.id}:{desc}"
    doc["name"] = f"{base.name} [{desc}]"
    doc["notes"] = f"Hypothetical system derived from '{base.id}' ({desc}). {base.notes}".strip()
    doc["sources"] = [*base.sources, f"derived from '{base.id}' by {desc} (what-if values)"]
    doc.pop("aliases", None)
    doc.pop("measured_as", None)
    if "nic" in doc and not base.nic and len(doc["nic"]) < len(NIC):
        raise HardwareSpecError(
            f"system {base.id!r} has no [nic] table: give nic_count, nic_GBps and nic_latency_us "
            f"together to add one, e.g. '{base.id}:nodes=2,nic_count=1,nic_GBps=25,"
            "nic_latency_us=5'")
    validate_system_document(doc, f"what-if system {doc['id']!r}")
    return doc_to_system(doc)


def _coerce(key: str, spec: Field, value: Any) -> Any:
    if spec.type == "str":
        return str(value)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise HardwareSpecError(f"value of {key!r} must be a number, got {value!r}") from None
    if spec.type == "int":
        if not number.is_integer():
            raise HardwareSpecError(f"value of {key!r} must be an integer, got {value!r}")
        return int(number)
    return number


def get_system(ref: str | SystemSpec) -> SystemSpec:
    """A system by id, name, alias, or what-if ``BASE:key=value,...``."""
    if isinstance(ref, SystemSpec):
        return ref
    catalog = load_systems()
    if ":" in ref:
        try:
            base, changes = parse_inline(ref)
        except HardwareSpecError:
            raise HardwareSpecError(
                f"what-if system {ref!r} must look like 'BASE:key=value,...' with each key once, "
                f"e.g. 'hgx-h100:nodes=4,nic_GBps=100'; keys: {', '.join(WHATIF_KEYS)}") from None
        return derive_system(catalog.systems[catalog.resolve(base)], **changes)
    return catalog.systems[catalog.resolve(ref)]


def system_ids() -> tuple[str, ...]:
    """Ids of all loaded systems (built-in first, then the user's folder)."""
    return tuple(load_systems().systems)


def list_systems() -> list[SystemSpec]:
    """All loaded systems."""
    return list(load_systems().systems.values())


# ---------------------------------------------------------------------------- ad-hoc systems
NODE_DEVICES = 8
"""Devices per node of an ad-hoc system of more than this many devices (HGX/DGX/OAM boards)."""

SWITCHED_FORM_FACTORS = ("sxm", "hgx", "oam", "gb200")
"""A device whose id, name or alias holds one of these is a baseboard part: NVLink through
NVSwitch at any device count (SXM on HGX/DGX boards, GB200 in an NVL72 rack; V100 SXM2 on a
DGX-1's hybrid cube mesh is an exception this rule does not see). Other NVLink parts are PCIe cards
joined in pairs by NVLink bridges (A100/H100 PCIe, A40, A30, RTX A6000, GH200 NVL2)."""

FABRIC_LATENCY_US = {"nvswitch": 2.0, "nvlink-pairs": 2.0, "infinity-fabric": 2.0,
                     "pcie-host": 10.0}
"""Typical per-hop latencies as NCCL/RCCL sees them (the catalog systems' values; not measured)."""

HOPPER_LINK_Bps = 900e9
"""NVLink 4 (H100 SXM, 900 GB/s bidirectional) and later ship with 400 Gb/s NICs per GPU
(DGX H100/B200); earlier SXM parts with 200 Gb/s HDR (DGX A100)."""


@dataclass(frozen=True)
class _Fabric:
    """What :func:`system_from_device` infers from a device's ``[interconnect]``."""

    kind: str
    link_GBps: float  # noqa: N815 (unit suffix)
    why: str


def _names(hw: Any) -> str:
    return " ".join((hw.id, hw.name, *hw.aliases)).lower()


def _switched(hw: Any, n: int) -> _Fabric | None:
    del n
    link = (hw.device_link or "").lower()
    if "nvlink" in link and any(k in _names(hw) for k in SWITCHED_FORM_FACTORS):
        return _Fabric("nvswitch", hw.device_link_Bps / 2e9,
                       f"{hw.device_link} through NVSwitch (a baseboard part): "
                       f"{hw.device_link_Bps / 2e9:g} GB/s per direction per device")
    return None


def _bridged(hw: Any, n: int) -> _Fabric | None:
    link = (hw.device_link or "").lower()
    if "nvlink" in link:
        between = (f"; pairs talk over the host link ({hw.host_link})" if n > 2 else "")
        return _Fabric("nvlink-pairs", hw.device_link_Bps / 2e9,
                       f"{hw.device_link} joining devices in pairs: "
                       f"{hw.device_link_Bps / 2e9:g} GB/s per direction inside a pair{between}")
    return None


def _infinity_fabric(hw: Any, n: int) -> _Fabric | None:
    del n
    if "infinity fabric" in (hw.device_link or "").lower():
        return _Fabric("infinity-fabric", hw.device_link_Bps / 2e9,
                       f"{hw.device_link}, fully connected: {hw.device_link_Bps / 2e9:g} GB/s per "
                       "direction over all of a device's links")
    return None


def _pcie_host(hw: Any, n: int) -> _Fabric | None:
    del n
    if not hw.host_link_Bps:
        return None
    return _Fabric("pcie-host", hw.host_link_Bps / 1e9,
                   f"no device-to-device link used: through the host over {hw.host_link} "
                   f"({hw.host_link_Bps / 1e9:g} GB/s per direction)")


FABRIC_RULES = (_switched, _bridged, _infinity_fabric, _pcie_host)
"""Tried in order by :func:`system_from_device`; the first that applies names the fabric."""


def _nic_guess(hw: Any, fabric: _Fabric, per_node: int) -> tuple[NicSpec, str]:
    if fabric.kind == "nvswitch":
        gbps = 50.0 if hw.device_link_Bps >= HOPPER_LINK_Bps else 25.0
        nic = NicSpec(per_node, gbps, 3.0)
        return nic, (f"NIC GUESSED: one {gbps * 8:g} Gb/s InfiniBand NIC per device "
                     f"({'DGX H100/B200' if gbps == 50 else 'DGX A100'} style)")
    nic = NicSpec(1, 25.0, 5.0)
    return nic, "NIC GUESSED: one 200 Gb/s NIC per node (a common PCIe server configuration)"


def _from_catalog(device: str, n: int) -> SystemSpec | None:
    """A built-in single-node system of ``device`` that ``n`` devices fit: the system itself
    (``n`` = its devices), ``n`` of its devices (fewer; its measured curves still apply), or
    ``n / devices`` nodes of it (a multiple; needs its ``[nic]``)."""
    catalog = load_systems()
    for sys_id, system in catalog.systems.items():
        builtin = Path(catalog.files[sys_id]).parent == BUILTIN_SYSTEMS_DIR
        if system.device != device or system.nodes != 1 or not builtin:
            continue
        per_node = system.devices_per_node
        if n == per_node:
            return system
        if n < per_node:
            return dataclasses.replace(derive_system(system, devices_per_node=n),
                                       measured_as=system.measured_as)
        if n % per_node == 0 and system.nic:
            return derive_system(system, nodes=n // per_node)
    return None


def system_from_device(hw: Any, n_devices: int) -> SystemSpec:
    """A system of ``n_devices`` of catalog device ``hw`` (id, name or ``HardwareSpec``).

    A built-in single-node system of that device answers where ``n_devices`` fits it
    (:func:`_from_catalog`: ``h100-sxm`` x 8 is ``hgx-h100``, x 32 ``hgx-h100:nodes=4``, x 4
    ``hgx-h100:devices_per_node=4``), so both ways of asking give one answer. Otherwise an
    ad-hoc system: the fabric follows the device's ``[interconnect]`` (:data:`FABRIC_RULES`,
    first match): NVLink on a baseboard part (:data:`SWITCHED_FORM_FACTORS`) -> ``nvswitch``;
    other NVLink parts -> ``nvlink-pairs`` (bridges); Infinity Fabric -> ``infinity-fabric``;
    else ``pcie-host`` at the host link. Link bandwidth per direction = the device's
    ``device_link`` (quoted bidirectional) / 2, or its ``host_link`` (per direction). More than
    :data:`NODE_DEVICES` devices -> nodes of 8 with a NIC guess that the notes name (one
    400 Gb/s NIC per device for NVLink 4+ SXM parts, 200 Gb/s for earlier, one 200 Gb/s NIC
    per node otherwise).
    """
    from roofcast.hw_catalog.spec import HardwareSpec

    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise HardwareSpecError(f"number of devices must be a whole number >= 1, got {n_devices!r}")
    spec = hw if isinstance(hw, HardwareSpec) else get_device(hw)
    if spec.origin == "builtin" and (known := _from_catalog(spec.id, n_devices)):
        return known
    per_node = min(n_devices, NODE_DEVICES)
    if n_devices % per_node:
        raise HardwareSpecError(
            f"{n_devices} devices of {spec.id} do not fill nodes of {NODE_DEVICES}; use a multiple "
            f"of {NODE_DEVICES}, or a catalog system (roofcast systems list) or a what-if "
            f"'hgx-h100:nodes=N'")
    fabric = next((f for rule in FABRIC_RULES if (f := rule(spec, per_node))), None)
    if fabric is None:
        raise HardwareSpecError(
            f"device {spec.id!r} lists no host or device link in its [interconnect] table, so no "
            "system can be built from it; add host_link_GBps, or write a system file")
    nodes = n_devices // per_node
    nic, nic_note = _nic_guess(spec, fabric, per_node) if nodes > 1 else (None, "")
    notes = (f"Ad-hoc system of {n_devices} x {spec.id}"
             f"{f' in {nodes} nodes of {per_node}' if nodes > 1 else ''}: {fabric.why}. "
             f"Latencies are typical values, not measured. {nic_note}").strip()
    return SystemSpec(
        id=f"{spec.id}-x{n_devices}", name=f"{n_devices}x {spec.name}", device=spec.id,
        devices_per_node=per_node, nodes=nodes,
        fabric=FabricSpec(fabric.kind, round(fabric.link_GBps, 6), FABRIC_LATENCY_US[fabric.kind]),
        nic=nic, sources=(*spec.sources, "roofcast.hw_catalog.systems.system_from_device "
                          "(fabric inferred from the device's [interconnect])"),
        notes=notes)


def resolve_system(system: Any = None, *, hw: Any = None, devices: int | None = None
                   ) -> SystemSpec:
    """The system of a request given exactly one way: ``system`` (id, name, alias, what-if
    ``"hgx-h100:nodes=4"`` or a ``SystemSpec``), or ``hw`` with ``devices`` (an ad-hoc system,
    :func:`system_from_device`)."""
    if system is not None and (hw is not None or devices is not None):
        raise HardwareSpecError(
            "give a system, or a device with a device count, not both (--system ID, or "
            "--hw ID --devices N); a system already says its devices")
    if system is not None:
        return get_system(system)
    if hw is None and devices is None:
        raise HardwareSpecError("no system given: name one (--system ID, e.g. hgx-h100) or a "
                                "device and a count (--hw h100-sxm --devices 8)")
    if hw is None:
        raise HardwareSpecError(f"{devices} devices of what? name the device too (--hw ID "
                                f"--devices {devices}), or a system (--system ID)")
    if devices is None:
        raise HardwareSpecError("a device count is needed with a device (--devices N), or name "
                                "a system (--system ID)")
    return system_from_device(hw, devices)
