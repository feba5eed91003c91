"""Read and validate a sweep file: ``read_spec(path) -> SweepSpec``.

The file is TOML, one ``[sweep]`` table (lists ``LIST_KEYS``: models, devices, batches,
precisions, modes, runtimes, plans, input_tokens, output_tokens; ``name``, optional
``estimator`` and ``baseline``) and its ``[sweep.dims]``; docs/design/module-notes.md has an
example. Which combinations are cells is ``types.cell_groups``. Every key is checked and each
problem is a ``SweepSpecError`` naming the key, the bad value and what to write. A device id
missing from the catalog is not a spec error (its cells carry the error); ``kind:KIND``
expands to the catalog's devices of that kind; ``system:ID`` entries are kept as written.
Bounded for any input: the guarded loader (``hw_catalog.safe_load``), model paths through
``confined.confined_path``, ``MAX_SPEC_BYTES``, ``MAX_CELLS``, ``MAX_ENTRY_CELLS`` and
``graph_import.budgets``.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from roofcast.graph_import.budgets import BATCH, TOKENS, Limit
from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm.load import bundled_llm_info, bundled_llms
from roofcast.hw_catalog.catalog import get_device
from roofcast.hw_catalog.confined import confined_path, read_capped
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.safe_load import load_toml
from roofcast.hw_catalog.schema import KINDS
from roofcast.predictor.estimator_registry import estimator_names
from roofcast.predictor.llm.types import WEIGHT_DTYPES
from roofcast.predictor.precision import PRECISIONS
from roofcast.predictor.runtimes.catalog import runtime_names
from roofcast.predictor.sweeps.loaders import LLM_PREFIX
from roofcast.predictor.sweeps.plans import canonical_plan
from roofcast.predictor.sweeps.tasks import KIND_PREFIX, MAX_TASK_CELLS, expand_devices
from roofcast.predictor.sweeps.types import (
    DEFAULT_RUNTIME,
    ID_SEPARATOR,
    SINGLE,
    SWEEP_MODES,
    SYSTEM_PREFIX,
    SweepSpec,
    SweepSpecError,
    cell_groups,
)
from roofcast.training_data import zoo

MAX_SPEC_BYTES = 256 * 1024
#: 10^8 cells: far past what one sweep should be (10^7 on a 32-worker cluster)
MAX_CELLS = 10**8
#: cells of one hardware entry (the least a task holds: ~1 kB each in memory)
MAX_ENTRY_CELLS = Limit("ROOFCAST_MAX_TASK_CELLS", MAX_TASK_CELLS,
                        "cells per hardware entry (and per task)")
#: model paths: the suffix (any case) tells a graph from an LLM config
PATH_SUFFIXES = (".onnx", ".json")
LIST_KEYS = ("models", "devices", "batches", "precisions", "modes", "runtimes", "plans",
             "input_tokens", "output_tokens")
#: precisions a sweep may list: the graph predictor's and the serving weights' dtypes
SWEEP_PRECISIONS = tuple(dict.fromkeys((*PRECISIONS, *WEIGHT_DTYPES)))
KEYS = (*LIST_KEYS, "name", "estimator", "baseline", "dims")
REQUIRED = ("models", "devices")


def read_spec(path: str | Path) -> SweepSpec:
    """The validated spec of the TOML file at ``path`` (module docstring)."""
    path = Path(path)
    if not os.path.lexists(path):
        raise SweepSpecError(f"sweep file {str(path)!r} does not exist or is not a file")
    data = read_capped(path, max_bytes=MAX_SPEC_BYTES, what="sweep file (names, not data: "
                       "use kind:KIND selectors)", error=SweepSpecError)
    doc = load_toml(data, f"sweep file {path} is not valid UTF-8 TOML", error=SweepSpecError,
                    max_bytes=MAX_SPEC_BYTES)
    return parse_spec(doc, source=path)


def parse_spec(doc: Mapping[str, Any], *, source: Path) -> SweepSpec:
    """The spec of a parsed TOML document (``source``: the file, for messages and paths)."""
    where = str(source)
    extra = sorted(set(doc) - {"sweep"})
    if extra:
        raise SweepSpecError(f"{where}: unknown top-level key(s) {extra}; everything goes under "
                             "a [sweep] table")
    table = doc.get("sweep")
    if not isinstance(table, Mapping):
        raise SweepSpecError(f"{where}: no [sweep] table; start the file with [sweep] and "
                             "models = [...], devices = [...]")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise SweepSpecError(f"{where}: unknown key(s) in [sweep]: {unknown}; the keys are "
                             f"{', '.join(KEYS)}")
    for key in REQUIRED:
        if key not in table:
            raise SweepSpecError(f"{where}: [sweep] has no {key!r}; add {key} = [...]")
    lists = {key: _list(table, key, where) for key in LIST_KEYS if key in table}
    pairs = len(lists.get("input_tokens", ())) * len(lists.get("output_tokens", ()))
    if pairs > MAX_ENTRY_CELLS.value():  # before the grid's token pairs are built
        raise SweepSpecError(f"{where}: [sweep] input_tokens x output_tokens make {pairs:,} "
                             "request shapes; split the sweep into several files")
    root = source.resolve().parent
    models = [_model(m, root, where) for m in lists["models"]]
    devices = _devices(lists["devices"], where)
    plans = tuple(_checked(lists, "plans", _plan, where, (SINGLE,)))
    if len(set(plans)) < len(plans):
        raise SweepSpecError(f"{where}: [sweep] plans lists one plan twice (parts in another "
                             "order are the same plan); list it once")
    spec = SweepSpec(
        models=tuple(m for m, _ in models), devices=devices,
        llms=tuple(m for m, is_llm in models if is_llm),
        batches=tuple(_checked(lists, "batches", _bounded(BATCH), where, (1,))),
        precisions=tuple(_checked(lists, "precisions", _choice(SWEEP_PRECISIONS), where,
                                  ("fp32",))),
        modes=tuple(_checked(lists, "modes", _choice(SWEEP_MODES), where, ("infer",))),
        runtimes=tuple(_checked(lists, "runtimes",
                                _choice((DEFAULT_RUNTIME, *runtime_names())), where,
                                (DEFAULT_RUNTIME,))),
        plans=plans,
        input_tokens=tuple(_checked(lists, "input_tokens", _bounded(TOKENS), where, (512,))),
        output_tokens=tuple(_checked(lists, "output_tokens", _bounded(TOKENS), where, (128,))),
        dims=_dims(table.get("dims", {}), where),
        estimator=_scalar(table, "estimator", _choice(estimator_names()), where, None),
        baseline=_baseline(table.get("baseline"), devices, where),
        name=_scalar(table, "name", _name, where, source.stem),
        source=str(source.resolve()),
    )
    _check_entry_cells(spec, where)
    if spec.n_cells == 0:
        raise SweepSpecError(f"{where}: the grid is empty: no model has a cell with these modes, "
                             "plans and devices ('serve' applies to LLM configs only, "
                             "system: entries to plans other than 'single' only)")
    if spec.n_cells > MAX_CELLS:
        raise SweepSpecError(f"{where}: the grid has {spec.n_cells:,} cells, over the "
                             f"{MAX_CELLS:,} limit; split it into several sweep files")
    return spec


def _check_entry_cells(spec: SweepSpec, where: str) -> None:
    """Refuse a grid whose cells per hardware entry pass ``MAX_ENTRY_CELLS`` (a task holds at
    least one entry's cells: the product of every other list)."""
    cap = MAX_ENTRY_CELLS.value()
    for group in cell_groups(spec):
        per_entry = group.n_cells // max(1, len(group.hardware)) * len(spec.runtimes)
        if per_entry > cap:
            raise SweepSpecError(
                f"{where}: {group.model} ({group.family}) has {per_entry:,} cells per hardware "
                f"entry (the product of batches, precisions, modes, runtimes, plans and tokens), "
                f"over the {cap:,} one task holds; shorten those lists or split the sweep "
                f"(or raise {MAX_ENTRY_CELLS.env})")


def _list(table: Mapping[str, Any], key: str, where: str) -> list:
    value = table[key]
    if not isinstance(value, list):
        raise SweepSpecError(f"{where}: [sweep] {key} = {value!r} must be a list, "
                             f"e.g. {key} = [{_example(key)}]")
    if not value:
        raise SweepSpecError(f"{where}: the grid is empty: [sweep] {key} = [] gives no cells; "
                             f"list at least one, e.g. {key} = [{_example(key)}]")
    seen: set = set()
    for item in value:
        if not isinstance(item, str | int | float | bool):
            raise SweepSpecError(f"{where}: [sweep] {key}: {_short(item)} is a "
                                 f"{type(item).__name__}; list plain values, e.g. {key} = "
                                 f"[{_example(key)}]")
        if isinstance(item, str) and _unprintable(item):
            raise SweepSpecError(f"{where}: [sweep] {key}: {_short(item)} contains control or "
                                 "formatting characters; write plain text")
        if isinstance(item, str) and ID_SEPARATOR in item:
            raise SweepSpecError(f"{where}: [sweep] {key}: {item!r} contains {ID_SEPARATOR!r}, "
                                 "which separates the parts of a cell id; rename it")
        if item in seen:
            raise SweepSpecError(f"{where}: [sweep] {key} lists {item!r} twice; list it once")
        seen.add(item)
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _unprintable(text: str) -> bool:
    """Whether ``text`` holds a character a terminal or file system should not get: control,
    format (bidi overrides, zero width), surrogate, private or unassigned, line separators."""
    return any(unicodedata.category(c)[0] in "CZ" and c != " " for c in text)


def _example(key: str) -> str:
    return {"models": '"resnet50"', "devices": '"h100-sxm"', "batches": "1, 8",
            "precisions": '"fp32"', "modes": '"infer"', "runtimes": '"default"',
            "plans": '"single", "tp4"', "input_tokens": "512, 2048",
            "output_tokens": "128"}[key]


def _checked(lists: dict, key: str, check: Callable[[Any, str], Any], where: str,
             default: tuple) -> list:
    if key not in lists:
        return list(default)
    out = []
    for item in lists[key]:
        try:
            out.append(check(item, key))
        except ValueError as exc:
            raise SweepSpecError(f"{where}: [sweep] {exc}") from None
    return out


def _scalar(table: Mapping[str, Any], key: str, check: Callable[[Any, str], Any], where: str,
            default: Any) -> Any:
    if key not in table:
        return default
    try:
        return check(table[key], key)
    except ValueError as exc:
        raise SweepSpecError(f"{where}: [sweep] {exc}") from None


def _positive_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key}: {_short(value)} is not a positive integer; write e.g. 1, 8, 64")
    return value


