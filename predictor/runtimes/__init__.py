"""Execution profiles: how a runtime (ONNX Runtime, PyTorch eager, torch.compile, TensorRT, ...)
runs a graph — which kernels it launches, their dispatch floor, its math defaults.

``get_runtime(name)``, ``runtime_names()``, ``resolve_runtime(name | None, device_kind)``,
``default_runtime_name(kind)``; LLM serving engines (profiles with a ``[serving]`` table):
``default_serving_engine(kind)``, ``resolve_engine(name | None, hw)``; profiles are data
(``profiles/*.toml`` + the user folder, ``catalog``); kernel-mapping rules are registered
pattern functions (``patterns``, ``rules``).
"""

from roofcast.predictor.runtimes.catalog import (
    default_runtime_name,
    default_serving_engine,
    get_runtime,
    resolve_engine,
    resolve_runtime,
    runtime_names,
    user_dir,
)
from roofcast.predictor.runtimes.profile import ExecutionProfile

__all__ = ["ExecutionProfile", "default_runtime_name", "default_serving_engine", "get_runtime",
           "resolve_engine", "resolve_runtime", "runtime_names", "user_dir"]
