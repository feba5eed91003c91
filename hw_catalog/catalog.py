"""The device catalog: built-in device files plus the user's folder, validated and indexed.

- Built-in: ``hw_catalog/devices/*.toml`` (package data).
- User folder: ``$ROOFCAST_HW_DIR``, else ``$XDG_CONFIG_HOME/roofcast/devices``, else
  ``~/.config/roofcast/devices``. ``roofcast hw calibrate`` writes ``local.toml`` there.
- Names resolve case- and punctuation-insensitively over ids, names and aliases
  (``"Tesla V100-PCIE-32GB"`` -> ``v100-32gb-pcie``); failing that, over the set of name tokens
  without vendor words (``"NVIDIA A100-PCIE-40GB"`` has the tokens of ``a100-40gb-pcie``) when
  exactly one device matches. ``get_device`` also takes inline what-if specs
  (``"h100-sxm:mem_bw_GBps=6700"``).
- An id or name defined twice (anywhere) is an error naming both files. A miss suggests ids:
  first those of the same family (same first name token: ``h100`` -> ``h100-pcie``,
  ``h100-sxm``), the most similar first, then the closest other ids and names. The catalog is
  cached and reloaded when a device file changes.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofcast.hw_catalog.derive import derive, derive_from_file_doc, parse_inline
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.schema import KINDS, doc_to_spec
from roofcast.hw_catalog.spec import HardwareSpec
from roofcast.hw_catalog.validate import validate_document

BUILTIN_DIR = Path(__file__).resolve().parent / "devices"
ENV_VAR = "ROOFCAST_HW_DIR"
LOCAL_ID = "local"

VENDOR_WORDS: frozenset[str] = frozenset({
    "nvidia", "tesla", "geforce", "quadro", "amd", "instinct", "radeon", "intel", "habana",
    "google", "cloud", "apple", "gpu",
})
"""Tokens ignored by the token-set fallback of name resolution."""
MAX_SUGGESTIONS = 4  # ids named by an unknown-device error (more when one family has more)


def user_dir() -> Path:
    """The user's device folder (may not exist)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "roofcast" / "devices"


def normalize_name(name: str) -> str:
    """Lowercase alphanumerics only: ``'Tesla V100-PCIE-32GB'`` -> ``'teslav100pcie32gb'``."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def family(name: str) -> str:
    """The first name token that is not a vendor word: ``'NVIDIA H100 PCIe'`` -> ``'h100'``."""
    tokens = [t for t in re.split(r"[^a-z0-9]+", name.lower()) if t and t not in VENDOR_WORDS]
    return tokens[0] if tokens else ""


def name_tokens(name: str) -> frozenset[str]:
    """Alphanumeric tokens of a name without vendor words."""
    return frozenset(t for t in re.split(r"[^a-z0-9]+", name.lower())
                     if t and t not in VENDOR_WORDS)


@dataclass(frozen=True)
class Catalog:
    """Loaded devices (id -> spec, built-in first), the file of each, and the name indexes."""

    devices: Mapping[str, HardwareSpec]
    files: Mapping[str, str]
    names: Mapping[str, str]
    tokens: Mapping[frozenset[str], str]
    user_dir: str

    def resolve(self, name: str) -> str:
        """The id of a device named by id, name or alias; ``HardwareSpecError`` on a miss."""
        key = normalize_name(name)
        if key in self.names:
            return self.names[key]
        tokens = name_tokens(name)
        if tokens in self.tokens:
            return self.tokens[tokens]
        if key == LOCAL_ID:
            raise HardwareSpecError(
                f"device 'local' is not calibrated yet: run `roofcast hw calibrate` (it writes "
                f"{Path(self.user_dir) / 'local.toml'})")
        raise HardwareSpecError(f"unknown device {name!r}; {self._suggestion(name)}")

    def _suggestion(self, name: str) -> str:
        ids = list(self.devices)
        query = name.lower()
        kin = sorted((i for i in ids if family(i) == family(name)),
                     key=lambda i: -difflib.SequenceMatcher(None, query, i).ratio())
        close = difflib.get_close_matches(query, ids, n=3, cutoff=0.5)
        by_name = difflib.get_close_matches(normalize_name(name), list(self.names), n=3,
                                            cutoff=0.6)
        ranked = list(dict.fromkeys([*kin, *close, *(self.names[n] for n in by_name)]))
        shown = ranked[:max(MAX_SUGGESTIONS, len(kin))]
        hint = f"closest ids: {', '.join(shown)}" if shown else "no close match"
        return (f"{hint}. `roofcast hw list` shows all {len(ids)} ids; a what-if device is "
                f"written 'BASE:key=value', e.g. 'h100-sxm:mem_bw_GBps=6700'")

    def get(self, name: str) -> HardwareSpec:
        return self.devices[self.resolve(name)]

    def of_kind(self, kind: str | None = None) -> list[HardwareSpec]:
        return [s for s in self.devices.values() if kind is None or s.kind == kind]


# ---------------------------------------------------------------------------- loading
def read_toml(path: Path) -> dict[str, Any]:
    """Parse one TOML file; syntax errors become ``HardwareSpecError`` naming the file."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise HardwareSpecError(f"{path}: TOML syntax error: {exc}") from None
    except OSError as exc:
        raise HardwareSpecError(f"{path}: cannot read device file: {exc}") from None


def _device_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.toml")) if folder.is_dir() else []