def _bounded(limit: Limit) -> Callable[[Any, str], int]:
    def check(value: Any, key: str) -> int:
        return limit.check(_positive_int(value, key), f"{key}: {value}")
    return check


def _choice(allowed: tuple[str, ...]) -> Callable[[Any, str], str]:
    def check(value: Any, key: str) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"{key}: {value!r} is not one of {', '.join(allowed)}")
        return value
    return check


def _name(value: Any, key: str) -> str:
    """The sweep's name: it names the default output folder (``NAME.parquet``) and is printed,
    so one file-name part of printable text (no ``/``, ``\\``, ``:``, leading ``.``/``-``)."""
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ValueError(f"{key}: {_short(value)} must be a non-empty string of at most 200 "
                         "chars")
    name = value.strip()
    if _unprintable(name) or any(c in name for c in "/\\:") or name.startswith((".", "-")):
        raise ValueError(f"{key}: {_short(value)} must be a plain file name (printable, no "
                         "'/', '\\' or ':', not starting with '.' or '-'): it names the output "
                         "folder NAME.parquet")
    return name


def _model(value: Any, root: Path, where: str) -> tuple[str, bool]:
    """(the model's text, whether it is an LLM config): an ``.onnx`` path (a graph) or a
    ``.json`` path (an LLM config), confined to the spec's folder; a zoo name (a graph; the
    zoo wins a name clash); a bundled LLM name or Hugging Face id, or ``llm:NAME``."""
    if not isinstance(value, str) or not value.strip():
        raise SweepSpecError(f"{where}: [sweep] models: {_short(value)} is not a zoo name, an "
                             "LLM config or an .onnx / .json path (a string)")
    if value.lower().endswith(PATH_SUFFIXES):
        try:
            confined_path(value, root, what="model file", error=ValueError)
        except ValueError as exc:
            raise SweepSpecError(f"{where}: [sweep] models: {exc}; paths are relative to the "
                                 "sweep file's folder") from None
        if not value.endswith(PATH_SUFFIXES):
            raise SweepSpecError(f"{where}: [sweep] models: {value!r}: write the suffix in "
                                 "lower case (.onnx or .json; rename the file): it tells a "
                                 "graph from an LLM config")
        return value, value.endswith(".json")
    name = value.removeprefix("zoo:")
    if not value.startswith(LLM_PREFIX) and name in zoo.list_models():
        return name, False
    try:  # a bundled name or Hugging Face id only: a path is never looked up here
        bundled_llm_info(value.removeprefix(LLM_PREFIX))
    except (LLMConfigError, KeyError):
        raise SweepSpecError(
            f"{where}: [sweep] models: {value!r} is neither an .onnx/.json path, a zoo model "
            f"({', '.join(zoo.list_models())}) nor a bundled LLM config "
            f"({', '.join(bundled_llms())})") from None
    return value, True


