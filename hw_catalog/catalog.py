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
  cached and reloaded when a device file changes (each ``load_catalog`` stats the files);
  inside ``with pinned_catalog():`` it is not re-checked (loops of thousands of lookups).
"""

from __future__ import annotations

import contextvars
import difflib
import functools
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofcast.hw_catalog.derive import derive, derive_from_file_doc, parse_inline
from roofcast.hw_catalog.device_files import (
    SkippedFiles,
    catalog_files,
    check_file_name,
    fingerprint,
    read_bytes,
    read_device_file,
)
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.parsed_cache import ParsedFiles
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


def config_folder(env_var: str, name: str) -> Path:
    """A user folder of roofcast (may not exist): ``$env_var``, else
    ``$XDG_CONFIG_HOME/roofcast/NAME``, else ``~/.config/roofcast/NAME``."""
    env = os.environ.get(env_var)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "roofcast" / name


def user_dir() -> Path:
    """The user's device folder (may not exist): ``config_folder(ENV_VAR, "devices")``."""
    return config_folder(ENV_VAR, "devices")


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
    skipped: Mapping[str, str] = field(default_factory=dict)
    """user device files not loaded: path -> problem (each also a ``DeviceFileWarning``)"""

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
MAX_BASE_DEPTH = 16
"""Most ``base = ...`` links from a derived device down to a datasheet device."""


def read_toml(path: Path) -> dict[str, Any]:
    """Parse one device file of its folder (``device_files``); problems are
    ``HardwareSpecError`` naming the file."""
    return read_device_file(path, path.parent)


def load_catalog(builtin_dir: Path | None = None, user_folder: Path | None = None) -> Catalog:
    """The catalog of ``builtin_dir`` + ``user_folder`` (defaults: package data, user_dir()).

    A problem in a built-in file raises ``HardwareSpecError``; a user file with a problem (or
    deriving from one) is skipped with a ``DeviceFileWarning`` naming it, and listed in
    ``Catalog.skipped``."""
    builtin = Path(builtin_dir or BUILTIN_DIR)
    user = Path(user_folder or user_dir())
    pinned = _PINNED.get()
    if pinned is not None and pinned[0] == (builtin, user):
        return pinned[1]
    return _load_cached(builtin, user, fingerprint((builtin, user)))


_PINNED: contextvars.ContextVar[tuple[tuple[Path, Path], Catalog] | None] = (
    contextvars.ContextVar("roofcast_pinned_catalog", default=None))


@contextmanager
def pinned_catalog() -> Iterator[Catalog]:
    """Within the block, ``load_catalog()`` (and so ``get_device``) of the same folders hands
    out the catalog loaded on entry without stat-ing every device file again (~0.5 ms a call):
    for loops of many predictions that look devices up thousands of times (a sweep task). A
    device file edited inside the block is seen after it. Per thread / context."""
    catalog = load_catalog()
    token = _PINNED.set(((Path(BUILTIN_DIR), Path(user_dir())), catalog))
    try:
        yield catalog
    finally:
        _PINNED.reset(token)


Raw = dict[str, tuple[dict[str, Any], Path, str]]
"""device id -> (document, file, origin)"""


@functools.lru_cache(maxsize=16)
def _load_cached(builtin: Path, user: Path, fingerprint: tuple[Any, ...]) -> Catalog:
    del fingerprint  # only part of the cache key: a changed file reloads
    skipped = SkippedFiles()
    raw: Raw = {}
    parsed = ParsedFiles()
    for folder, path, origin in catalog_files(builtin, user):
        with skipped.guard(path, origin):
            doc = parsed.parse(read_bytes(path, folder), str(path))
            validate_document(doc, str(path), derived="base" in doc)
            dev_id = doc["id"]
            check_file_name(path, dev_id)
            if dev_id in raw:
                raise HardwareSpecError(
                    f"device id {dev_id!r} is defined twice: {raw[dev_id][1]} and {path}; "
                    f"ids must be unique across built-in and user device files")
            file_origin = "local" if (origin == "user" and dev_id == LOCAL_ID) else origin
            raw[dev_id] = (doc, path, file_origin)
    parsed.save()
    names = _name_index(raw, skipped)
    raw = {i: v for i, v in raw.items() if i not in skipped.ids}
    devices: dict[str, HardwareSpec] = {}
    for dev_id in raw:
        _build(dev_id, raw, names, devices, skipped)
    raw = {i: v for i, v in raw.items() if i in devices}
    skipped.warn()
    return Catalog(devices={i: devices[i] for i in raw}, files={i: str(raw[i][1]) for i in raw},
                   names={k: i for k, i in names.items() if i in devices},
                   tokens=_token_index(raw), user_dir=str(user),
                   skipped=dict(skipped.problems))


def _doc_names(dev_id: str, doc: Mapping[str, Any]) -> list[str]:
    return [dev_id, *([doc["name"]] if "name" in doc else []), *doc.get("aliases", [])]


