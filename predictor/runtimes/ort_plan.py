"""``ort-optimized``: the kernels ONNX Runtime's CPU provider will actually run, asked of ONNX
Runtime itself (when it is installed).

The graph's weightless skeleton, dims bound and every data-less initializer filled with a
constant (never opening the user's external data), is optimised by one ONNX Runtime session at
level ``all``; the optimised nodes are mapped back to the original ones by tensor names
(``training_data.collectors.node_mapping``): one plan group per kernel, layout reorders as extra
copy kernels, eliminated nodes free. Cached per (skeleton digest, dims, level). Over the byte
budget (``ROOFCAST_ORT_PLAN_MAX_BYTES``, default 1 GiB), without ONNX Runtime or when it cannot
load the model, the plan is the fallback rules (``rules_ort``) with a note saying why.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.runtimes.ort_plan).
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

import roofcast.predictor.runtimes.rules_ort  # noqa: F401  (registers the fallback rules)
from roofcast.graph_import.types import Graph, TensorInfo
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.runtimes.patterns import (
    PATTERNS,
    ExtraKernel,
    Kernel,
    KernelPlan,
    register_pattern,
)
from roofcast.predictor.runtimes.rules_graph import is_constant, launches

LEVEL = "all"
FILL_VALUE = 0.5
IN_MEMORY_LOCATION = "roofcast-in-memory"
BUDGET_ENV = "ROOFCAST_ORT_PLAN_MAX_BYTES"
DEFAULT_BUDGET_BYTES = 1 << 30
CACHE_SIZE = 16
LAYOUT_KERNELS: frozenset[str] = frozenset({"ReorderInput", "ReorderOutput"})
#: what runs when ONNX Runtime cannot be asked (``rules_ort`` and the shared rules).
FALLBACK_PATTERNS: tuple[str, ...] = ("ort-pad-into-conv", "ort-layernorm", "gelu-erf",
                                      "epilogue", "ort-nchwc-reorders")


class OrtPlanUnavailableError(Exception):
    """ONNX Runtime's graph cannot be had for this model; the message says why."""


@dataclass(frozen=True)
class OrtKernels:
    """What ONNX Runtime runs, in original node names.

    ``groups``: original nodes per kernel (or split region of kernels), topological order;
    ``uncovered``: original nodes no kernel computes; ``layout``: (op type, tensor names) of
    each layout kernel ONNX Runtime added, with the group index it sits in (-1: none).
    """

    groups: tuple[tuple[str, ...], ...]
    uncovered: tuple[str, ...]
    layout: tuple[tuple[str, tuple[str, ...], int], ...]


_CACHE: OrderedDict[tuple, OrtKernels] = OrderedDict()


def byte_budget() -> int:
    """Most bytes of stand-in initializers built to ask ONNX Runtime (``BUDGET_ENV``)."""
    raw = os.environ.get(BUDGET_ENV)
    if raw is None:
        return DEFAULT_BUDGET_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise PredictionError(f"{BUDGET_ENV}={raw!r}: give a whole number of bytes >= 0 "
                              f"(default {DEFAULT_BUDGET_BYTES})")
    return value


def folded_bytes(graph: Graph) -> int:
    """Bytes of the tensors ONNX Runtime's constant folding computes at load: outputs of nodes
    whose every input is a constant (a ``ConstantOfShape`` of a large constant shape, ...)."""
    total = 0
    for n in graph.ops():
        inputs = [t for t in n.inputs if t is not None]
        if inputs and all(is_constant(graph, n, t) for t in inputs):
            total += sum(t.nbytes for t in n.outputs if t.is_concrete)
    return total


def runnable(skeleton: bytes, dims: Mapping[str, int], budget: int, folded: int = 0
             ) -> tuple[object, list[str], list[np.ndarray]]:
    """The named, dims-bound model and its stand-in initializers (module docstring, step 1);
    ``folded``: bytes ONNX Runtime computes at load, counted against ``budget`` too."""
    import onnx
    from onnx import TensorProto, helper

    from roofcast.graph_import.load import tensor_has_inline_data
    from roofcast.graph_import.shapes import bind_dims
    from roofcast.training_data.collectors.ort_cpu import name_nodes

    model = name_nodes(onnx.load_from_string(skeleton))
    if dims:
        bind_dims(model.graph, dict(dims))
    todo = [t for t in model.graph.initializer if not tensor_has_inline_data(t)]
    dtypes = []
    total = folded
    for t in todo:
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
        except KeyError:
            raise OrtPlanUnavailableError(f"initializer {t.name!r} has ONNX dtype {t.data_type}, "
                                     "which has no stand-in values") from None
        dtypes.append(dtype)
        total += math.prod(t.dims) * dtype.itemsize
    if total > budget:
        raise OrtPlanUnavailableError(
            f"its weights and load-time constants need {total / 2**20:.0f} MiB, over the "
            f"{budget / 2**20:.0f} MiB budget ({BUDGET_ENV})")
    names, arrays = [], []
    for t, dtype in zip(todo, dtypes, strict=True):
        fill = FILL_VALUE if np.issubdtype(dtype, np.floating) else 0
        arrays.append(np.full(tuple(t.dims), fill, dtype=dtype))
        names.append(t.name)
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        entry = t.external_data.add()
        entry.key, entry.value = "location", IN_MEMORY_LOCATION
    return model, names, arrays


