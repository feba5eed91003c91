"""What a run gets when it names nothing, in one place.

* Per-kernel estimator, one per road: ``GRAPH_ESTIMATOR`` (an ONNX graph on one device),
  ``SERVING_ESTIMATOR`` (LLM serving), ``PARALLEL_ESTIMATOR`` (a run over several devices).
* Runtime per device kind (``RUNTIME_BY_KIND``) and LLM serving engine (``ENGINE_BY_KIND``);
  ``LEGACY_RUNTIME_BY_KIND``: what a measured row or a trained model naming no runtime ran.
* ``LIMITS``: the budgets a user may raise by environment variable -> the module enforcing it
  (its default and what it caps are there); ``SETTINGS``: the other environment variables.
* Dtypes: the one table is ``roofcast.dtypes``.

This module imports nothing of roofcast, so every package may import it. Why these values:
docs/design/defaults.md; the estimators: ``benchmarks/road_choice.py``, docs/design/road.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

GRAPH_ESTIMATOR = "best-measured"
#: device kind -> the road ``best-measured`` times it with (``*``: kinds not measured yet).
GRAPH_ROAD_BY_KIND: Mapping[str, str] = MappingProxyType(
    {"gpu": "roofline+eff", "cpu": "auto", "*": "time-roofline"})
SERVING_ESTIMATOR = "roofline+eff"
PARALLEL_ESTIMATOR = "roofline+eff"

#: device kind -> the execution profile (``predictor/runtimes/profiles``) a run gets.
RUNTIME_BY_KIND: Mapping[str, str] = MappingProxyType(
    {"cpu": "onnxruntime-cpu", "gpu": "pytorch-eager", "accelerator": "pytorch-eager"})
#: device kind -> the LLM serving engine a run gets.
ENGINE_BY_KIND: Mapping[str, str] = MappingProxyType(
    {"cpu": "llama.cpp", "gpu": "vllm", "accelerator": "vllm"})
#: the kind whose defaults a device of an unknown kind gets.
FALLBACK_KIND = "gpu"
#: what rows and models from before the runtime column measured: today's defaults. Should
#: ``RUNTIME_BY_KIND`` change, freeze this one as a literal of the old values.
LEGACY_RUNTIME_BY_KIND: Mapping[str, str] = RUNTIME_BY_KIND

#: environment variable -> the module that enforces the budget.
LIMITS: Mapping[str, str] = MappingProxyType({
    "ROOFCAST_MAX_TENSOR_ELEMS": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_GRAPH_BYTES": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_DIM": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_NESTING": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_NODES": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_BATCH": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_TOKENS": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_DEVICES": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_SYSTEM_NODES": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_GLOBAL_BATCH": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_THREADS": "roofcast.graph_import.budgets",
    "ROOFCAST_MAX_TASK_CELLS": "roofcast.predictor.sweeps.spec",
    "ROOFCAST_MAX_IMPORT_BYTES": "roofcast.training_data.importers",
    "ROOFCAST_MAX_TRACE_ROWS": "roofcast.predictor.llm.sim.trace",
    "ROOFCAST_MAX_SIM_REQUESTS": "roofcast.predictor.llm.sim.checks",
    "ROOFCAST_MAX_IMPORT_ROWS": "roofcast.training_data.importers",
    "ROOFCAST_ORT_PLAN_MAX_BYTES": "roofcast.predictor.runtimes.ort_plan",
    "ROOFCAST_APP_WORKER_MEMORY_MB": "roofcast.app.worker",
    "ROOFCAST_APP_WORKER_TIMEOUT_S": "roofcast.app.worker",
})
#: the other environment variables roofcast reads (folders and the active learned model).
SETTINGS: Mapping[str, str] = MappingProxyType({
    "ROOFCAST_HW_DIR": "roofcast.hw_catalog.catalog",
    "ROOFCAST_SYSTEMS_DIR": "roofcast.hw_catalog.systems",
    "ROOFCAST_RUNTIME_DIR": "roofcast.predictor.runtimes.catalog",
    "ROOFCAST_DATA_DIR": "roofcast.training_data.store",
    "ROOFCAST_SHARED_DATA": "roofcast.training_data.public_kernels",
    "ROOFCAST_LEARNED_MODEL": "roofcast.predictor.learned.estimator",
})


def runtime_for(kind: str) -> str:
    """The runtime a device of ``kind`` gets when the run names none."""
    return RUNTIME_BY_KIND.get(kind, RUNTIME_BY_KIND[FALLBACK_KIND])


def engine_for(kind: str) -> str:
    """The LLM serving engine a device of ``kind`` gets when the run names none."""
    return ENGINE_BY_KIND.get(kind, ENGINE_BY_KIND[FALLBACK_KIND])
