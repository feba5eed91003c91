"""Memory of one run of an ONNX graph on one device (bytes at the run's precision; integer
tensors keep their width).

Weights: the distinct initializers the graph reads. Inference activations: liveness over the
topological order — each produced tensor (and model input) is a buffer live from its
producer's step to its last consumer's (model outputs: to the end); a free view of the same
size aliases its input; a fused group's inner tensors never exist; peak = max over steps.
Training (no recomputation): saved = every activation buffer; peak = saved + the largest
backward working set of one node (its output gradients + the activation gradients it
writes); gradients and optimizer states = trainable elements x ``state.bytes_per_param``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from roofcast.graph_import.types import Engine, Graph, TensorInfo
from roofcast.predictor.config import RunConfig
from roofcast.predictor.memory.state import bytes_per_param
from roofcast.predictor.memory.types import DeviceMemory
from roofcast.predictor.precision import rescale_bytes
from roofcast.predictor.runtimes.patterns import KernelPlan
from roofcast.predictor.training import is_float, requires_grad_tensors, trainable_params

GraphSource = Callable[[int], Graph]
"""Imports the model at a given batch size (e.g. ``lambda b: load_graph(path, dims, b)``)."""


def _nbytes(t: TensorInfo, precision: str) -> float:
    """Bytes of ``t`` at ``precision``; 0 for a tensor of an unresolved node (shape not
    concrete), which only an incomplete prediction (``allow_incomplete``, flagged as such)
    contains: its memory figures are then lower bounds."""
    if not t.is_concrete:
        return 0.0
    return rescale_bytes(t.nbytes, t.dtype, precision)


def _buffers(graph: Graph, skip: set[str], step_of: dict[str, int] | None = None,
             ) -> tuple[dict[str, TensorInfo], dict[str, int], dict[str, int]]:
    """Activation buffers: root tensor infos, start step, end step (inclusive).

    ``step_of`` moves nodes to another step (a fused group's members all run at its last
    member's step, so the group's inputs and outputs are live together).
    """
    order = list(graph.ops())
    last = len(order) - 1
    step_of = step_of or {}
    weights = {n for node in order for n in node.weight_inputs}
    root_of: dict[str, str] = {}
    roots: dict[str, TensorInfo] = {}
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    for t in graph.inputs:
        if t.name not in weights:
            root_of[t.name] = t.name
            roots[t.name] = t
            start[t.name] = end[t.name] = 0
    for i, node in enumerate(order):
        step = step_of.get(node.name, i)
        for t in node.inputs:
            if t is not None and t.name in root_of:
                r = root_of[t.name]
                end[r] = max(end[r], step)
        src = node.input(0)
        is_view = (node.cost is not None and node.cost.engine == Engine.FREE and src is not None
                   and node.outputs and _nbytes(node.outputs[0], "fp32") == _nbytes(src, "fp32"))
        if is_view and src.name in weights:  # a view of a weight is the weight, not an activation
            weights.add(node.outputs[0].name)
            continue
        is_view = is_view and src.name in root_of
        for j, t in enumerate(node.outputs):
            if t.name in skip:
                continue
            if is_view and j == 0:
                root_of[t.name] = root_of[src.name]
                continue
            root_of[t.name] = t.name
            roots[t.name] = t
            start[t.name] = end[t.name] = step
    for t in graph.outputs:
        if t.name in root_of:
            end[root_of[t.name]] = last
    return roots, start, end


def peak_live_bytes(graph: Graph, precision: str, skip: set[str] | None = None,
                    step_of: dict[str, int] | None = None) -> float:
    """Max over topological steps of the bytes of live activation buffers (inference)."""
    roots, start, end = _buffers(graph, skip or set(), step_of)
    n = max(len(graph), 1)
    delta = [0.0] * (n + 1)
    for name, t in roots.items():
        b = _nbytes(t, precision)
        delta[start[name]] += b
        delta[end[name] + 1] -= b
    peak = live = 0.0
    for d in delta[:n]:
        live += d
        peak = max(peak, live)
    return peak


def _weights_bytes(graph: Graph, precision: str) -> float:
    seen: dict[str, float] = {}
    for node in graph.ops():
        for t in node.inputs:
            if t is not None and t.name in node.weight_inputs and t.name not in seen:
                seen[t.name] = _nbytes(t, precision)
    return sum(seen.values())


def _fused_away(graph: Graph, plan: KernelPlan | None) -> tuple[set[str], dict[str, int]]:
    """The inner tensors of the plan's fused groups and each member's step (its group's
    last member's)."""
    skip: set[str] = set()
    step_of: dict[str, int] = {}
    if plan is not None and plan.groups:
        g = graph.nx_graph
        index = {node.name: i for i, node in enumerate(graph.ops())}
        for members in plan.groups.values():
            for name in members[:-1]:
                skip.update(t.name for t in g.nodes[name]["op"].outputs)
            step_of.update((name, index[members[-1]]) for name in members)
    return skip, step_of


def _backward_working_set(graph: Graph, precision: str, params: set[str]) -> float:
    """The largest output gradients + activation gradients of one node's backward."""
    req = requires_grad_tensors(graph)
    transient = 0.0
    for node in graph.ops():
        if node.cost is None or node.cost.engine == Engine.FREE:
            continue
        grads_in = sum(_nbytes(t, precision) for t in node.inputs
                       if t is not None and t.name in req and is_float(t)
                       and t.name not in params)  # weight grads are in gradients_bytes
        if grads_in == 0:
            continue
        gout = sum(_nbytes(t, precision) for t in node.outputs if is_float(t))
        transient = max(transient, gout + grads_in)
    return transient


def memory_footprint(graph: Graph, config: RunConfig, plan: KernelPlan | None = None,
                     capacity_bytes: float = math.inf) -> DeviceMemory:
    """The memory of one run of ``graph`` under ``config`` (module docstring); ``plan``: the
    runtime's kernel plan (``predictor.workload.kernel_plan``), whose groups' inner tensors
    are never materialised (None: every node's output is); ``capacity_bytes``: the device's."""
    precision = config.precision
    weights = _weights_bytes(graph, precision)
    if config.mode != "train":
        skip, step_of = _fused_away(graph, plan)
        return DeviceMemory(capacity_bytes=capacity_bytes, weights_bytes=weights,
                            activations_bytes=peak_live_bytes(graph, precision, skip, step_of))
    params = trainable_params(graph)
    elems = float(sum(p.tensor.numel for p in params.values() if p.tensor.is_concrete))
    _, g_b, o_b = bytes_per_param(precision, config.optimizer)
    roots, _, _ = _buffers(graph, set())
    saved = sum(_nbytes(t, precision) for t in roots.values())
    return DeviceMemory(
        capacity_bytes=capacity_bytes, weights_bytes=weights, gradients_bytes=elems * g_b,
        optimizer_bytes=elems * o_b,
        activations_bytes=saved + _backward_working_set(graph, precision, set(params)),
        saved_activations_bytes=saved)
