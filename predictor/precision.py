"""Numeric precision of a graph run: the peak an op uses, the bytes its float tensors move.

* **Storage width.** Every *floating-point* tensor (activations and weights) is stored at the
  width of the run's precision, block scales included (``STORAGE_BYTES``: fp32 4 B, fp16 2 B,
  fp8 1 B, nvfp4 0.5625 B), so an fp32 graph run at fp16 moves half the float bytes. Integer/
  bool tensors (indices, masks, shapes) keep their width. FLOPs never change with precision.
* **Compute dtype.** The peak that applies is the precision's own, except on the vector engine
  where tf32 means fp32 (tf32 exists only on matrix units). ``data``/``free`` ops have none.
* **Fallbacks.** A device without a unit for (engine, dtype) uses ``HardwareSpec.peak``'s
  fallback tiers: math at the fastest unit of the first tier it has, storage still at the
  requested width, and a note saying both (copied into the ``peak_note`` column).

The widths, float names and peak keys are views of the one dtype table, ``roofcast.dtypes``.
"""

from __future__ import annotations

import functools

from roofcast.dtypes import DTYPES, ONNX_ITEMSIZE_BYTES, PRECISIONS, STORAGE_BYTES, peak_key
from roofcast.dtypes import FLOAT_ONNX_NAMES as FLOAT_DTYPES
from roofcast.graph_import.types import OpCost, OpNode, TensorInfo
from roofcast.predictor.errors import PredictionError

__all__ = ["FLOAT_DTYPES", "PRECISIONS", "STORAGE_BYTES", "compute_dtype", "float_scale",
           "peak_dtype", "rescale_bytes", "rescale_cost", "storage_bytes"]


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
    """The dtype to look up in ``hw.peak(engine, dtype)``: vector tf32 -> fp32; a format
    computed on another format's unit (nvfp4 on fp4) keeps its name, so that the catalog's
    fallback note can name its storage width."""
    _check(precision)
    key = peak_key(str(engine), precision)
    return precision if key == DTYPES[precision].peak_key else key


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
    return STORAGE_BYTES[precision] / ONNX_ITEMSIZE_BYTES[source_dtype]


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
