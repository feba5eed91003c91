"""``HardwareSpec``: one device's figures in SI units, and peak lookup with documented fallbacks.

Units inside the code are SI: FLOP/s (integer ops/s for integer dtypes), bytes, bytes/s,
seconds, hertz, watts. The TOML files carry other units in their key names; ``schema.py``
converts. A what-if device is ``dataclasses.replace(spec, mem_bw_Bps=2 * spec.mem_bw_Bps)``
(``__post_init__`` re-checks positivity) or a derived file / inline spec (``derive.py``).

Peak lookup: ``spec.peak(engine, dtype)`` returns the device's peak for the (engine, unit of
dtype) pair (nvfp4 -> fp4, fp8_block -> fp8) if the device has that unit; otherwise it walks the
tiers of ``FALLBACKS`` (``roofcast.dtypes``) and picks the *fastest* candidate of the first tier
the device has any of — the runtime is assumed to pick the fastest kernel among the paths that
compute the requested dtype at the same or higher precision. The lookup's ``note`` says which
path was used and why (an 8-bit or narrower format also that it keeps its storage width).
``data``/``free`` ops have no compute peak: ``flops_per_s`` is ``inf``, so compute time is 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from roofcast.dtypes import DTYPE_NAMES, DTYPES, FALLBACKS, PEAK_KEYS
from roofcast.hw_catalog.errors import HardwareSpecError
from roofcast.hw_catalog.frozen import FrozenMap, freeze

ENGINES: tuple[str, ...] = ("matrix", "vector")
"""Engines with a compute peak (the strings of ``graph_import.types.Engine`` MATRIX/VECTOR)."""

NO_COMPUTE_ENGINES: tuple[str, ...] = ("data", "free")
"""Engines without a compute bound: pure data movement and shape/view ops."""

#: formats this narrow or narrower say in a fallback note that their storage width is kept.
NARROW_BITS = 8

PEAK_DTYPES: tuple[str, ...] = PEAK_KEYS
"""Dtype keys allowed in the device files' ``[peak_TOPS.<engine>]`` tables. These keys, the
accepted spellings (``DTYPE_NAMES``) and the fallback tiers (``FALLBACKS``) are views of the
one dtype table, ``roofcast.dtypes``."""


def canonical_dtype(dtype: str) -> str:
    """Map any accepted dtype spelling (``float``, ``bfloat16``, ``fp16``...) to a catalog dtype."""
    try:
        return DTYPE_NAMES[str(dtype).lower()]
    except KeyError:
        known = ", ".join(sorted(DTYPE_NAMES))
        raise HardwareSpecError(f"unknown dtype {dtype!r}; known dtypes: {known}") from None


def _storage_clause(asked: str, used: str) -> str:
    """What a fallback keeps: a format of 8 bits or fewer computed on a wider unit is still
    stored (and moved) at its own width, block scales included."""
    d = DTYPES[asked]
    if d.bits > NARROW_BITS or d.bits >= DTYPES[used].bits:
        return ""
    return (f" (math at {used}; {asked} tensors stay stored at "
            f"{d.bytes_per_element:.4g} B/element)")


@dataclass(frozen=True)
class PeakLookup:
    """Result of :meth:`HardwareSpec.peak`: the peak used and which unit it belongs to."""

    flops_per_s: float
    engine_used: str
    dtype_used: str
    note: str = ""

    @property
    def is_fallback(self) -> bool:
        return bool(self.note)


def _positive_or_none(name: str, value: Any) -> None:
    if value is not None and not (isinstance(value, int | float) and value > 0):
        raise HardwareSpecError(f"HardwareSpec.{name} must be positive, got {value!r}")


_POSITIVE_FIELDS = ("mem_bw_Bps", "mem_capacity_bytes", "l2_bytes", "units", "clock_Hz",
                    "launch_overhead_s")
_OPTIONAL_POSITIVE_FIELDS = ("l1_per_unit_bytes", "shared_mem_per_unit_bytes", "l2_bw_Bps",
                             "host_link_Bps", "device_link_Bps", "tdp_W", "price_usd")


@dataclass(frozen=True)
class HardwareSpec:
    """One device (real or hypothetical), SI units.

    ``peak_flops``: (engine, dtype) -> dense peak in FLOP/s (ops/s for integer dtypes), e.g.
    ``("matrix", "bf16") -> 989.4e12``. Use :meth:`peak` rather than indexing, so the fallback
    table applies. ``origin`` is ``builtin``, ``user`` (user folder), ``local`` (calibrated) or
    ``derived`` (Python/inline what-if); ``path`` is the file it came from, if any.
    """

    id: str
    name: str
    vendor: str
    kind: str
    architecture: str
    peak_flops: Mapping[tuple[str, str], float]
    mem_bw_Bps: float  # noqa: N815 (unit suffix)
    mem_capacity_bytes: float
    l2_bytes: float
    units: int
    unit_name: str
    clock_Hz: float  # noqa: N815 (unit suffix)
    launch_overhead_s: float
    memory_type: str
    aliases: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    notes: str = ""
    release_year: int | None = None
    l1_per_unit_bytes: float | None = None
    shared_mem_per_unit_bytes: float | None = None
    l2_bw_Bps: float | None = None  # noqa: N815 (unit suffix)
    host_link: str | None = None
    host_link_Bps: float | None = None  # noqa: N815 (unit suffix)
    device_link: str | None = None
    device_link_Bps: float | None = None  # noqa: N815 (unit suffix)
    tdp_W: float | None = None  # noqa: N815 (unit suffix)
    price_usd: float | None = None
    price_date: str | None = None
    price_source: str | None = None
    base: str | None = None
    origin: str = "builtin"
    path: str | None = None
    calibration: Mapping[str, Any] = field(default_factory=FrozenMap)

    def __post_init__(self) -> None:
        object.__setattr__(self, "peak_flops", FrozenMap(self.peak_flops))
        object.__setattr__(self, "calibration", freeze(self.calibration or {}))
        object.__setattr__(self, "aliases", tuple(self.aliases))
        object.__setattr__(self, "sources", tuple(self.sources))
        for name in _POSITIVE_FIELDS:
            value = getattr(self, name)
            if value is None:
                raise HardwareSpecError(f"HardwareSpec.{name} is required")
            _positive_or_none(name, value)
        for name in _OPTIONAL_POSITIVE_FIELDS:
            _positive_or_none(name, getattr(self, name))
        for (engine, dtype), value in self.peak_flops.items():
            if engine not in ENGINES or dtype not in DTYPE_NAMES.values():
                raise HardwareSpecError(
                    f"HardwareSpec.peak_flops key ({engine!r}, {dtype!r}) is not an "
                    f"(engine, dtype) pair with engine in {ENGINES}")
            _positive_or_none(f"peak_flops[{engine}, {dtype}]", value)
        if not self.peak_flops:
            raise HardwareSpecError(f"device {self.id!r} has no peak FLOP/s at all")

    # ------------------------------------------------------------------ lookups
    def peak(self, engine: str, dtype: str) -> PeakLookup:
        """Peak FLOP/s for an op of ``dtype`` on ``engine`` ("matrix", "vector", "data", "free").

        Exact entry if the device has it, else the fastest candidate of the first ``FALLBACKS``
        tier the device
        has (with a note), else :class:`HardwareSpecError` listing the peaks the device has.
        """
        engine = str(engine)
        if engine in NO_COMPUTE_ENGINES:
            return PeakLookup(math.inf, engine, str(dtype),
                              f"{engine} ops have no compute peak (compute time 0)")
        if engine not in ENGINES:
            raise HardwareSpecError(
                f"unknown engine {engine!r}; expected one of {ENGINES + NO_COMPUTE_ENGINES}")
        asked = canonical_dtype(dtype)
        wanted = (engine, DTYPES[asked].peak_key or asked)
        if wanted in self.peak_flops:
            return PeakLookup(self.peak_flops[wanted], *wanted)
        candidates: list[tuple[str, str]] = []
        for tier in FALLBACKS.get(wanted, ()):
            candidates = [c for c in tier if c in self.peak_flops]
            if candidates:
                break
        if not candidates:
            have = ", ".join(f"{e} {d}" for e, d in self.peak_flops) or "none"
            raise HardwareSpecError(
                f"device {self.id!r} has no {wanted[0]} {wanted[1]} peak and no fallback path "
                f"(it has: {have}); add peak_TOPS.{wanted[0]}.{wanted[1]} to its device file "
                f"or use another dtype")
        best = max(candidates, key=lambda c: self.peak_flops[c])
        note = (f"{self.name} has no {wanted[1]} {wanted[0]} unit; using {best[0]} {best[1]}"
                f"{_storage_clause(asked, best[1])}")
        return PeakLookup(self.peak_flops[best], best[0], best[1], note)

    def peak_flops_or_none(self, engine: str, dtype: str) -> float | None:
        """The exact (engine, unit of dtype) entry without fallback, or None."""
        asked = canonical_dtype(dtype)
        return self.peak_flops.get((str(engine), DTYPES[asked].peak_key or asked))

    @property
    def mem_bw_GBps(self) -> float:
        return self.mem_bw_Bps / 1e9

    @property
    def is_derived(self) -> bool:
        return self.base is not None

    @property
    def ridge_point_flop_per_byte(self) -> Mapping[tuple[str, str], float]:
        """Roofline ridge point per peak: peak FLOP/s / memory bandwidth (FLOP/byte)."""
        return {k: v / self.mem_bw_Bps for k, v in self.peak_flops.items()}
