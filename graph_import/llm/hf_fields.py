"""Typed, validated reads of one Hugging Face ``config.json`` object.

``ConfigFields`` wraps the parsed JSON object and answers each family reader's questions
(``whole("hidden_size")``, ``flag("tie_word_embeddings", False)``, ``activation(...)``), raising
``LLMConfigError`` that names the field, the model family that needs it and what to do. Nothing
here knows a family: the readers in ``families`` say which fields they need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from roofcast.graph_import.errors import LLMConfigError

#: Hugging Face ``hidden_act`` / ``activation_function`` values -> ``LLMArch.activation``
#: (one of ``arch.ACTIVATIONS``).
#: ``gelu_new``, ``gelu_fast``, ``gelu_pytorch_tanh`` and BLOOM's ``bloom_gelu`` are the tanh
#: approximation; ``gelu`` and ``gelu_python`` the erf form; ``swish`` is SiLU.
HF_ACTIVATIONS: dict[str, str] = {
    "silu": "silu",
    "swish": "silu",
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_tanh": "gelu_tanh",
    "bloom_gelu": "gelu_tanh",
    "relu": "relu",
}

#: Largest plausible value per size field (far above any published model; a typo or a hostile
#: file is refused rather than turned into a 10^30-parameter model).
LIMITS: dict[str, int] = {
    "layers": 4096,
    "width": 1 << 20,  # hidden size, FFN width, head dim
    "heads": 1 << 14,
    "vocab": 1 << 24,
    "context": 1 << 27,  # 134M tokens
    "experts": 1 << 12,
}


class ConfigFields:
    """The fields of one config object, read for the family ``family`` (named in errors)."""

    def __init__(self, data: Mapping[str, Any], family: str, where: str = "config.json"):
        self.data = data
        self.family = family
        self.where = where
        #: what the reader assumed for a field the config leaves out (``LLMArch.notes``)
        self.notes: list[str] = []

    def has(self, key: str) -> bool:
        """Whether ``key`` is present and not JSON ``null``."""
        return self.data.get(key) is not None

    def error(self, message: str) -> LLMConfigError:
        return LLMConfigError(f"{self.where}: {message}")

    def whole(
        self, *keys: str, kind: str = "width", default: int | None = None, lowest: int = 1
    ) -> int:
        """The whole number (at least ``lowest``) under the first present key of ``keys`` (HF
        renamed some: ``n_embd`` / ``hidden_size``); ``default`` when none is present (``None``:
        required)."""
        key = next((k for k in keys if self.has(k)), None)
        if key is None:
            if default is not None:
                return default
            names = " or ".join(repr(k) for k in keys)
            raise LLMConfigError(
                f"{self.where} lacks {names} (needed for {self.family} models); add it from "
                "the model's Hugging Face config.json"
            )
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"{key!r} must be a whole number, got {_show(value)}; fix the value")
        if isinstance(value, float):
            if not math.isfinite(value) or not value.is_integer():
                raise self.error(f"{key!r} must be a whole number, got {_show(value)}")
            value = int(value)
        limit = LIMITS[kind]
        if not lowest <= value <= limit:
            raise self.error(
                f"{key!r} is {_show(value)}: it must be a whole number from {lowest} to {limit}"
            )
        return value

    def flag(self, key: str, default: bool) -> bool:
        """A true/false field; ``default`` when absent or ``null``."""
        if not self.has(key):
            return default
        value = self.data[key]
        if not isinstance(value, bool):
            raise self.error(f"{key!r} must be true or false, got {_show(value)}")
        return value

    def fraction(self, key: str, default: float) -> float:
        """A number in (0, 1] (``rotary_pct``, ``partial_rotary_factor``)."""
        if not self.has(key):
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise self.error(f"{key!r} must be a number in (0, 1], got {_show(value)}")
        return float(value)

    def activation(self, *keys: str, default: str | None = None) -> str:
        """The MLP activation under the first present key, mapped to ``LLMArch.activation``."""
        key = next((k for k in keys if self.has(k)), None)
        if key is None:
            if default is not None:
                return default
            raise LLMConfigError(
                f"{self.where} lacks {keys[0]!r} (needed for {self.family} models)"
            )
        value = self.data[key]
        if not isinstance(value, str) or value not in HF_ACTIVATIONS:
            raise self.error(
                f"{key!r} is {_show(value)}, which roofcast does not model; known values: "
                f"{', '.join(sorted(HF_ACTIVATIONS))}"
            )
        return HF_ACTIVATIONS[value]


def _show(value: Any) -> str:
    """A short rendering of a user's value for a message."""
    text = repr(value) if isinstance(value, str) else str(value)
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    return text if len(text) <= 40 else text[:37] + "..."