def _fingerprint(folders: tuple[Path, ...]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for folder in folders:
        for p in _device_files(folder):
            st = p.stat()
            out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


def load_catalog(builtin_dir: Path | None = None, user_folder: Path | None = None) -> Catalog:
    """The catalog of ``builtin_dir`` + ``user_folder`` (defaults: package data, user_dir())."""
    builtin = Path(builtin_dir or BUILTIN_DIR)
    user = Path(user_folder or user_dir())
    return _load_cached(builtin, user, _fingerprint((builtin, user)))


@functools.lru_cache(maxsize=16)
def _load_cached(builtin: Path, user: Path, fingerprint: tuple[Any, ...]) -> Catalog:
    del fingerprint  # only part of the cache key: a changed file reloads
    raw: dict[str, tuple[dict[str, Any], Path, str]] = {}
    for folder, origin in ((builtin, "builtin"), (user, "user")):
        if builtin == user and origin == "user":
            continue
        for path in _device_files(folder):
            doc = read_toml(path)
            validate_document(doc, str(path), derived="base" in doc)
            dev_id = doc["id"]
            if path.stem != dev_id:
                raise HardwareSpecError(
                    f"{path}: file name must be '{dev_id}.toml' to match its id {dev_id!r}; "
                    f"rename the file or fix the id")
            if dev_id in raw:
                raise HardwareSpecError(
                    f"device id {dev_id!r} is defined twice: {raw[dev_id][1]} and {path}; "
                    f"ids must be unique across built-in and user device files")
            file_origin = "local" if (origin == "user" and dev_id == LOCAL_ID) else origin
            raw[dev_id] = (doc, path, file_origin)
    names = _name_index(raw)
    devices: dict[str, HardwareSpec] = {}
    for dev_id in raw:
        _build(dev_id, raw, names, devices, ())
    ordered = {i: devices[i] for i in raw}
    return Catalog(devices=ordered, files={i: str(raw[i][1]) for i in raw}, names=names,
                   tokens=_token_index(raw), user_dir=str(user))


def _doc_names(dev_id: str, doc: Mapping[str, Any]) -> list[str]:
    return [dev_id, *([doc["name"]] if "name" in doc else []), *doc.get("aliases", [])]


def _name_index(raw: Mapping[str, tuple[dict[str, Any], Path, str]]) -> dict[str, str]:
    names: dict[str, str] = {}
    where: dict[str, str] = {}
    for dev_id, (doc, path, _) in raw.items():
        for name in _doc_names(dev_id, doc):
            key = normalize_name(name)
            if key in names and names[key] != dev_id:
                raise HardwareSpecError(
                    f"{path}: name {name!r} of device {dev_id!r} collides with {where[key]!r} "
                    f"of device {names[key]!r} in {raw[names[key]][1]} (names compare "
                    f"case- and punctuation-insensitively); make the alias unique")
            names[key] = dev_id
            where[key] = name
    return names


def _token_index(raw: Mapping[str, tuple[dict[str, Any], Path, str]]
                 ) -> dict[frozenset[str], str]:
    owners: dict[frozenset[str], set[str]] = {}
    for dev_id, (doc, _, _) in raw.items():
        for name in _doc_names(dev_id, doc):
            tokens = name_tokens(name)
            if tokens:
                owners.setdefault(tokens, set()).add(dev_id)
    return {t: next(iter(ids)) for t, ids in owners.items() if len(ids) == 1}


def _build(dev_id: str, raw: Mapping[str, tuple[dict[str, Any], Path, str]],
           names: Mapping[str, str], devices: dict[str, HardwareSpec],
           stack: tuple[str, ...]) -> HardwareSpec:
    if dev_id in devices:
        return devices[dev_id]
    doc, path, origin = raw[dev_id]
    if "base" not in doc:
        devices[dev_id] = doc_to_spec(doc, origin=origin, path=str(path))
        return devices[dev_id]
    if dev_id in stack:
        chain = " -> ".join((*stack, dev_id))
        raise HardwareSpecError(f"{path}: base chain loops: {chain}")
    base_id = names.get(normalize_name(doc["base"]))
    if base_id is None:
        close = difflib.get_close_matches(doc["base"], list(raw), n=3, cutoff=0.5)
        hint = f"; closest ids: {', '.join(close)}" if close else ""
        raise HardwareSpecError(f"{path}: base {doc['base']!r} is not a known device{hint}")
    base = _build(base_id, raw, names, devices, (*stack, dev_id))
    devices[dev_id] = derive_from_file_doc(base, doc, label=str(path), origin=origin,
                                           path=str(path))
    return devices[dev_id]


# ---------------------------------------------------------------------------- public API
def get_device(name: str | HardwareSpec) -> HardwareSpec:
    """A device by id, name, alias, ``local``, or inline what-if spec ``BASE:key=value,...``."""
    if isinstance(name, HardwareSpec):
        return name
    if ":" in name:
        base, changes = parse_inline(name)
        return derive(load_catalog().get(base), **changes)
    return load_catalog().get(name)


def resolve_name(name: str) -> str:
    """The catalog id for a device name found in a measurement file or nvidia-smi output."""
    return load_catalog().resolve(name)


def list_devices(kind: str | None = None) -> list[HardwareSpec]:
    """All devices (built-in, then user folder), optionally of one kind."""
    if kind is not None and kind not in KINDS:
        raise HardwareSpecError(f"unknown device kind {kind!r}; expected one of {KINDS}")
    return load_catalog().of_kind(kind)
