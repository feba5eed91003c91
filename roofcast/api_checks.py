"""The API's argument checks (the CLI calls the API, so they hold for its flags too).

A count (batch, tokens, devices, global batch, parallel degree) is an ``int`` (not a bool,
float or string) from 1 to its cap: the ``graph_import.budgets`` limits, each raisable by its
``ROOFCAST_MAX_*`` environment variable. A device or system is a catalog reference (a string)
or the spec object. A wrong type raises :class:`ArgumentTypeError` (a ``TypeError``), a value
out of range ``PredictionError`` (a ``ValueError``); both are user errors (one line, exit 2 on
the CLI). Messages name the command-line flag (``--global-batch``); on the Python surface
``api_words`` rewrites it to the keyword (``global_batch=``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from roofcast.graph_import.budgets import BATCH, DEVICES, SYSTEM_NODES, TOKENS, Limit
from roofcast.predictor.errors import PredictionError


class ArgumentTypeError(PredictionError, TypeError):
    """An argument of the wrong type: a ``TypeError`` that the CLI reports like any user
    error."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    return type(value).__name__


def count(value: Any, flag: str, limit: Limit | None) -> int:
    """``value`` as an int if it is an integer from 1 to ``limit``'s cap (None: no cap;
    module docstring)."""
    import numpy as np

    allowed = ("a positive integer" if limit is None else
               f"an integer from 1 to {limit.value()} ({limit.what})")
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ArgumentTypeError(f"--{flag} must be {allowed}, got {_shown(value)} "
                                f"({_type_name(value)})")
    if value < 1:
        raise PredictionError(f"--{flag} must be {allowed}, got {int(value)}")
    if limit is None:
        return int(value)
    return limit.check(int(value), f"--{flag} {int(value)}", PredictionError)


def optional_count(value: Any, flag: str, limit: Limit | None) -> int | None:
    """``count`` of ``value``, None kept (the caller's default applies only when not given)."""
    return None if value is None else count(value, flag, limit)


def batch(value: Any, flag: str = "batch") -> int | None:
    """A batch size (``ROOFCAST_MAX_BATCH``) or None."""
    return optional_count(value, flag, BATCH)


def tokens(value: Any, flag: str) -> int | None:
    """A token count (``ROOFCAST_MAX_TOKENS``) or None."""
    return optional_count(value, flag, TOKENS)


def degrees(**given: Any) -> None:
    """Parallel degrees / device counts given (None: not given), each a count of at most
    ``ROOFCAST_MAX_DEVICES``."""
    for name, value in given.items():
        optional_count(value, name.replace("_", "-"), DEVICES)


def _is_ref(value: Any, spec_type: type) -> bool:
    return isinstance(value, spec_type) or (isinstance(value, str) and bool(value.strip()))


def device_ref(value: Any, flag: str = "hw", *, optional: bool = True) -> Any:
    """``value`` if it names one device: a non-empty string or a ``HardwareSpec``."""
    from roofcast.hw_catalog.spec import HardwareSpec

    if (value is None and optional) or _is_ref(value, HardwareSpec):
        return value
    raise ArgumentTypeError(f"--{flag} {_shown(value)} is not a device: give a device id such as "
                            f"'h100-sxm' or a HardwareSpec (type {_type_name(value)})")


def device_refs(value: Any, flag: str = "hw") -> Any:
    """``value`` if it is one device (``device_ref``), a list/tuple of them, or None."""
    if isinstance(value, list | tuple):
        for item in value:
            device_ref(item, flag, optional=False)
        return value
    return device_ref(value, flag)


def device_list(value: Any, flag: str) -> Any:
    """``value`` if it is a non-empty list/tuple of devices (not one string, which would be
    read letter by letter)."""
    if not isinstance(value, list | tuple):
        raise ArgumentTypeError(f"{flag} must be a list of devices such as ['h100-sxm', 'h200'], "
                                f"got {_shown(value)} ({_type_name(value)})")
    return device_refs(value)


