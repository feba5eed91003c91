"""A Hugging Face ``config.json`` -> ``LLMArch``, with no weights and no network.

``read_config_file(path)`` reads a config file (or the ``config.json`` in a folder), refusing
anything that is not a regular file of at most ``MAX_CONFIG_BYTES``; ``parse_config(bytes)``
refuses what is not one JSON object (NaN and Infinity included); ``arch_from_config(obj)``
dispatches on ``model_type`` to the family reader registered in ``families`` and builds the
``LLMArch``. Every failure is an ``LLMConfigError`` naming the field or the problem and what to
do; no other exception leaves for any input.
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofcast.graph_import.errors import LLMConfigError
from roofcast.graph_import.llm import families_layered  # noqa: F401  (registers readers)
from roofcast.graph_import.llm.arch import LLMArch
from roofcast.graph_import.llm.families import UNREPRESENTABLE, known_model_types, read_family
from roofcast.graph_import.llm.hf_fields import LIMITS
from roofcast.graph_import.llm.quantization import weight_dtype

#: A config.json is a few kB; anything over 1 MiB is not one.
MAX_CONFIG_BYTES = 1 << 20
_NAME = re.compile(r"^[\w.-]{1,100}(/[\w.-]{1,100})?$")


def config_path(path: str | Path) -> Path:
    """``path`` itself, or ``path/config.json`` when ``path`` is a folder."""
    path = Path(path)
    try:
        if path.is_dir():
            inner = path / "config.json"
            if not inner.exists():
                raise LLMConfigError(
                    f"the folder {str(path)!r} holds no config.json: give the folder of a "
                    "Hugging Face model (where config.json lies) or the file itself"
                )
            return inner
    except LLMConfigError:
        raise
    except (OSError, ValueError) as exc:
        raise LLMConfigError(f"cannot access {str(path)!r}: {_why(exc)}") from None
    return path


def read_config_file(path: str | Path) -> bytes:
    """The bytes of a config file (a folder: its ``config.json``), at most ``MAX_CONFIG_BYTES``;
    symbolic links are followed (the Hugging Face cache links config.json into its blobs), but
    the target must be a regular file."""
    path = config_path(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise LLMConfigError(
                f"{str(path)!r} is not a regular file (a device, pipe or socket): "
                "give a config.json"
            )
        if st.st_size > MAX_CONFIG_BYTES:
            raise LLMConfigError(_too_big(str(path), st.st_size))
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except LLMConfigError:
        raise
    except FileNotFoundError:
        raise LLMConfigError(f"no such file: {str(path)!r}; check the path") from None
    except (OSError, ValueError) as exc:
        raise LLMConfigError(f"cannot read {str(path)!r}: {_why(exc)}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise LLMConfigError(_too_big(str(path), len(data)))
    return data


def _why(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def _too_big(where: str, n_bytes: int) -> str:
    return (
        f"{where} is {n_bytes} bytes, over the {MAX_CONFIG_BYTES} bytes a config.json can "
        "plausibly take: give the model's config.json, not its weights or tokenizer"
    )


def _refuse_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a number a config can hold")


def parse_config(data: bytes, where: str = "config.json") -> dict[str, Any]:
    """The JSON object in ``data``; refuses other JSON values, NaN/Infinity, bad UTF-8."""
    if len(data) > MAX_CONFIG_BYTES:
        raise LLMConfigError(_too_big(where, len(data)))
    try:
        text = data.decode("utf-8-sig")
        obj = json.loads(text, parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise LLMConfigError(
            f"{where} is not UTF-8 text: give a Hugging Face config.json"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise LLMConfigError(
            f"{where} is not valid JSON ({str(exc)[:120]}): give a Hugging Face config.json"
        ) from None
    if not isinstance(obj, dict):
        raise LLMConfigError(
            f"{where} holds a JSON {type(obj).__name__}, not an object: a config.json is one "
            'object of fields ({"model_type": ..., "hidden_size": ...})'
        )
    return obj


def arch_from_config(
    config: Mapping[str, Any],
    *,
    name: str | None = None,
    source: str = "",
    where: str = "config.json",
) -> LLMArch:
    """The ``LLMArch`` of a parsed config object (``name``: default its ``_name_or_path`` when
    that is a plain model id, else ``"config"``)."""
    if not isinstance(config, Mapping):
        raise LLMConfigError(f"{where} must be a JSON object, got {type(config).__name__}")
    model_type = config.get("model_type")
    known = known_model_types()
    if model_type is None:
        raise LLMConfigError(
            f"{where} lacks 'model_type' (it says which family reads the other fields); add it: "
            f"one of {', '.join(known)}"
        )
    if isinstance(model_type, str) and model_type in UNREPRESENTABLE:
        raise LLMConfigError(
            f"{where}: model_type {model_type!r} cannot be modelled: "
            f"{UNREPRESENTABLE[model_type]}; 'roofcast predict' on its ONNX export gives a "
            "per-operator prediction instead"
        )
    if not isinstance(model_type, str) or model_type not in known:
        shown = repr(model_type)[:60]
        raise LLMConfigError(
            f"{where}: model_type {shown} is not a decoder family roofcast reads; known: "
            f"{', '.join(known)} (or give the model's ONNX export)"
        )
    family, fields = read_family(dict(config), model_type, where)
    width = fields["n_heads"] * fields["head_dim"]
    if width > LIMITS["width"]:
        raise LLMConfigError(
            f"{where}: {fields['n_heads']} heads of {fields['head_dim']} make attention "
            f"{width} wide, over the plausible {LIMITS['width']}; check the head fields"
        )
    dtype, note = weight_dtype(config, where)
    if note:
        fields = {**fields, "weight_dtype": dtype,
                  "notes": (*fields.get("notes", ()), note)}
    return LLMArch(name=name or _default_name(config), family=family, source=source, **fields)


def arch_from_bytes(
    data: bytes, *, name: str | None = None, source: str = "config.json bytes"
) -> LLMArch:
    """``arch_from_config(parse_config(data))``."""
    return arch_from_config(parse_config(data, "config.json"), name=name, source=source)


def arch_from_config_file(path: str | Path, *, name: str | None = None) -> LLMArch:
    """The ``LLMArch`` of a config file, or of the ``config.json`` in a folder."""
    file = config_path(path)
    where = str(file)
    config = parse_config(read_config_file(file), where)
    return arch_from_config(
        config, name=name or _default_name(config, file), source=where, where=where
    )


def _default_name(config: Mapping[str, Any], file: Path | None = None) -> str:
    given = config.get("_name_or_path")
    if isinstance(given, str) and _NAME.match(given):
        return given
    if file is not None and _NAME.match(file.resolve().parent.name):
        return file.resolve().parent.name
    return "config"
