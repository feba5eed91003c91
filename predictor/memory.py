"""Device-memory footprint of a run: weights, live activations, and training state.

Model (bytes at the run's precision via ``predictor.precision.rescale_bytes``; integer tensors
keep their width):

* **weights_bytes**: distinct initializer tensors read by the graph. In training, parameters are
  held at ``training.state_precision`` (fp32 master weights; fp64 for fp64 runs) and frozen
  initializers (BN running stats, integer constants) at the run's precision.
* **Inference activations** — liveness over the graph's topological order: every tensor
  produced by a node (and every model input) is one buffer, live from the step of its producer
  (step 0 for model inputs) to the step of its last consumer (the end for model outputs). A free
  view op (Reshape, Flatten, Squeeze, ... on the ``free`` engine) whose output has the byte size
  of its first input aliases that buffer instead of allocating (ORT reuses the buffer); it only
  extends the buffer's lifetime (a view of a weight is not an activation). At step i the live set holds the node's inputs and outputs;
  ``peak_activation_bytes`` = max over steps of the live bytes. The intermediate tensors
  inside the groups of the runtime's kernel plan (fused groups) are never materialised and are
  left out.
* **Training** (all forward activations are kept for the backward pass, no recomputation):
  ``saved_activation_bytes`` = every activation buffer (model inputs included);
  ``peak_activation_bytes`` = saved + the largest backward working set of one node
  (its output gradients + the activation gradients it writes; weight gradients are counted in
  ``gradient_bytes``);
  ``gradient_bytes`` = one gradient per trainable parameter at the state precision;
  ``optimizer_state_bytes`` = ``OptimizerModel.state_tensors`` (Adam 2: m, v; SGD-momentum 1)
  parameter-sized tensors at the state precision.
* ``total_bytes`` = weights + gradients + optimizer state + peak activations. Not modelled:
  allocator fragmentation, framework/CUDA context, workspace of convolution algorithms.

Memory is (piecewise) affine in the batch size; ``max_batch_that_fits`` solves the affine model
from two batches and verifies the answer by importing at that batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from roofcast.graph_import.types import Engine, Graph, TensorInfo
from roofcast.predictor.config import RunConfig
from roofcast.predictor.precision import rescale_bytes
from roofcast.predictor.runtimes.patterns import KernelPlan
from roofcast.predictor.training import (
    OPTIMIZERS,
    is_float,
    requires_grad_tensors,
    state_precision,
    trainable_params,
)

GraphSource = Callable[[int], Graph]
"""Imports the model at a given batch size (e.g. ``lambda b: load_graph(path, dims, b)``)."""


@dataclass(frozen=True)
class MemoryFootprint:
    """Bytes held on the device during a run (see module docstring)."""

    mode: str
    weights_bytes: float
    peak_activation_bytes: float
    saved_activation_bytes: float = 0.0
    gradient_bytes: float = 0.0
    optimizer_state_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.gradient_bytes + self.optimizer_state_bytes
                + self.peak_activation_bytes)

    def fits(self, hw) -> bool:
        """True when ``total_bytes`` <= the device's memory capacity (``hw.mem_capacity_bytes``)."""
        return self.total_bytes <= float(hw.mem_capacity_bytes)

    def as_dict(self) -> dict[str, float | str]:
        return {**dataclasses.asdict(self), "total_bytes": self.total_bytes}


def _nbytes(t: TensorInfo, precision: str) -> float:
    """Bytes of ``t`` at ``precision``; 0 for a tensor of an unresolved node (shape not
    concrete), which only an incomplete prediction (``allow_incomplete``, flagged as such)
    contains: its memory figures are then lower bounds."""
    if not t.is_concrete:
        return 0.0
    return rescale_bytes(t.nbytes, t.dtype, precision)