def optimized_graph(model, names: list[str], arrays: list[np.ndarray], level: str = LEVEL):
    """ONNX Runtime's optimised graph of ``model`` on the CPU provider (step 2)."""
    import onnx
    import onnxruntime as ort

    levels = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    with tempfile.TemporaryDirectory(prefix="roofcast-ort-plan-") as tmp:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.graph_optimization_level = levels[level]
        so.log_severity_level = 3
        so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        so.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", "optimized.bin")
        so.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "64")
        if names:
            so.add_external_initializers(
                names, [ort.OrtValue.ortvalue_from_numpy(a) for a in arrays])
        try:
            ort.InferenceSession(model.SerializeToString(), so,
                                 providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT raises its own Fail / InvalidGraph / NotImplemented
            raise OrtPlanUnavailableError(f"ONNX Runtime cannot load it ({type(exc).__name__}: "
                                     f"{str(exc).strip()[:200]})") from None
        return onnx.load(str(Path(tmp) / "optimized.onnx"), load_external_data=False)


def ort_kernels(skeleton: bytes, dims: Mapping[str, int], level: str = LEVEL,
                budget: int | None = None, folded: int = 0) -> OrtKernels:
    """ONNX Runtime's kernels of a model, in original node names (steps 1-3), cached;
    ``folded``: ``folded_bytes`` of its graph."""
    key = (hashlib.sha256(skeleton).hexdigest(), tuple(sorted(dims.items())), level)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise OrtPlanUnavailableError("onnxruntime is not installed") from None
    from roofcast.training_data.collectors.node_mapping import map_optimized

    model, names, arrays = runnable(skeleton, dims, byte_budget() if budget is None else budget,
                                    folded)
    optimized = optimized_graph(model, names, arrays, level)
    mapping = map_optimized(model, optimized)
    kinds = {n.name: (n.op_type, (*n.input, *n.output)) for n in optimized.graph.node}
    layout = tuple((kinds[k][0], tuple(t for t in kinds[k][1] if t), mapping.group_of.get(k, -1))
                   for k in kinds if kinds[k][0] in LAYOUT_KERNELS)
    result = OrtKernels(tuple(g.nodes for g in mapping.groups), tuple(mapping.uncovered), layout)
    _CACHE[key] = result
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return result


def _tensors(graph: Graph) -> dict[str, TensorInfo]:
    out = {t.name: t for t in graph.inputs}
    for n in graph.ops():
        out.update((t.name, t) for t in n.outputs)
    return out


def plan_from_kernels(graph: Graph, kernels: OrtKernels, plan: KernelPlan) -> KernelPlan:
    """The plan ONNX Runtime's kernels make of ``graph`` (step 3); ``plan``'s own groups and
    free nodes are replaced, its other fields kept."""
    from roofcast.training_data.collectors.rows import dominant

    nodes = graph.nx_graph.nodes
    named = {m for g in kernels.groups for m in g} | set(kernels.uncovered)
    missing = sorted(named - set(nodes))
    if missing:
        raise OrtPlanUnavailableError(f"its node names do not match the imported graph "
                                 f"(e.g. {missing[0]!r})")
    groups: dict[str, tuple[str, ...]] = {}
    heads: list[str | None] = []
    for members in kernels.groups:
        ops = [nodes[m]["op"] for m in members if launches(nodes[m]["op"])]
        head = dominant(ops).name if ops else None
        heads.append(head)
        if len(ops) >= 2:
            groups[head] = (head, *(o.name for o in ops if o.name != head))
    free = {m for m in kernels.uncovered if launches(nodes[m]["op"])}
    tensors = _tensors(graph)
    extra: list[ExtraKernel] = []
    for i, (op_type, names, group) in enumerate(kernels.layout):
        tensor = next((tensors[t] for t in names if t in tensors and tensors[t].is_concrete),
                      None)
        after = heads[group] if group >= 0 else None
        if tensor is None or after is None:
            continue
        size = float(tensor.nbytes)
        extra.append(ExtraKernel(after=after, label=f"{op_type}.{i}", kernel=Kernel(
            op_type=op_type, family="data_movement", engine="data", flops=0.0,
            bytes_read=size, bytes_written=size, dtype=tensor.dtype)))
    fused = sum(len(g) > 1 for g in groups.values())
    note = (f"ONNX Runtime's optimised graph: {fused} fused kernels, {len(free)} nodes folded "
            f"or eliminated, {len(extra)} layout reorders")
    return replace(plan, groups=groups, free=frozenset(free),
                   extra=(*plan.extra, *extra)).with_note(note)


def fallback(graph: Graph, plan: KernelPlan, reason: str) -> KernelPlan:
    """The rules ONNX Runtime's CPU optimiser is known to follow (``FALLBACK_PATTERNS``)."""
    from roofcast.predictor.runtimes.rules import known_patterns

    known_patterns()  # the shared rules (``rules``) registered too
    plan = plan.with_note(f"ONNX Runtime not asked ({reason}): its fusion rules instead")
    for name in FALLBACK_PATTERNS:
        plan = PATTERNS[name](graph, plan)
    return plan


@register_pattern("ort-optimized")
def ort_optimized(graph: Graph, plan: KernelPlan) -> KernelPlan:
    """ONNX Runtime's own optimised graph mapped onto ``graph`` (module docstring), else the
    fallback rules with a note saying why."""
    if not graph.skeleton:
        return fallback(graph, plan, "the graph was not imported from an ONNX model")
    try:
        kernels = ort_kernels(graph.skeleton, graph.dims, folded=folded_bytes(graph))
        return plan_from_kernels(graph, kernels, plan)
    except OrtPlanUnavailableError as exc:
        return fallback(graph, plan, str(exc))
