"""An immutable, hashable, picklable mapping for fields of frozen dataclasses."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class FrozenMap(Mapping):
    """Read-only mapping; nested dicts become FrozenMaps and lists become tuples.

    Unlike ``types.MappingProxyType`` it hashes (so a frozen dataclass holding it hashes) and
    pickles (so ``st.cache_data`` can store specs).
    """

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[Any, Any] | None = None) -> None:
        object.__setattr__(self, "_data", {k: freeze(v) for k, v in (data or {}).items()})
        object.__setattr__(self, "_hash", None)

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(frozenset(self._data.items())))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._data) == dict(other)
        return NotImplemented

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FrozenMap is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (thaw(self),))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"


def freeze(value: Any) -> Any:
    """dict -> FrozenMap, list -> tuple, recursively; other values unchanged."""
    if isinstance(value, FrozenMap):
        return value
    if isinstance(value, Mapping):
        return FrozenMap(value)
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of :func:`freeze`: FrozenMap -> dict, tuple -> list, recursively."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value