def _buffers(graph: Graph, skip: set[str], step_of: dict[str, int] | None = None,
             ) -> tuple[dict[str, TensorInfo], dict[str, str], dict[str, int], dict[str, int]]:
    """Activation buffers: root tensor infos, alias -> root, start step, end step (inclusive).

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
    return roots, root_of, start, end


def peak_live_bytes(graph: Graph, precision: str, skip: set[str] | None = None,
                    step_of: dict[str, int] | None = None) -> float:
    """Max over topological steps of the bytes of live activation buffers (inference)."""
    roots, _, start, end = _buffers(graph, skip or set(), step_of)
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


def _weights_bytes(graph: Graph, precision: str, trainable: set[str], train_prec: str) -> float:
    seen: dict[str, float] = {}
    for node in graph.ops():
        for t in node.inputs:
            if t is not None and t.name in node.weight_inputs and t.name not in seen:
                p = train_prec if t.name in trainable else precision
                seen[t.name] = _nbytes(t, p)
    return sum(seen.values())


def memory_footprint(graph: Graph, config: RunConfig, plan: KernelPlan | None = None
                     ) -> MemoryFootprint:
    """The footprint of one run of ``graph`` under ``config`` (see module docstring); ``plan``:
    the runtime's kernel plan (``predictor.workload.kernel_plan``), whose groups' intermediate
    tensors are never materialised (None: every node's output is)."""
    precision = config.precision
    if config.mode != "train":
        skip: set[str] = set()
        step_of: dict[str, int] = {}
        if plan is not None and plan.groups:
            g = graph.nx_graph
            index = {node.name: i for i, node in enumerate(graph.ops())}
            for members in plan.groups.values():
                for name in members[:-1]:
                    skip.update(t.name for t in g.nodes[name]["op"].outputs)
                step_of.update((name, index[members[-1]]) for name in members)
        return MemoryFootprint(
            mode=config.mode,
            weights_bytes=_weights_bytes(graph, precision, set(), precision),
            peak_activation_bytes=peak_live_bytes(graph, precision, skip, step_of),
        )
    sp = state_precision(precision)
    params = trainable_params(graph)
    param_bytes = sum(_nbytes(p.tensor, sp) for p in params.values())
    roots, _, _, _ = _buffers(graph, set())
    saved = sum(_nbytes(t, precision) for t in roots.values())
    req = requires_grad_tensors(graph)
    transient = 0.0
    for node in graph.ops():
        if node.cost is None or node.cost.engine == Engine.FREE:
            continue
        grads_in = sum(_nbytes(t, precision) for t in node.inputs
                       if t is not None and t.name in req and is_float(t)
                       and t.name not in params)  # weight grads are in gradient_bytes
        if grads_in == 0:
            continue
        gout = sum(_nbytes(t, precision) for t in node.outputs if is_float(t))
        transient = max(transient, gout + grads_in)
    return MemoryFootprint(
        mode="train",
        weights_bytes=_weights_bytes(graph, precision, set(params), sp),
        peak_activation_bytes=saved + transient,
        saved_activation_bytes=saved,
        gradient_bytes=param_bytes,
        optimizer_state_bytes=OPTIMIZERS[config.optimizer].state_tensors * param_bytes,
    )


def _config_at(config: RunConfig, batch: int) -> RunConfig:
    return dataclasses.replace(config, dims={**config.dims, "batch": batch})


def max_batch_that_fits(graph_source: GraphSource, hw, config: RunConfig,
                        limit: int = 1 << 20) -> int | None:
    """Largest batch whose ``memory_footprint`` fits ``hw``; 0 when batch 1 does not fit.

    Memory is affine in batch: m(b) = a + c·b. Measure m(1), m(2), solve
    b* = floor((capacity − a) / c), then verify by importing at b* and b* + 1 and correct by
    bisection if the footprint is not exactly affine (liveness peaks can move). Returns None
    when memory does not grow with the batch (the model has no batch dim bound by the source).
    """
    cap = float(hw.mem_capacity_bytes)

    def total(b: int) -> float:
        return memory_footprint(graph_source(b), _config_at(config, b)).total_bytes

    m1 = total(1)
    if m1 > cap:
        return 0
    m2 = total(2)
    slope = m2 - m1
    if slope <= 0:
        return None
    guess = int(min(max((cap - (m1 - slope)) // slope, 1), limit))
    if total(guess) <= cap:
        if guess >= limit or total(guess + 1) > cap:
            return guess  # verified: b* fits, b* + 1 does not
        lo, hi, step = guess + 1, None, 1
        while hi is None:  # not affine after all: exponential search upwards
            probe = min(lo + step, limit)
            if probe == lo:
                return lo
            if total(probe) <= cap:
                lo, step = probe, step * 2
            else:
                hi = probe
    else:
        if guess > 1 and total(guess - 1) <= cap:
            return guess - 1
        lo, hi = 1, guess
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if total(mid) <= cap:
            lo = mid
        else:
            hi = mid
    return lo
