"""The one table of numeric formats (``DTYPES``); every other dtype view is derived from it.

A row gives a format's canonical name (the hardware catalog's spelling, ``fp16``), its storage
bits per element, its kind (float, int, other), the tensor element-type names stored in it
(ONNX's, and numpy's float32/float64) and other accepted spellings, the key of its own compute
unit in the device files' ``[peak_TOPS.<engine>]`` tables (None: it has none), the units a
device without that unit computes it on instead (per engine, tiers of (engine, key); see
``hw_catalog.spec.HardwareSpec.peak``) and where a user may choose it (``roles``).

Bytes per element = (bits + scale_bits / block) / 8: int4 0.5 B; block-scaled nvfp4 (an fp8
scale per 16) 0.5625, mxfp4 (e8m0 per 32) 0.53125, fp8_block (fp32 per 128x128) ~1.0002; a
run at a precision stores its float tensors at that width even where the math falls back to a
wider unit. An ONNX tensor's itemsize rounds bits up to whole bytes (int4: 1 B). This module
imports nothing of roofcast. Rationale: docs/design/defaults.md, docs/design/catalog.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

#: (engine, peak key) tiers: the first tier a device has any unit of is used, its fastest unit wins
Tiers = tuple[tuple[tuple[str, str], ...], ...]
KINDS: tuple[str, ...] = ("float", "int", "other")
ROLES: tuple[str, ...] = ("precision", "weights", "kv_cache", "activations")
_M, _V = "matrix", "vector"
_ALL = frozenset(ROLES)


@dataclass(frozen=True)
class DType:
    """One numeric format (module docstring). ``vector_as``: the dtype vector-engine work at
    this precision runs in when it differs (tf32 exists only on matrix units: fp32)."""

    name: str
    bits: int
    kind: str
    onnx: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    peak_key: str | None = None
    vector_as: str | None = None
    fallback: Mapping[str, Tiers] = field(default_factory=dict)
    roles: frozenset[str] = frozenset()
    scale_bits: int = 0
    block: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS or not self.roles <= _ALL or self.bits < 1 or self.block < 1:
            raise ValueError(f"dtype row {self.name!r}: kind in {KINDS}, roles in {ROLES}, "
                             "bits >= 1 and block >= 1")
        object.__setattr__(self, "fallback", MappingProxyType(dict(self.fallback)))

    @property
    def bytes_per_element(self) -> float:
        """Storage bytes per element, a block's shared scale included (int4: 0.5)."""
        return (self.bits + self.scale_bits / self.block) / 8.0

    @property
    def itemsize_bytes(self) -> int:
        """Bytes per element of an ONNX tensor of this format (rounded up: int4 -> 1)."""
        return math.ceil(self.bits / 8)