def _name_index(raw: Raw, skipped: SkippedFiles) -> dict[str, str]:
    """normalized name -> id; a device with a name taken by an earlier one is skipped."""
    names: dict[str, str] = {}
    where: dict[str, str] = {}
    for dev_id, (doc, path, origin) in raw.items():
        own = {normalize_name(n): n for n in _doc_names(dev_id, doc)}
        with skipped.guard(path, origin, dev_id):
            for key, name in own.items():
                if key in names and names[key] != dev_id:
                    raise HardwareSpecError(
                        f"{path}: name {name!r} of device {dev_id!r} collides with "
                        f"{where[key]!r} of device {names[key]!r} in {raw[names[key]][1]} (names "
                        f"compare case- and punctuation-insensitively); make the alias unique")
            for key, name in own.items():
                names[key] = dev_id
                where[key] = name
    return names


def _token_index(raw: Raw) -> dict[frozenset[str], str]:
    owners: dict[frozenset[str], set[str]] = {}
    for dev_id, (doc, _, _) in raw.items():
        for name in _doc_names(dev_id, doc):
            tokens = name_tokens(name)
            if tokens:
                owners.setdefault(tokens, set()).add(dev_id)
    return {t: next(iter(ids)) for t, ids in owners.items() if len(ids) == 1}


def _base_chain(dev_id: str, raw: Raw, names: Mapping[str, str], skipped: SkippedFiles
                ) -> list[str]:
    """``[dev_id, its base, its base's base, ...]`` down to a datasheet device; raises for an
    unknown base, a loop, or more than ``MAX_BASE_DEPTH`` links."""
    chain = [dev_id]
    while "base" in raw[chain[-1]][0]:
        doc, path, _ = raw[chain[-1]]
        base_id = names.get(normalize_name(doc["base"]))
        if base_id is None or base_id not in raw:
            raise HardwareSpecError(f"{path}: base {doc['base']!r} is not a known device"
                                    f"{_missing_base_hint(doc['base'], raw, skipped)}")
        if base_id in chain:
            raise HardwareSpecError(f"{raw[dev_id][1]}: base chain loops: "
                                    f"{' -> '.join((*chain, base_id))}")
        chain.append(base_id)
        if len(chain) > MAX_BASE_DEPTH + 1:
            raise HardwareSpecError(
                f"{raw[dev_id][1]}: derived from a derived device more than {MAX_BASE_DEPTH} "
                f"times ({' -> '.join(chain[:3])} -> ... -> {chain[-1]} -> ...); derive it "
                f"from a device nearer the datasheet device instead")
    return chain


def _missing_base_hint(base: str, raw: Raw, skipped: SkippedFiles) -> str:
    if base in skipped.stems:
        return f" (its file {skipped.stems[base]} was skipped: see the warning about it)"
    close = difflib.get_close_matches(base, list(raw), n=3, cutoff=0.5)
    return f"; closest ids: {', '.join(close)}" if close else ""


def _build(dev_id: str, raw: Raw, names: Mapping[str, str], devices: dict[str, HardwareSpec],
           skipped: SkippedFiles) -> HardwareSpec | None:
    """The spec of ``dev_id`` (its bases first); None when it or a base was skipped."""
    if dev_id in devices or dev_id in skipped.ids:
        return devices.get(dev_id)
    doc, path, origin = raw[dev_id]
    with skipped.guard(path, origin, dev_id):
        if "base" not in doc:
            devices[dev_id] = doc_to_spec(doc, origin=origin, path=str(path))
            return devices[dev_id]
        base_id = _base_chain(dev_id, raw, names, skipped)[1]
        base = _build(base_id, raw, names, devices, skipped)
        if base is None:
            raise HardwareSpecError(f"{path}: its base {doc['base']!r} was skipped "
                                    f"({raw[base_id][1]}: see the warning about it)")
        devices[dev_id] = derive_from_file_doc(base, doc, label=str(path), origin=origin,
                                               path=str(path))
    return devices.get(dev_id)


def _get(catalog: Catalog, name: str) -> HardwareSpec:
    """``catalog.get(name)``; a name whose user file was skipped raises that file's problem."""
    if normalize_name(name) not in catalog.names:
        for path, problem in catalog.skipped.items():
            if Path(path).stem == name.strip().lower():
                raise HardwareSpecError(f"device {name!r} was not loaded: {problem}")
    return catalog.get(name)


# ---------------------------------------------------------------------------- public API
def get_device(name: str | HardwareSpec) -> HardwareSpec:
    """A device by id, name, alias, ``local``, or inline what-if spec ``BASE:key=value,...``."""
    if isinstance(name, HardwareSpec):
        return name
    if ":" in name:
        base, changes = parse_inline(name)
        return derive(_get(load_catalog(), base), **changes)
    return _get(load_catalog(), name)


def resolve_name(name: str) -> str:
    """The catalog id for a device name found in a measurement file or nvidia-smi output."""
    return load_catalog().resolve(name)


def list_devices(kind: str | None = None) -> list[HardwareSpec]:
    """All devices (built-in, then user folder), optionally of one kind."""
    if kind is not None and kind not in KINDS:
        raise HardwareSpecError(f"unknown device kind {kind!r}; expected one of {KINDS}")
    return load_catalog().of_kind(kind)
