"""Tensor-class dtypes of an LLM serving run: weights, KV cache, activations.

``TensorDtypes(weights, kv_cache, activations)`` says how each class of tensor is stored; the
GEMMs' compute dtype and the dequantisation work follow from it (``gemm_plan``).

**Storage bytes per element** (``DTYPE_BITS`` / 8; int4 is 0.5 byte, not graph_import's
1-byte itemsize):

* weights of the layers' linear projections at ``weights``, plus their quantisation scales
  (``weight_bytes_per_element``): int4 groups of ``INT4_GROUP`` = 128 elements along K carry an
  fp16 scale and a 4-bit zero point (AWQ/GPTQ ``group_size=128``): ``0.5 + (2 + 0.5) / 128``
  bytes per element; int8 and fp8 carry one fp16 scale per output channel (``2 / K`` per
  element). The embedding, the LM head, the router, biases and norms stay at the model dtype
  (``TensorDtypes.model_dtype``; AWQ, GPTQ and vLLM's fp8 leave them unquantised);
* the KV cache at ``kv_cache`` (None: the activations' dtype);
* activations at ``activations``.

**GEMM compute dtype** (``gemm_plan``):

* 16/32-bit weights: the weights' dtype (the model's dtype: a model runs in one float dtype,
  ``TensorDtypes.model_dtype``; vector kernels and attention run in it too);
* fp8 weights: W8A8, activations quantised per token on the fly (vLLM ``fp8``, TensorRT-LLM
  fp8): the fp8 matrix peak. On a device without fp8 matrix units the catalog's documented
  fallback (``HardwareSpec.peak``) computes at 16 bits and says so in its note, which the
  prediction surfaces; the weights stay 8-bit in memory and traffic (Marlin-style W8A16), and
  the dequantisation below is charged on those devices only (``dequant_on_fallback_only``);
* int8/int4 weights: weight-only quantisation (W8A16/W4A16 as AWQ, GPTQ/Marlin and llama.cpp
  run it): compute at the activation dtype plus dequantisation. (SmoothQuant-style W8A8 int8
  GEMMs are not modelled: int8 weights never ask for int8 matrix units.)

**Dequantisation cost** (weight-only): ``DEQUANT_FLOPS_PER_WEIGHT[dtype]`` vector FLOPs per
weight element per M-tile of ``DEQUANT_TILE_M`` = 128 tokens — the kernel converts each weight
tile once per thread-block row of the output (int4: unpack shift+mask, convert, subtract zero,
scale = 4; int8/fp8: convert, scale = 2). It runs in the GEMM kernel, overlapping the matrix
work: the GEMM's time is ``max(its own time, dequant FLOPs / vector peak)`` (``phases``).

**KV-cache conversion cost** (``kv_convert_rows``): an attention kernel that reads a quantised
KV cache (fp8, int8) converts every element it loads to the compute dtype before the QK^T and
PV products. That is vector work inside the attention kernel, overlapping its other terms
(``phases`` folds it as ``max(attention time, conversion compute time)``, as the dequant above):

    conversion FLOPs = KV_CONVERT_OPS[kv][path] x FLOPS_PER_LANE_OP x elements converted

* elements converted = ``2 x b x Hkv x hd x cached keys`` (K and V), times ``G = H / Hkv``
  when the engine's decode kernel runs one thread block per *query* head (``[serving]
  kv_convert_per = "query-head"``: vLLM's paged-attention kernel, grid (heads, sequences,
  partitions), csrc/attention/attention_kernels.cu; TensorRT-LLM's masked-MHA kernel, one block
  per head): each of the G query heads of a KV head loads and converts it again. A kernel that
  groups the G heads (FlashAttention, FlashInfer, XQA) converts once (``"kv-head"``, the
  default). Cached keys: a decode segment reads all its keys from the cache; a prefill segment
  attends its own new keys fresh (compute dtype) and reads only the past ones;
* ``KV_CONVERT_OPS`` = 32-bit lane operations per element, by KV dtype and device path. Path
  ``fp8-units`` / ``no-fp8-units``: devices with fp8 matrix units (Ada, Hopper, MI300) have
  fp8 convert instructions (PTX ``cvt.rn.f16x2.e4m3x2``); Ampere has neither, and
  ``cuda_fp8.hpp``'s ``__nv_cvt_fp8_to_halfraw`` emulates the conversion in integer code
  (shift, mask, re-bias the exponent, a NaN test and, for subnormals, a normalisation loop:
  about 15 integer operations per element before warp divergence). The CUDA 12 header read
  takes the ``cvt`` path only for ``__CUDA_ARCH__ >= 900``, so Ada may run the emulation
  too; the model treats every device with fp8 units as native (no Ada rows to tell).
  Conversions issue at 16 per SM per clock on sm_80/sm_90, a quarter of the 64 32-bit
  integer lanes (CUDA C++ Programming Guide, "Arithmetic instructions" throughput table), so
  one native conversion costs about 4 lane slots; vLLM's ``scaled_convert`` adds a float
  round trip for the KV scale (convert, multiply, convert back). int8 converts natively on
  every device (a byte-permute or ``I2F`` conversion and the scale multiply: 2, from the
  instruction count, not chosen on data; its 8 TensorRT-LLM rows: median error 6.5 -> 4.1 %
  and 14.3 -> 11.1 %);
* ``FLOPS_PER_LANE_OP`` = 2: the row is timed at the device's fp32 vector peak, which counts
  one FMA per lane per clock as 2 FLOPs.

The fp8 counts were chosen on the quantisation rows of Argonne's LLM-Inference-Bench (Fig 3,
Llama-3-8B, 128-2048 tokens, batch 1-64) — in distribution, not validated on held-out data:
the 68 fp8-KV rows (A100: vLLM 20, TensorRT-LLM 8; H100 vLLM: 40), a grid of 9 pairs
(software 16-48, native 4-12) scored with the shipped fp16 calibration, the pair with the
lowest median error (9.2 %, mean 12.0 %; native 8 ties: median 9.7 %, mean 11.8 %):
``no-fp8-units`` = 32 (about twice the ~15-operation emulation: warp divergence on
subnormals and vLLM's float round trip for the scale), ``fp8-units`` = 10 (a quarter-rate
``cvt`` pair, ~2 slots per element, plus the round trip's two conversions and a multiply).
The rows disagree per engine: vLLM's A100 rows alone would choose about 40, TensorRT-LLM's
about 24; one count per dtype and path is kept (no per-engine count is justified by 8 rows).
``benchmarks/llm_accuracy.py`` section 3 shows the rows before and after.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.types import ACTIVATION_DTYPES, DTYPE_BITS, KV_DTYPES, WEIGHT_DTYPES

INT4_GROUP = 128
#: bytes of an int4 group's fp16 scale and 4-bit zero point.
INT4_GROUP_OVERHEAD_BYTES = 2.5
#: bytes of a per-output-channel scale (int8, fp8).
CHANNEL_SCALE_BYTES = 2.0
DEQUANT_FLOPS_PER_WEIGHT: dict[str, float] = {"int4": 4.0, "int8": 2.0, "fp8": 2.0}
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
WIDE_FLOATS = ("fp32", "fp16", "bf16")


def dtype_bytes(dtype: str) -> float:
    """Storage bytes per element of ``dtype`` (``DTYPE_BITS / 8``; int4 = 0.5)."""
    return DTYPE_BITS[dtype] / 8.0


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
        if w == "fp8":
            return GemmPlan("fp8", DEQUANT_FLOPS_PER_WEIGHT["fp8"], dequant_on_fallback_only=True)
        return GemmPlan(self.model_dtype, DEQUANT_FLOPS_PER_WEIGHT[w])

    def kv_convert_flops(self, elements: float) -> dict[str, float]:
        """Conversion FLOPs of ``elements`` KV elements per device condition (``""``,
        ``"fp8-units"``, ``"no-fp8-units"``; module docstring); {} for a KV cache stored at
        the compute dtype or wider."""
        if self.kv_bytes >= dtype_bytes(self.model_dtype):
            return {}
        return {cond: ops * FLOPS_PER_LANE_OP * float(elements)
                for cond, ops in KV_CONVERT_OPS.get(self.kv, {}).items()}

    @classmethod
    def of(cls, cfg) -> TensorDtypes:
        """From a ``ServingConfig``."""
        return cls(cfg.weights, cfg.kv_cache, cfg.activations)
