"""Numeric precision: which peak an op uses and how many bytes its float tensors move.

Model (documented, applied identically everywhere):

* **Storage width.** Every *floating-point* tensor (activations and weights) is stored at the
  width of the run's precision: fp64 8 B, fp32 and tf32 4 B (tf32 is an fp32 storage format with a
  reduced-mantissa matrix-unit mode), fp16/bf16 2 B, fp8 and int8 1 B. So an fp32 graph run at
  fp16 moves half the float bytes and at int8 a quarter. Integer/bool tensors (indices, masks,
  shapes) keep their width. FLOPs never change with precision.
* **Compute dtype.** The dtype whose peak applies is the precision itself, except on the vector
  engine where tf32 means fp32 (tf32 exists only on matrix units). Ops on the ``data``/``free``
  engines have no compute peak.
* **Fallbacks.** When a device lacks a unit for (engine, dtype) — e.g. fp16 on a Tesla P4 — the
  device's ``HardwareSpec.peak(engine, dtype)`` applies its documented fallback table and returns
  a note; the predictor copies that note into the ``peak_note`` column, never hiding it.
"""

from __future__ import annotations

import functools

from roofcast.graph_import.types import OpCost, OpNode, TensorInfo
from roofcast.predictor.errors import PredictionError

#: the compute precisions a run may ask for (``RunConfig.precision``); defined here, below
#: ``config`` and the runtime catalog, which both validate against it.
PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")

STORAGE_BYTES: dict[str, int] = {
    "fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1,
}
# ONNX float dtype names whose tensors are rescaled to the run's storage width.
FLOAT_DTYPES: frozenset[str] = frozenset({
    "float", "float32", "double", "float64", "float16", "bfloat16",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
})
# (engine, precision) -> dtype whose peak applies, where it differs from the precision.
_PEAK_DTYPE_OVERRIDES: dict[tuple[str, str], str] = {("vector", "tf32"): "fp32"}


def _check(precision: str) -> None:
    if precision not in PRECISIONS:
        raise PredictionError(
            f"precision {precision!r} is not supported; choose one of: {', '.join(PRECISIONS)}"
        )


def compute_dtype(precision: str) -> str:
    """The dtype label of a row's compute at ``precision`` (the ``dtype`` workload column)."""
    _check(precision)
    return precision


def peak_dtype(engine: str, precision: str) -> str:
    """The dtype key to look up in ``hw.peak(engine, dtype)`` (vector tf32 -> fp32)."""
    _check(precision)
    return _PEAK_DTYPE_OVERRIDES.get((str(engine), precision), precision)


def storage_bytes(precision: str) -> int:
    """Bytes per element of a float tensor stored at ``precision``."""
    _check(precision)
    return STORAGE_BYTES[precision]


@functools.lru_cache(maxsize=1024)
def float_scale(source_dtype: str, precision: str) -> float:
    """Factor applied to the bytes of a tensor of ONNX dtype ``source_dtype`` at ``precision``.

    = storage_bytes(precision) / itemsize(source_dtype) for float dtypes, 1 otherwise.
    (Kept per (dtype, precision): a sweep asks it for every tensor of every op.)
    """
    _check(precision)
    if source_dtype not in FLOAT_DTYPES:
        return 1.0
    return STORAGE_BYTES[precision] / TensorInfo("", (), source_dtype).itemsize_bytes


def rescale_bytes(nbytes: float, source_dtype: str, precision: str) -> float:
    """``nbytes`` of a tensor of ONNX dtype ``source_dtype`` when stored at ``precision``."""
    return float(nbytes) * float_scale(source_dtype, precision)


def _mixed_scale(tensors: tuple[TensorInfo | None, ...], precision: str) -> float:
    """Byte-weighted mean scale over ``tensors`` (float ones rescaled, others kept); 1 if empty."""
    total = 0.0
    scaled = 0.0
    for t in tensors:
        if t is None:
            continue
        nb = float(t.nbytes)
        total += nb
        scaled += nb * float_scale(t.dtype, precision)
    return scaled / total if total > 0 else 1.0


def rescale_cost(node: OpNode, precision: str) -> OpCost:
    """``node.cost`` with float bytes rescaled to ``precision`` (FLOPs unchanged).

    bytes_read is scaled by the byte-weighted scale of the node's non-weight inputs for its
    activation part, and by the weights' scale for ``weight_bytes``; bytes_written by the scale of
    the outputs. Using the tensors' *proportions* keeps a rule's own byte count (e.g. Gather
    reading only the gathered rows) while rescaling only what is floating point.
    """
    cost = node.cost
    if cost is None:
        raise PredictionError(f"node {node.name!r} has no cost; it cannot be rescaled")
    weights = tuple(t for t in node.inputs if t is not None and t.name in node.weight_inputs)
    acts = tuple(t for t in node.inputs if t is not None and t.name not in node.weight_inputs)
    w_scale = _mixed_scale(weights, precision)
    a_scale = _mixed_scale(acts, precision)
    o_scale = _mixed_scale(node.outputs, precision)
    act_read = max(cost.bytes_read - cost.weight_bytes, 0.0)
    weight_bytes = cost.weight_bytes * w_scale
    return OpCost(
        flops=cost.flops,
        bytes_read=act_read * a_scale + weight_bytes,
        bytes_written=cost.bytes_written * o_scale,
        weight_bytes=weight_bytes,
        engine=cost.engine,
    )