DTYPES: Mapping[str, DType] = MappingProxyType({d.name: d for d in (
    DType("fp64", 64, "float", ("double", "float64"), peak_key="fp64",
          fallback={_M: (((_V, "fp64"),),), _V: ()}, roles=frozenset({"precision"})),
    DType("fp32", 32, "float", ("float", "float32"), peak_key="fp32",
          fallback={_M: (((_V, "fp32"),),), _V: (((_M, "fp32"),),)}, roles=_ALL),
    DType("tf32", 32, "float", peak_key="tf32", vector_as="fp32",
          fallback={_M: (((_M, "fp32"), (_V, "fp32")),), _V: (((_V, "fp32"),),)},
          roles=frozenset({"precision"})),
    # the last tiers of a 16-bit float: the other one (a bf16-only device runs fp16 in bf16),
    # then, on a device that publishes no vector peak, its matrix fp32 figure (as fp32 does)
    DType("fp16", 16, "float", ("float16",), ("half",), peak_key="fp16",
          fallback={_M: (((_V, "fp16"), (_V, "fp32")), ((_M, "bf16"),)),
                    _V: (((_V, "fp32"),), ((_V, "bf16"),), ((_M, "fp32"),))}, roles=_ALL),
    DType("bf16", 16, "float", ("bfloat16",), peak_key="bf16",
          fallback={_M: (((_V, "bf16"), (_V, "fp32")), ((_M, "fp16"),)),
                    _V: (((_V, "fp32"),), ((_V, "fp16"),), ((_M, "fp32"),))}, roles=_ALL),
    # float8e8m0 (a block scale's format) is read as a spelling only: no graph carries it yet
    DType("fp8", 8, "float",
          ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"), ("float8e8m0",),
          peak_key="fp8",
          fallback={_M: (((_M, "fp16"), (_M, "bf16")), ((_V, "fp16"), (_V, "bf16"), (_V, "fp32"))),
                    _V: (((_V, "fp16"), (_V, "bf16"), (_V, "fp32")),)}, roles=_ALL),
    # block-scaled fp8: fp32 scale per 128x128 weight block (DeepSeek-V3 / aiconfigurator
    # "fp8_block"; activations' 1x128 groups are not counted); runs on the fp8 unit
    DType("fp8_block", 8, "float", aliases=("fp8-block", "fp8_blockwise", "fp8-blockwise"),
          peak_key="fp8", roles=frozenset({"precision", "weights"}), scale_bits=32,
          block=128 * 128),
    DType("fp6", 6, "float", peak_key="fp6",
          fallback={_M: (((_M, "fp8"),), ((_M, "fp16"), (_M, "bf16")),
                         ((_V, "fp16"), (_V, "fp32"))),
                    _V: (((_V, "fp8"), (_V, "fp16"), (_V, "fp32")),)}),
    # fp4 alone: e2m1 elements, scales not counted; nvfp4 / mxfp4 count theirs
    DType("fp4", 4, "float", aliases=("float4e2m1",), peak_key="fp4",
          fallback={_M: (((_M, "fp6"),), ((_M, "fp8"),), ((_M, "fp16"), (_M, "bf16")),
                         ((_V, "fp16"), (_V, "fp32"))),
                    _V: (((_V, "fp6"), (_V, "fp8"), (_V, "fp16"), (_V, "fp32")),)},
          roles=frozenset({"precision"})),
    # NVIDIA NVFP4: an fp8 (e4m3) scale per 16 values (+ one fp32 per tensor, not counted)
    DType("nvfp4", 4, "float", aliases=("nv_fp4", "nv-fp4"), peak_key="fp4",
          roles=frozenset({"precision", "weights"}), scale_bits=8, block=16),
    # OCP MX fp4: an e8m0 scale per 32 values
    DType("mxfp4", 4, "float", aliases=("mx_fp4", "mx-fp4"), peak_key="fp4",
          roles=frozenset({"precision", "weights"}), scale_bits=8, block=32),
    DType("int64", 64, "int", ("int64", "uint64"),
          fallback={_M: (((_V, "int32"), (_V, "fp32")),), _V: (((_V, "int32"), (_V, "fp32")),)}),
    DType("int32", 32, "int", ("int32", "uint32"), peak_key="int32",
          fallback={_M: (((_V, "int32"), (_V, "fp32")),), _V: (((_V, "fp32"),),)}),
    DType("int16", 16, "int", ("int16", "uint16"),
          fallback={_M: (((_M, "int32"),), ((_V, "int32"), (_V, "fp32"))),
                    _V: (((_V, "int32"), (_V, "fp32")),)}),
    DType("int8", 8, "int", ("int8", "uint8", "bool"), peak_key="int8",
          fallback={_M: (((_V, "int8"), (_V, "int32"), (_V, "fp32")),),
                    _V: (((_V, "int32"), (_V, "fp32")),)},
          roles=frozenset({"precision", "weights", "kv_cache"})),
    DType("int4", 4, "int", ("int4", "uint4"), peak_key="int4",
          fallback={_M: (((_M, "int8"),), ((_V, "int8"), (_V, "fp32"))),
                    _V: (((_V, "int8"), (_V, "int32"), (_V, "fp32")),)},
          roles=frozenset({"weights"})),
    # ONNX element types with no compute: sized for byte counts only
    DType("string", 64, "other", ("string",)),
    DType("complex64", 64, "other", ("complex64",)),
    DType("complex128", 128, "other", ("complex128",)),
)})

_NUMERIC = tuple(d for d in DTYPES.values() if d.kind != "other")


def _role(role: str) -> tuple[str, ...]:
    return tuple(d.name for d in DTYPES.values() if role in d.roles)


#: the choices a user has, in table order: run precision (``RunConfig.precision``) and the LLM
#: tensor classes.
PRECISIONS: tuple[str, ...] = _role("precision")
WEIGHT_DTYPES: tuple[str, ...] = _role("weights")
KV_DTYPES: tuple[str, ...] = _role("kv_cache")
ACTIVATION_DTYPES: tuple[str, ...] = _role("activations")
#: bytes per element of a float tensor stored at each run precision, block scales included
#: (nvfp4 0.5625).
STORAGE_BYTES: Mapping[str, float] = MappingProxyType(
    {p: DTYPES[p].bytes_per_element for p in PRECISIONS})
#: ONNX element-type name -> bytes per element of a tensor (rounded up to whole bytes).
ONNX_ITEMSIZE_BYTES: Mapping[str, int] = MappingProxyType(
    {n: d.itemsize_bytes for d in DTYPES.values() for n in d.onnx})
#: ONNX names of floating-point tensors (rescaled to a run's precision).
FLOAT_ONNX_NAMES: frozenset[str] = frozenset(
    n for d in DTYPES.values() if d.kind == "float" for n in d.onnx)
#: the keys a device file's ``[peak_TOPS.<engine>]`` tables may use.
PEAK_KEYS: tuple[str, ...] = tuple(dict.fromkeys(d.peak_key for d in _NUMERIC if d.peak_key))
#: every accepted spelling of a numeric format -> its canonical name.
DTYPE_NAMES: Mapping[str, str] = MappingProxyType({
    **{d.name: d.name for d in _NUMERIC},
    **{n: d.name for d in _NUMERIC for n in (*d.onnx, *d.aliases)},
})
#: (engine, canonical name) asked for -> tiers of (engine, peak key) a device may have instead.
FALLBACKS: Mapping[tuple[str, str], Tiers] = MappingProxyType(
    {(engine, d.name): tiers for d in _NUMERIC for engine, tiers in d.fallback.items()})


def bytes_per_element(name: str) -> float:
    """Storage bytes per element of the format called ``name`` (canonical; int4 = 0.5)."""
    return DTYPES[name].bytes_per_element


def peak_key(engine: str, name: str) -> str:
    """The peak key whose figure applies to ``engine`` work at format ``name`` (vector tf32 ->
    fp32; a format without a unit of its own keeps its name and falls back)."""
    d = DTYPES[name]
    if engine == _V and d.vector_as:
        return d.vector_as
    return d.peak_key or d.name
