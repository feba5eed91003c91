"""Tidy measurement rows (columns of ``training_data.schema``) from measured groups of nodes.

A *group* is the set of original graph nodes one or more ORT kernels computed (one node when
nothing was fused). Its row sums the nodes' roofcast costs (FLOPs, bytes read/written, weight
bytes), less — when the graph is given — the traffic of tensors passed between members, which a
fused kernel never writes or reads (``graph_import.fused_traffic.internal_traffic``: the
accounting the predictor uses for the groups it fuses, so measured and predicted fused rows
agree), names the nodes ``'+'``-joined in ``node`` and their op types in ``op_type``
(``Conv+Relu``). Shapes, attributes, dtype, family
and GEMM dims are those of the group's *dominant* node (most FLOPs, then most bytes); ``attrs``
also records the ORT kernels that ran (``ort_kernels``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import platform
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from roofcast.dtypes import DTYPE_NAMES, FLOAT_ONNX_NAMES
from roofcast.graph_import.costs.gemm_dims import gemm_dims
from roofcast.graph_import.costs.registry import op_family
from roofcast.graph_import.fused_traffic import internal_traffic
from roofcast.graph_import.types import Graph, OpNode

SOURCE_ORT_CPU = "roofcast.ort_cpu"
SOURCE_MICRO = "roofcast.microbench"
#: the runtime a collector measures (``schema`` column ``runtime``, a runtime profile name) by
#: the ONNX Runtime execution provider it ran; another provider records none (read as the device
#: kind's default)
RUNTIME_OF_PROVIDER: dict[str, str] = {"CPUExecutionProvider": "onnxruntime-cpu",
                                       "CUDAExecutionProvider": "onnxruntime-cuda"}

def dtype_label(onnx_dtype: str) -> str:
    """Schema dtype label of an ONNX dtype name (floats by the dtype table: ``float`` -> ``fp32``;
    ints keep their name)."""
    return DTYPE_NAMES[onnx_dtype] if onnx_dtype in FLOAT_ONNX_NAMES else onnx_dtype


def machine_id() -> str:
    """sha256 of the hostname, first 16 hex digits (never the raw hostname)."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16]


def software_versions() -> dict[str, str]:
    import onnx
    import onnxruntime

    return {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__,
            "numpy": np.__version__, "python": platform.python_version()}


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def json_safe(value: Any) -> Any:
    """Attributes as JSON values (arrays -> lists, bytes -> str, graphs -> their name)."""
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 64 else f"array{list(value.shape)}"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return type(value).__name__


def canonical_json(value: Any) -> str:
    return json.dumps(json_safe(value), sort_keys=True, separators=(",", ":"))


def shapes_json(tensors: Sequence[Any]) -> str:
    """JSON list of shapes; an omitted optional input is ``null``."""
    return json.dumps([None if t is None else [_dim(d) for d in t.shape] for t in tensors],
                      separators=(",", ":"))


def _dim(d: Any) -> Any:
    return int(d) if isinstance(d, int | np.integer) else str(d)


def dominant(nodes: Sequence[OpNode]) -> OpNode:
    """The node doing most of a group's work: most FLOPs, then most bytes, then first."""
    def key(ix: tuple[int, OpNode]) -> tuple[float, float, int]:
        i, n = ix
        c = n.cost
        return (c.flops if c else -1.0, c.bytes_total if c else -1.0, -i)

    return max(enumerate(nodes), key=key)[1]


def group_work(nodes: Sequence[OpNode], graph: Graph | None = None) -> dict[str, Any]:
    """Identity-of-work columns of a group (module docstring); NaN costs when a node has none."""
    main = dominant(nodes)
    costed = all(n.cost is not None for n in nodes)
    saved = {"bytes_read": 0.0, "bytes_written": 0.0}
    if graph is not None and len(nodes) > 1:
        saved["bytes_read"], saved["bytes_written"] = internal_traffic(
            graph, [n.name for n in nodes])

    def total(attr: str) -> float:
        if not costed:
            return math.nan
        return max(float(sum(getattr(n.cost, attr) for n in nodes)) - saved.get(attr, 0.0), 0.0)

    dims = gemm_dims(main) if main.cost is not None else None
    first_in = next((t for t in main.inputs if t is not None), None)
    dtype = dtype_label(first_in.dtype if first_in else (main.outputs[0].dtype
                                                         if main.outputs else "float"))
    return {
        "op_type": "+".join(n.op_type for n in nodes),
        "domain": main.domain,
        "family": op_family(main),
        "node": "+".join(n.name for n in nodes),
        "input_shapes": shapes_json(main.inputs),
        "output_shapes": shapes_json(nodes[-1].outputs),
        "dtype": dtype,
        "flops": total("flops"),
        "bytes_read": total("bytes_read"),
        "bytes_written": total("bytes_written"),
        "weight_bytes": total("weight_bytes"),
        "gemm_batch": dims[0] if dims else math.nan,
        "gemm_m": dims[1] if dims else math.nan,
        "gemm_n": dims[2] if dims else math.nan,
        "gemm_k": dims[3] if dims else math.nan,
        "_attrs": dict(main.attrs),
    }


def latency_stats(samples_s: Sequence[float]) -> dict[str, float]:
    """Median, 10th and 90th percentile (linear interpolation) of per-run times, seconds."""
    arr = np.asarray(samples_s, dtype=float)
    return {"latency_s": float(np.median(arr)), "latency_p10_s": float(np.percentile(arr, 10)),
            "latency_p90_s": float(np.percentile(arr, 90))}