def _plan(value: Any, key: str) -> str:
    try:
        return canonical_plan(value)
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def _devices(values: list, where: str) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise SweepSpecError(f"{where}: [sweep] devices: {value!r} is not a device id, a "
                                 "what-if spec 'BASE:key=value' or 'kind:KIND' (a string)")
        value = value.strip()
        if value.startswith(SYSTEM_PREFIX):
            if not value[len(SYSTEM_PREFIX):].strip():
                raise SweepSpecError(f"{where}: [sweep] devices: {value!r} names no system; "
                                     "write system:ID, e.g. system:hgx-h100")
            out.append(value)
        elif value.startswith(KIND_PREFIX):
            kind = value[len(KIND_PREFIX):].strip()
            if kind not in KINDS:
                raise SweepSpecError(f"{where}: [sweep] devices: {value!r}: unknown kind "
                                     f"{kind!r}; write kind:{' or kind:'.join(KINDS)}")
            out.extend(expand_devices([value]))
        else:
            out.append(_canonical(value))
    seen: set[str] = set()
    for dev in out:
        if dev in seen:
            raise SweepSpecError(f"{where}: [sweep] devices: {dev!r} appears twice (an alias of "
                                 "a listed id, or already in a kind: selector); list it once")
        seen.add(dev)
    return tuple(out)


def _canonical(device: str) -> str:
    """The catalog id of a known plain device name; anything else as written (an unknown id
    becomes per-cell errors, a what-if spec keeps its text)."""
    if ":" in device:  # a what-if or a system entry
        return device
    try:
        return get_device(device).id
    except HardwareSpecError:  # an unknown device fails its own cells, not the spec
        return device


def _dims(value: Any, where: str) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise SweepSpecError(f"{where}: [sweep.dims] must be a table of NAME = N, got {value!r}")
    out = {}
    for key, n in value.items():
        if key == "batch":
            raise SweepSpecError(f"{where}: [sweep.dims] batch: the batch is swept; use "
                                 "[sweep] batches = [...] instead")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise SweepSpecError(f"{where}: [sweep.dims] {key} = {n!r} is not a positive "
                                 "integer; write e.g. sequence = 128")
        out[str(key)] = n
    return out


def _baseline(value: Any, devices: tuple[str, ...], where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise SweepSpecError(f"{where}: [sweep] baseline = {_short(value)} must be one of the "
                             "devices (a string)")
    dev = _canonical(value)
    if dev not in devices:
        raise SweepSpecError(f"{where}: [sweep] baseline = {value!r} is not among the devices; "
                             "name one of them")
    return dev
