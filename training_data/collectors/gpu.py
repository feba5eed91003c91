"""GPU collector: ONNX Runtime's CUDA provider, used when a CUDA device is present.

``cuda_status()`` says whether this machine can measure on CUDA and why not; ``require_cuda()``
returns the provider name or raises MeasurementError with that reason (CLI: one line, exit 2).
Kernels are timed one node at a time (a one-node model, I/O bound on the device, wall time of
``run_with_iobinding``): ORT's profiler times only the asynchronous launch on CUDA. Each time
includes one launch plus synchronisation, as the row's ``notes`` say.

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.collectors.gpu).
"""

from __future__ import annotations

import importlib.util
import math
import time
import uuid
from typing import Any

import numpy as np
import pandas as pd
from onnx import TensorProto, helper, numpy_helper

from roofcast.graph_import.types import Engine, OpNode
from roofcast.training_data.collectors import rows as tidy
from roofcast.training_data.collectors.ort_levels import graph_optimization_level
from roofcast.training_data.errors import MeasurementError

CUDA_PROVIDER = "CUDAExecutionProvider"
SOURCE_GPU = "roofcast.ort_cuda"


def cuda_status() -> tuple[bool, str]:
    """(usable, explanation)."""
    import onnxruntime as ort

    if CUDA_PROVIDER in ort.get_available_providers():
        return True, f"onnxruntime {ort.__version__} has {CUDA_PROVIDER}"
    torch_cuda = False
    if importlib.util.find_spec("torch") is not None:
        try:
            import torch

            torch_cuda = bool(torch.cuda.is_available())
        except Exception:  # a broken torch install is the same as none here
            torch_cuda = False
    if torch_cuda:
        return False, ("PyTorch sees a CUDA device but onnxruntime has no CUDAExecutionProvider: "
                       "pip install onnxruntime-gpu (in place of onnxruntime), then retry")
    return False, ("no CUDA device here: onnxruntime has no CUDAExecutionProvider and PyTorch "
                   "sees no CUDA GPU; measure on CPU (--device cpu) or run on a CUDA machine "
                   "with onnxruntime-gpu installed")


def require_cuda() -> str:
    """The CUDA provider name, or MeasurementError saying why it cannot be used."""
    ok, why = cuda_status()
    if not ok:
        raise MeasurementError(why)
    return CUDA_PROVIDER


def _session(model_bytes: bytes, config: Any, weights: dict[str, np.ndarray] | None = None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    values = [ort.OrtValue.ortvalue_from_numpy(a) for a in (weights or {}).values()]
    if weights:
        so.add_external_initializers(list(weights), values)
    so.graph_optimization_level = graph_optimization_level(config.opt_level)
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_bytes, so, providers=[CUDA_PROVIDER, "CPUExecutionProvider"])
    sess.roofcast_weights = values  # the session reads these buffers: keep them alive with it
    return sess


def time_on_device(model_bytes: bytes, feeds: dict[str, np.ndarray], config: Any,
                   weights: dict[str, np.ndarray] | None = None) -> list[float]:
    """Wall times (s) of ``config.repeats`` synchronised runs with device-resident I/O."""
    import onnxruntime as ort

    sess = _session(model_bytes, config, weights)
    binding = sess.io_binding()
    for name, arr in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(arr, "cuda", 0))
    for out in sess.get_outputs():
        binding.bind_output(out.name, "cuda", 0)
    times = []
    for i in range(config.warmup + config.repeats):
        t0 = time.perf_counter()
        sess.run_with_iobinding(binding)  # synchronises the device before returning
        if i >= config.warmup:
            times.append(time.perf_counter() - t0)
    return times


def node_model(op: OpNode, runnable_inits: dict[str, TensorProto], opset: list[Any],
               weights: dict[str, np.ndarray] | None = None
               ) -> tuple[bytes, dict[str, np.ndarray]] | None:
    """A one-node model of ``op`` and its random feeds; None when a shape is not concrete.
    ``weights``: initializer values kept out of the materialised proto (big tensors)."""
    weights = weights or {}
    rng = np.random.default_rng(0)
    inputs, inits, feeds, names = [], [], {}, []
    for t in op.inputs:
        if t is None:
            names.append("")
            continue
        if not all(isinstance(d, int) for d in t.shape) or t.dtype == "undefined":
            return None
        names.append(t.name)
        if t.name in weights:
            inits.append(numpy_helper.from_array(weights[t.name], t.name))
        elif t.name in runnable_inits:
            inits.append(runnable_inits[t.name])
        elif t.name in op.const_inputs:
            inits.append(numpy_helper.from_array(np.asarray(op.const_inputs[t.name]), t.name))
        else:
            inputs.append(helper.make_tensor_value_info(t.name, _elem(t.dtype), list(t.shape)))
            feeds[t.name] = _random(t.shape, _np_dtype(t.dtype), rng)
    node = helper.make_node(op.op_type, names, [o.name for o in op.outputs], name=op.name,
                            domain=op.domain or None)
    node.attribute.extend(_attributes(op))
    outputs = [helper.make_tensor_value_info(o.name, _elem(o.dtype), None) for o in op.outputs]
    graph = helper.make_graph([node], op.name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=opset, ir_version=8)
    return model.SerializeToString(), feeds


