"""``load_llm(ref)``: one entry point from whatever names a decoder LLM to its ``LLMArch``.

``ref`` may be

* a bundled model name (``llama-3.1-70b``) or one of its Hugging Face ids
  (``meta-llama/Llama-3.1-70B``), either case; the bundled configs are data files in
  ``configs/`` (one real ``config.json`` per model) listed in ``configs/index.json`` with their
  ids and source;
* a path to a ``config.json`` or to a folder holding one (a downloaded model);
* a path to an ``.onnx`` decoder, or its bytes (read by ``onnx_decoder.arch_from_onnx``);
  bytes that start with ``{`` (or ``[``) are taken as a config.json's content instead.

A quantized repack of a bundled model (``nvidia/Llama-3.1-8B-Instruct-FP8``; ``repacks``) is
its base config with ``weight_dtype`` set and a note. A name that is neither bundled nor an
existing path is refused with the closest bundled names.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path

from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.hf_config import (
    arch_from_bytes,
    arch_from_config,
    arch_from_config_file,
    parse_config,
)
from roofcast.graph_import.llm.repacks import split_repack

_CONFIGS = "roofcast.graph_import.llm.configs"


@dataclass(frozen=True)
class BundledLLM:
    """One bundled config: its ``name``, the Hugging Face ids it answers to (the first is the
    one it was copied from), the ``source`` URL, and what it was checked against."""

    name: str
    hf_ids: tuple[str, ...]
    source: str
    verified_against: str = ""
    note: str = ""


@cache
def _index() -> dict[str, BundledLLM]:
    raw = json.loads(resources.files(_CONFIGS).joinpath("index.json").read_text())
    return {
        name: BundledLLM(
            name=name,
            hf_ids=tuple(entry["hf_ids"]),
            source=entry["source"],
            verified_against=entry.get("verified_against", ""),
            note=entry.get("note", ""),
        )
        for name, entry in raw.items()
    }


@cache
def _aliases() -> dict[str, str]:
    """Lower-cased name, HF id and HF repo name (the id without its owner) -> bundled name."""
    out: dict[str, str] = {}
    for name, info in _index().items():
        out[name.lower()] = name
        for hf_id in info.hf_ids:
            out.setdefault(hf_id.lower(), name)
            out.setdefault(hf_id.rsplit("/", 1)[-1].lower(), name)
    return out


def bundled_llms() -> tuple[str, ...]:
    """The bundled model names, sorted."""
    return tuple(sorted(_index()))


def bundled_llm_info(name: str) -> BundledLLM:
    """Ids and source of a bundled model (by name or HF id)."""
    return _index()[_bundled_name(name)]


def _bundled_name(ref: str) -> str:
    key = ref.strip().lower()
    if key in _aliases():
        return _aliases()[key]
    close = difflib.get_close_matches(key, list(_aliases()), n=5, cutoff=0.6)
    names = list(dict.fromkeys(_aliases()[c] for c in close))
    hint = f"close: {', '.join(names)}; " if names else ""
    raise LLMConfigError(
        f"no bundled LLM named {ref[:100]!r} and no such file or folder; {hint}give a bundled "
        f"name ({', '.join(bundled_llms())}), a config.json path or folder, or an .onnx decoder"
    )


@cache
def _bundled(name: str) -> LLMArch:
    text = resources.files(_CONFIGS).joinpath(f"{name}.json").read_bytes()
    config = parse_config(text, f"bundled {name}.json")
    return arch_from_config(
        config, name=name, source=f"bundled:{name}", where=f"bundled {name}.json"
    )


def load_llm(ref: str | Path | bytes) -> LLMArch:
    """The ``LLMArch`` that ``ref`` names (module docstring for what ``ref`` may be)."""
    if isinstance(ref, bytes | bytearray | memoryview):
        data = bytes(ref)
        if data.lstrip()[:1] in (b"{", b"["):
            return arch_from_bytes(data)
        return _from_onnx(data)
    if isinstance(ref, str):
        if not ref.strip():
            raise LLMConfigError(
                "empty model reference: give a bundled name, a config.json or an .onnx file"
            )
        key = ref.strip().lower()
        if key in _aliases():
            return _bundled(_aliases()[key])
        repack = _repack(ref)
        if repack is not None:
            return repack
        path = Path(ref)
        if not _exists(path) and path.suffix.lower() not in (".json", ".onnx"):
            _bundled_name(ref)  # raises with the close names
    elif isinstance(ref, Path):
        path = ref
    else:
        raise LLMConfigError(
            f"cannot read an LLM from a {type(ref).__name__}: give a name, a path or bytes"
        )
    if path.suffix.lower() == ".onnx":
        return _from_onnx(path)
    return arch_from_config_file(path)


def _repack(ref: str) -> LLMArch | None:
    """The bundled base of a quantized repack id, its weights at the repack's dtype."""
    split = split_repack(ref)
    if split is None or split[0].lower() not in _aliases():
        return None
    base, dtype = _bundled(_aliases()[split[0].lower()]), split[1]
    note = (f"{ref.strip()[:100]} read as the bundled {base.name} with {dtype} weights (a "
            "quantized repack keeps its base's shapes); predictions use them unless --weights "
            "says otherwise")
    kept = tuple(n for n in base.notes if not n.startswith("weights stored as"))
    return replace(base, weight_dtype=dtype, notes=(*kept, note))


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _from_onnx(source: Path | bytes) -> LLMArch:
    """Delegate to the ONNX decoder reader (imported here: it pulls in onnx)."""
    from roofcast.graph_import.llm.onnx_decoder import arch_from_onnx

    return arch_from_onnx(source, name=None)