def sequence(value: Any, flag: str, example: str = "[1, 8]") -> list[Any]:
    """``value`` as a list if it is a non-empty list/tuple (not a string or a number)."""
    if not isinstance(value, list | tuple) or not value:
        raise ArgumentTypeError(f"{flag} must be a non-empty list such as {example}, got "
                                f"{_shown(value)} ({_type_name(value)})")
    return list(value)


def system_ref(value: Any) -> Any:
    """``value`` if it names one system: a non-empty string, a ``SystemSpec`` or None."""
    from roofcast.hw_catalog.system import SystemSpec

    if value is None or _is_ref(value, SystemSpec):
        return value
    raise ArgumentTypeError(f"--system {_shown(value)} is not a system: give one system id such "
                            f"as 'hgx-h100', a what-if 'hgx-h100:nodes=4' or a SystemSpec (type "
                            f"{_type_name(value)})")


def system_size(spec: Any) -> Any:
    """``spec`` (a resolved ``SystemSpec``) if its nodes and devices are within
    ``ROOFCAST_MAX_SYSTEM_NODES`` and ``ROOFCAST_MAX_DEVICES``."""
    SYSTEM_NODES.check(spec.nodes, f"system {spec.id!r} has {spec.nodes} nodes, which",
                       PredictionError)
    DEVICES.check(spec.n_devices, f"system {spec.id!r} has {spec.n_devices} devices, which",
                  PredictionError)
    return spec


def word(value: Any, flag: str, allowed: Sequence[str]) -> str:
    """``value`` if it is one of ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        kind = PredictionError if isinstance(value, str) else ArgumentTypeError
        raise kind(f"--{flag} must be one of {', '.join(allowed)}, got {_shown(value)}")
    return value


def choices(values: Any, flag: str, allowed: Sequence[Any]) -> tuple[Any, ...]:
    """``values`` (a list/tuple) as a tuple if every item is one of ``allowed`` (bools and ints
    kept apart) and there is at least one."""
    ok = isinstance(values, list | tuple) and values and all(
        any(type(v) is type(a) and v == a for a in allowed) for v in values)
    if not ok:
        raise ArgumentTypeError(f"--{flag} must be a non-empty list of values out of "
                                f"{list(allowed)}, got {_shown(values)}")
    return tuple(values)


def dims(value: Any) -> Mapping[str, int] | None:
    """``value`` if it is None or a mapping of dim names to integers (bounded where bound)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ArgumentTypeError(f"--dim must be a dict such as {{'sequence': 128}}, got "
                                f"{_shown(value)}")
    return value


def distinct_names(values: Any, flag: str, example: str) -> list[str]:
    """``values`` (a list/tuple of strings) if it is non-empty, every item non-empty and none
    given twice (a repeated source would count its rows twice)."""
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise ArgumentTypeError(f"--{flag} must be a list of names such as {example}, got "
                                f"{_shown(values)} ({_type_name(values)})")
    names = [v.strip() if isinstance(v, str) else v for v in values]
    if not names or not all(isinstance(v, str) and v for v in names):
        raise PredictionError(f"--{flag} needs one or more names such as {example}, got "
                              f"{_shown(values)}")
    twice = sorted({v for v in names if names.count(v) > 1})
    if twice:
        raise PredictionError(f"--{flag} names {', '.join(map(repr, twice))} more than once; "
                              "give each once")
    return names


def spec_decode(value: Any) -> Any:
    """``spec_decode=``: None or a ``SpecDecode`` (its own constructor checks K and the
    acceptance); anything else is an ``ArgumentTypeError``."""
    from roofcast.predictor.llm.spec_decode import SpecDecode

    if value is None or isinstance(value, SpecDecode):
        return value
    raise ArgumentTypeError(f"spec_decode= must be None or a SpecDecode (e.g. SpecDecode('mtp', "
                            f"2, 0.7) from roofcast.predictor.llm.spec_decode), got "
                            f"{_type_name(value)} {_shown(value)}")
