"""Tensor-class dtypes of an LLM serving run (weights, KV cache, activations) and what they cost.

Storage bytes per element come from the one dtype table (``roofcast.dtypes``; int4 0.5 B,
block-scaled formats with their scales: nvfp4 0.5625); int4 adds a group of ``INT4_GROUP`` =
128 elements' fp16 scale and 4-bit zero point (+2.5 / 128 B), int8 and fp8 one fp16 scale per
output channel (+2 / K B). Embedding, LM head, router, biases, norms: the model dtype.
GEMM compute (``gemm_plan``): 16/32-bit weights run in their own dtype; fp8 / fp8_block /
nvfp4 / mxfp4 are W8A8 / W4A4 on their own matrix unit (dequantised only where the device
falls back); int8/int4 are weight-only: activation dtype plus ``DEQUANT_FLOPS_PER_WEIGHT``
vector FLOPs per weight per M-tile of ``DEQUANT_TILE_M`` tokens, overlapping the GEMM.
A quantised KV cache is converted in the attention kernel: FLOPs =
``KV_CONVERT_OPS[kv][path]`` x ``FLOPS_PER_LANE_OP`` x elements (``kv_convert_flops``), none
on a device with the KV dtype's units when the engine reads it natively (``native_kv``).
Rationale and the fit of these counts: docs/design/defaults.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofcast.dtypes import DTYPES, bytes_per_element
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.types import ACTIVATION_DTYPES, KV_DTYPES, WEIGHT_DTYPES

INT4_GROUP = 128
#: bytes of an int4 group's fp16 scale and 4-bit zero point.
INT4_GROUP_OVERHEAD_BYTES = 2.5
#: bytes of a per-output-channel scale (int8, fp8).
CHANNEL_SCALE_BYTES = 2.0
DEQUANT_FLOPS_PER_WEIGHT: dict[str, float] = {"int4": 4.0, "int8": 2.0, "fp8": 2.0,
                                               "fp8_block": 2.0, "nvfp4": 4.0, "mxfp4": 4.0}
#: weight formats whose GEMMs quantise activations too and run on the format's own matrix unit
#: (W8A8, W4A4), dequantised only on a device without that unit.
OWN_UNIT_WEIGHTS: tuple[str, ...] = ("fp8", "fp8_block", "nvfp4", "mxfp4")
DEQUANT_TILE_M = 128
#: 32-bit lane operations per KV element converted, by KV dtype and the device condition it
#: applies under ("": every device; module docstring). Chosen on the Fig 3 quantisation rows.
KV_CONVERT_OPS: dict[str, dict[str, float]] = {
    "fp8": {"fp8-units": 10.0, "no-fp8-units": 32.0},
    "int8": {"": 2.0},
}
#: FLOPs the fp32 vector peak counts per lane per clock (one FMA = 2 FLOPs).
FLOPS_PER_LANE_OP = 2.0
#: the vector dtype a KV conversion row is timed at (32-bit lane work).
KV_CONVERT_DTYPE = "fp32"
#: weight dtypes a model runs in as they are (floats of 16 bits or more): fp32, fp16, bf16.
WIDE_FLOATS: tuple[str, ...] = tuple(w for w in WEIGHT_DTYPES
                                     if DTYPES[w].kind == "float" and DTYPES[w].bits >= 16)


def dtype_bytes(dtype: str) -> float:
    """Storage bytes per element of ``dtype`` (``roofcast.dtypes``; int4 = 0.5)."""
    return bytes_per_element(dtype)


def weight_bytes_per_element(dtype: str, k: int) -> float:
    """Bytes per weight element of a K-input projection stored at ``dtype``, scales included
    (module docstring)."""
    base = dtype_bytes(dtype)
    if dtype == "int4":
        return base + INT4_GROUP_OVERHEAD_BYTES / INT4_GROUP
    if dtype in ("int8", "fp8"):
        return base + CHANNEL_SCALE_BYTES / max(int(k), 1)
    return base


@dataclass(frozen=True)
class GemmPlan:
    """How a projection GEMM runs: ``compute`` dtype (a ``predictor.precision`` precision),
    ``dequant_flops_per_weight`` per M-tile (0: none), ``dequant_on_fallback_only``: charge the
    dequantisation only where the device lacks ``compute``'s matrix unit (fp8 weights)."""

    compute: str
    dequant_flops_per_weight: float
    dequant_on_fallback_only: bool = False

    def dequant_flops(self, weight_elems: float, tokens: float) -> float:
        """Dequantisation FLOPs of one GEMM use over ``tokens`` rows (module docstring)."""
        tiles = max(1, math.ceil(tokens / DEQUANT_TILE_M))
        return self.dequant_flops_per_weight * weight_elems * tiles


@dataclass(frozen=True)
class TensorDtypes:
    """Storage dtypes per tensor class (``kv_cache`` None: the activations')."""

    weights: str = "fp16"
    kv_cache: str | None = None
    activations: str = "fp16"

    def __post_init__(self) -> None:
        for name, value, allowed in (("weights", self.weights, WEIGHT_DTYPES),
                                     ("kv_cache", self.kv, KV_DTYPES),
                                     ("activations", self.activations, ACTIVATION_DTYPES)):
            if value not in allowed:
                raise PredictionError(f"{name} dtype {value!r} is not supported; choose one of "
                                      f"{', '.join(allowed)}")

    @property
    def kv(self) -> str:
        return self.kv_cache or self.activations

    @property
    def act_bytes(self) -> float:
        return dtype_bytes(self.activations)

    @property
    def kv_bytes(self) -> float:
        return dtype_bytes(self.kv)

    @property
    def model_dtype(self) -> str:
        """The float dtype the model runs in: 16/32-bit weights' own dtype (a model runs in
        one dtype; the engine casts activations to it), else the activations' (fp8
        activations: fp16)."""
        if self.weights in WIDE_FLOATS:
            return self.weights
        return "fp16" if self.activations == "fp8" else self.activations

    @property
    def vector_dtype(self) -> str:
        """Dtype of the vector kernels (norms, rotary, softmax, attention): the model dtype."""
        return self.model_dtype

    def gemm_plan(self) -> GemmPlan:
        """The projection GEMMs' compute dtype and dequantisation (module docstring)."""
        w = self.weights
        if w in WIDE_FLOATS:
            return GemmPlan(w, 0.0)
        if w in OWN_UNIT_WEIGHTS:
            return GemmPlan(w, DEQUANT_FLOPS_PER_WEIGHT[w], dequant_on_fallback_only=True)
        return GemmPlan(self.model_dtype, DEQUANT_FLOPS_PER_WEIGHT[w])

    def kv_convert_flops(self, elements: float, *, native: bool = False) -> dict[str, float]:
        """Conversion FLOPs of ``elements`` KV elements per device condition (``""``,
        ``"fp8-units"``, ``"no-fp8-units"``; module docstring); {} for a KV cache stored at
        the compute dtype or wider. ``native``: the engine's attention reads this KV dtype on
        the dtype's own units, so devices that have them (``"<kv>-units"``) convert nothing."""
        if self.kv_bytes >= dtype_bytes(self.model_dtype):
            return {}
        return {cond: ops * FLOPS_PER_LANE_OP * float(elements)
                for cond, ops in KV_CONVERT_OPS.get(self.kv, {}).items()
                if not (native and cond == f"{self.kv}-units")}

    @classmethod
    def of(cls, cfg) -> TensorDtypes:
        """From a ``ServingConfig``."""
        return cls(cfg.weights, cfg.kv_cache, cfg.activations)