def _elem(onnx_dtype: str) -> int:
    """ONNX element type of a dtype name (``float`` -> TensorProto.FLOAT)."""
    return TensorProto.DataType.Value(onnx_dtype.upper())


def _attributes(op: OpNode) -> list[Any]:
    out = []
    for k, v in op.attrs.items():
        try:
            out.append(helper.make_attribute(k, v.tolist() if isinstance(v, np.ndarray) else v))
        except (TypeError, ValueError):
            continue
    return out


def _np_dtype(onnx_dtype: str) -> Any:
    return {"float": np.float32, "float16": np.float16, "double": np.float64,
            "bool": np.bool_}.get(onnx_dtype, onnx_dtype)


def _random(shape, dtype, rng) -> np.ndarray:
    if np.issubdtype(np.dtype(dtype), np.floating):
        return rng.standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype=dtype)


def measure_prepared_gpu(prep: Any, config: Any):
    """Per-node isolated CUDA times and the model's end-to-end time (module docstring)."""
    from roofcast.training_data.collectors.ort_cpu import SCHEMA_COLUMNS, Measurement

    require_cuda()
    inits = {t.name: t for t in prep.runnable.graph.initializer}
    opset = list(prep.runnable.opset_import)
    run_id = uuid.uuid4().hex[:16]
    e2e = float(np.median(time_on_device(prep.runnable.SerializeToString(), prep.feeds, config,
                                         prep.weights)))
    records, skipped = [], []
    for op in prep.graph.ops():
        if op.cost is None or op.cost.engine == Engine.FREE:
            continue
        built = node_model(op, inits, opset, prep.weights)
        if built is None:
            skipped.append(op.name)
            continue
        try:
            times = time_on_device(*built, config)
        except Exception as exc:  # one node ORT cannot run alone is reported, not fatal
            skipped.append(f"{op.name} ({type(exc).__name__})")
            continue
        records.append(_node_row(op, times, prep, config, e2e, run_id))
    frame = pd.DataFrame.from_records(records, columns=list(SCHEMA_COLUMNS))
    total = float(frame["latency_s"].sum()) if len(frame) else 0.0
    summary = {"model": prep.name, "dims": ",".join(f"{k}={v}" for k, v in
                                                     sorted(prep.dims.items())),
               "threads_intra": config.threads_intra, "threads_inter": config.threads_inter,
               "opt_level": config.opt_level, "repeats": config.repeats, "e2e_ms": e2e * 1e3,
               "e2e_p10_ms": math.nan, "e2e_p90_ms": math.nan, "sum_ops_ms": total * 1e3,
               "executor_ms": math.nan, "binding_ms": math.nan, "unattributed_ms": 0.0,
               "ops_over_e2e": total / e2e if e2e > 0 else math.nan,
               "sum_op_medians_ms": total * 1e3, "joined_fraction": 1.0 if len(frame) else
               math.nan, "rows": len(frame), "groups_fused": 0, "skipped_nodes": len(skipped),
               "run_id": run_id}
    return Measurement(frame, summary)


def _node_row(op, times, prep: Any, config: Any, e2e: float, run_id: str) -> dict[str, Any]:
    """The schema row of one node timed alone."""
    work = tidy.group_work([op])
    attrs = work.pop("_attrs")
    return {
        **work,
        "attrs": tidy.canonical_json(attrs),
        "precision": work["dtype"],
        **tidy.latency_stats(times),
        "model": prep.name,
        "device_id": "local",
        "cpu_model": "",
        "machine": tidy.machine_id(),
        "threads_intra": math.nan,
        "threads_inter": math.nan,
        "batch": prep.dims.get("batch", math.nan),
        "opt_level": config.opt_level,
        "mode": "infer",
        "provider": CUDA_PROVIDER,
        "runtime": tidy.RUNTIME_OF_PROVIDER[CUDA_PROVIDER],
        "repeats": config.repeats,
        "e2e_latency_s": e2e,
        "run_id": run_id,
        "source": SOURCE_GPU,
        "software": tidy.canonical_json(tidy.software_versions()),
        "timestamp": tidy.now_iso(),
        "direction": "fwd",
        "notes": "isolated node: one launch + device sync per timed run",
    }
