"""Training step from a forward-only graph: backward rows per op and optimizer updates.

A step = forward (the graph's rows) + backward + optimizer update (Ben-Nun et al. 2019); the
loss is left out. A tensor requires grad when it is a float parameter (``OpNode.weight_inputs``
less ``OpSpec.non_trainable_inputs``) or a float output of a node with a requires-grad input.
Each op's registry entry names its backward kind (``OpSpec.backward``; ``BACKWARD_RULES`` maps it
to a rule): e.g. ``gemm`` = one GEMM of the forward's FLOPs F per requires-grad operand
(dX = dY·Wᵀ, dW = Xᵀ·dY), ``normalization`` 2F, ``softmax`` 4·numel(y); bytes at the run's
precision. Optimizer rows per parameter tensor (n elements, s bytes each at ``state_precision``):
SGD+momentum 4n FLOPs, reads 3ns, writes 2ns bytes; Adam 12n FLOPs, reads 4ns, writes 3ns.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.training).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from roofcast.graph_import.costs.gemm_dims import gemm_dims
from roofcast.graph_import.costs.inner_dims import inner_elems_or_nan
from roofcast.graph_import.costs.registry import backward_kind, op_family, spec_of
from roofcast.graph_import.types import Engine, Graph, OpNode, TensorInfo
from roofcast.predictor.config import RunConfig
from roofcast.predictor.graph_memo import memo
from roofcast.predictor.precision import FLOAT_DTYPES, compute_dtype, rescale_bytes, rescale_cost
from roofcast.predictor.workload_rows import COLUMNS, frame


@dataclass(frozen=True)
class OptimizerModel:
    """Per-element cost of one optimizer step: flops, state tensors read and written.

    ``reads``/``writes`` count tensors of the parameter's size (w, g and the state tensors).
    """

    name: str
    flops_per_element: float
    reads: int
    writes: int
    state_tensors: int  # optimizer state per parameter, in parameter-sized tensors


OPTIMIZERS: dict[str, OptimizerModel] = {
    "sgd_momentum": OptimizerModel("sgd_momentum", flops_per_element=4.0, reads=3, writes=2,
                                   state_tensors=1),
    "adam": OptimizerModel("adam", flops_per_element=12.0, reads=4, writes=3, state_tensors=2),
}


def state_precision(precision: str) -> str:
    """Precision of parameters, gradients and optimizer state: fp64 for fp64 runs, else fp32."""
    return "fp64" if precision == "fp64" else "fp32"


@dataclass(frozen=True)
class Param:
    """A trainable parameter tensor and the nodes that consume it."""

    tensor: TensorInfo
    consumers: tuple[str, ...]


def is_float(t: TensorInfo | None) -> bool:
    return t is not None and t.dtype in FLOAT_DTYPES


def trainable_params(graph: Graph) -> dict[str, Param]:
    """Trainable parameters by tensor name (distinct; shared weights once), in first-use order
    (kept per imported graph, ``graph_memo``; each call gets its own dict)."""
    return dict(memo(graph, "trainable_params", lambda: _trainable_params(graph)))


def _trainable_params(graph: Graph) -> dict[str, Param]:
    found: dict[str, tuple[TensorInfo, list[str]]] = {}
    for node in graph.ops():
        entry = spec_of(node)
        frozen = () if entry is None else entry.non_trainable_inputs
        for i, t in enumerate(node.inputs):
            if t is None or t.name not in node.weight_inputs or not is_float(t) or i in frozen:
                continue
            entry = found.setdefault(t.name, (t, []))
            if node.name not in entry[1]:
                entry[1].append(node.name)
    return {k: Param(t, tuple(c)) for k, (t, c) in found.items()}


def requires_grad_tensors(graph: Graph) -> set[str]:
    """Names of tensors that require grad (see module docstring)."""
    req = set(trainable_params(graph))
    for node in graph.ops():
        if any(t is not None and t.name in req for t in node.inputs):
            req.update(t.name for t in node.outputs if is_float(t))
    return req


@dataclass(frozen=True)
class BackwardContext:
    """What a backward rule needs about one node, bytes at the run's precision."""

    node: OpNode
    family: str
    fwd_flops: float
    fwd_read: float
    fwd_written: float
    fwd_weight: float
    gout_bytes: float
    gout_numel: float
    in_bytes: tuple[float, ...]  # per input position (0 for absent)
    grad_inputs: tuple[int, ...]  # positions of requires-grad inputs
    gemm: tuple[float, float, float, float] | None
    engine: str


@dataclass(frozen=True)
class Kernel:
    """One backward kernel; ``weight_read`` = the part of ``bytes_read`` that is weights."""

    kernel: str
    flops: float
    bytes_read: float
    bytes_written: float
    engine: str
    gemm: tuple[float, float, float, float] | None = None
    weight_read: float = 0.0


BackwardRule = Callable[[BackwardContext], list[Kernel]]


def _written(ctx: BackwardContext) -> float:
    return float(sum(ctx.in_bytes[i] for i in ctx.grad_inputs))


def _gemm_backward(operands: Sequence[int]) -> BackwardRule:
    """dX/dW GEMMs for the requires-grad inputs at ``operands``, bias reductions for others."""
    return lambda ctx: _gemm_kernels(ctx, operands)


def _gemm_kernels(ctx: BackwardContext, operands: Sequence[int]) -> list[Kernel]:
    present = [i for i in operands if i < len(ctx.in_bytes) and ctx.node.inputs[i] is not None]
    kernels = []
    for i in ctx.grad_inputs:
        if i in present:
            others = [j for j in present if j != i]
            is_weight = ctx.node.inputs[i].name in ctx.node.weight_inputs
            kernels.append(Kernel(
                f"grad_{'weight' if is_weight else 'input'}{i}", ctx.fwd_flops,
                ctx.gout_bytes + sum(ctx.in_bytes[j] for j in others), ctx.in_bytes[i],
                ctx.engine, _grad_gemm(ctx, i),
                weight_read=sum(ctx.in_bytes[j] for j in others
                                if ctx.node.inputs[j].name in ctx.node.weight_inputs),
            ))
        else:
            kernels.append(Kernel(f"grad_bias{i}", ctx.gout_numel, ctx.gout_bytes,
                                  ctx.in_bytes[i], Engine.VECTOR.value))
    return kernels


def _grad_gemm(ctx: BackwardContext, i: int) -> tuple[float, float, float, float] | None:
    """GEMM dims of the gradient w.r.t. operand i, from forward (batch, M, N, K).

    Operand 0 (X[M,K]): dX = dY[M,N]·Wᵀ -> (batch, M, K, N).
    Operand 1 (W[K,N]): dW = Xᵀ·dY -> (batch_w, K, N, M·batch/batch_w) where batch_w =
    numel(W)/(K·N) (a weight shared across the batch accumulates over it).
    """
    if ctx.gemm is None or i > 1:
        return None
    b, m, n, k = ctx.gemm
    if i == 0:
        return (b, m, k, n)
    t = ctx.node.inputs[1]
    b_w = max(1.0, float(t.numel) / max(k * n, 1.0))
    return (b_w, k, n, m * b / b_w)


def _whole_layer(flops_factor: float) -> BackwardRule:
    def rule(ctx: BackwardContext) -> list[Kernel]:
        return [Kernel("grad", flops_factor * ctx.fwd_flops,
                       ctx.gout_bytes + ctx.fwd_read + ctx.fwd_written, _written(ctx),
                       ctx.engine, weight_read=ctx.fwd_weight)]
    return rule


def _elementwise(ctx: BackwardContext) -> list[Kernel]:
    return [Kernel("grad", ctx.fwd_flops, ctx.gout_bytes + ctx.fwd_read, _written(ctx),
                   ctx.engine, weight_read=ctx.fwd_weight)]


def _elementwise_gout_only(ctx: BackwardContext) -> list[Kernel]:
    return [Kernel("grad", ctx.fwd_flops, ctx.gout_bytes, _written(ctx), ctx.engine)]


def _normalization(ctx: BackwardContext) -> list[Kernel]:
    return [Kernel("grad", 2.0 * ctx.fwd_flops, ctx.gout_bytes + ctx.fwd_read, _written(ctx),
                   ctx.engine, weight_read=ctx.fwd_weight)]


def _softmax(ctx: BackwardContext) -> list[Kernel]:
    return [Kernel("grad", 4.0 * ctx.gout_numel, 2.0 * ctx.gout_bytes, _written(ctx),
                   Engine.VECTOR.value)]


def _reduction(reads_saved: bool) -> BackwardRule:
    def rule(ctx: BackwardContext) -> list[Kernel]:
        extra = ctx.in_bytes[0] + ctx.fwd_written if reads_saved else 0.0
        return [Kernel("grad", float(ctx.node.inputs[0].numel), ctx.gout_bytes + extra,
                       _written(ctx), Engine.VECTOR.value)]
    return rule


def _pooling(reads_saved: bool) -> BackwardRule:
    def rule(ctx: BackwardContext) -> list[Kernel]:
        extra = ctx.fwd_read + ctx.fwd_written if reads_saved else 0.0
        return [Kernel("grad", ctx.fwd_flops, ctx.gout_bytes + extra, _written(ctx),
                       Engine.VECTOR.value)]
    return rule


def _data_movement(ctx: BackwardContext) -> list[Kernel]:
    return [Kernel("grad", 0.0, ctx.gout_bytes, _written(ctx), Engine.DATA.value)]


def _accumulate(ctx: BackwardContext) -> list[Kernel]:
    """Scatter-add of dY into a zeroed dX (also: the straight-through clip mask)."""
    return [Kernel("grad", ctx.gout_numel, ctx.gout_bytes, _written(ctx), Engine.VECTOR.value)]


#: backward kind (``graph_import.costs.registry.BACKWARD_KINDS``, named by each op's registry
#: entry) -> its derivative rule.
BACKWARD_RULES: dict[str, BackwardRule] = {
    "gemm": _gemm_backward((0, 1)),
    "gemm_every_input": _gemm_backward(range(64)),
    "whole_layer": _whole_layer(2.0),
    "elementwise": _elementwise,
    "elementwise_gout_only": _elementwise_gout_only,
    "normalization": _normalization,
    "softmax": _softmax,
    "reduction": _reduction(reads_saved=False),
    "reduction_saved": _reduction(reads_saved=True),
    "pooling": _pooling(reads_saved=False),
    "pooling_saved": _pooling(reads_saved=True),
    "data_movement": _data_movement,
    "data_movement_accumulates": _accumulate,
    "straight_through": _accumulate,
    "generic": _elementwise,
}


def node_backward_kernels(node: OpNode, precision: str,
                          grad_inputs: tuple[int, ...]) -> list[Kernel]:
    """The backward kernels of one costed forward ``node`` whose inputs at ``grad_inputs``
    require grad, by its registered rule (``BACKWARD_RULES[backward_kind(node)]``), bytes at
    ``precision``; [] when none of its outputs is floating point. ``backward_rows`` applies it
    to every node of a graph; sources that build their own nodes (``predictor.parallel``'s
    LLM source) apply it to theirs."""
    outs = [t for t in node.outputs if is_float(t)]
    if not grad_inputs or not outs:  # no gradient can flow through non-float outputs
        return []
    cost = rescale_cost(node, precision)
    dims = gemm_dims(node)
    ctx = BackwardContext(
        node=node, family=op_family(node), fwd_flops=cost.flops, fwd_read=cost.bytes_read,
        fwd_written=cost.bytes_written, fwd_weight=cost.weight_bytes,
        gout_bytes=sum(rescale_bytes(t.nbytes, t.dtype, precision) for t in outs),
        gout_numel=float(sum(t.numel for t in outs)),
        in_bytes=tuple(0.0 if t is None else rescale_bytes(t.nbytes, t.dtype, precision)
                       for t in node.inputs),
        grad_inputs=grad_inputs,
        gemm=None if dims is None else tuple(float(d) for d in dims),
        engine=cost.engine.value,
    )
    return BACKWARD_RULES[backward_kind(node)](ctx)


def backward_row_values(node: OpNode, kernel: Kernel, dtype: str) -> dict[str, object]:
    """The workload row (``COLUMNS``) of backward ``kernel`` of ``node`` computed at ``dtype``."""
    gemm = kernel.gemm if kernel.gemm is not None else (np.nan,) * 4
    return {
        "node": node.name, "op_type": node.op_type, "family": op_family(node),
        "phase": "backward", "engine": kernel.engine, "dtype": dtype, "flops": kernel.flops,
        "bytes_read": kernel.bytes_read, "bytes_written": kernel.bytes_written,
        "weight_bytes": kernel.weight_read, "gemm_batch": gemm[0], "gemm_m": gemm[1],
        "gemm_n": gemm[2], "gemm_k": gemm[3], "fused_nodes": node.name,
        "inner_elems": inner_elems_or_nan(node),
        "key": f"backward:{kernel.kernel}:{node.name}", "kernel": kernel.kernel,
        "domain": node.domain, "grad_of": "",
    }


def backward_rows(graph: Graph, config: RunConfig) -> pd.DataFrame:
    """Backward kernels in reverse topological order (see module docstring)."""
    precision = config.precision
    dtype = compute_dtype(precision)
    req = requires_grad_tensors(graph)
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for node in reversed(list(graph.ops())):
        if node.cost is None or node.cost.engine == Engine.FREE:
            continue
        grad_inputs = tuple(i for i, t in enumerate(node.inputs)
                            if t is not None and t.name in req and is_float(t))
        for k in node_backward_kernels(node, precision, grad_inputs):
            values = backward_row_values(node, k, dtype)
            for c in COLUMNS:
                cols[c].append(values[c])
    return frame(cols)


def update_row_values(name: str, tensor: TensorInfo, consumers: Sequence[str],
                      config: RunConfig) -> dict[str, object]:
    """The optimizer-update row (``COLUMNS``) of parameter tensor ``tensor`` called ``name``
    under ``config``'s optimizer and precision (module docstring); ``consumers``: the forward
    nodes whose backward must finish first (``grad_of``)."""
    opt = OPTIMIZERS[config.optimizer]
    sp = state_precision(config.precision)
    n = float(tensor.numel)
    s = rescale_bytes(tensor.itemsize_bytes, tensor.dtype, sp)
    return {
        "node": name, "op_type": opt.name, "family": "elementwise", "phase": "update",
        "engine": Engine.VECTOR.value, "dtype": compute_dtype(sp),
        "flops": opt.flops_per_element * n, "bytes_read": opt.reads * n * s,
        "bytes_written": opt.writes * n * s, "weight_bytes": n * s,
        "gemm_batch": np.nan, "gemm_m": np.nan, "gemm_n": np.nan, "gemm_k": np.nan,
        "fused_nodes": name, "inner_elems": np.nan, "key": f"update:{opt.name}:{name}",
        "kernel": opt.name,
        "domain": "", "grad_of": "+".join(consumers),
    }


def update_rows(graph: Graph, config: RunConfig) -> pd.DataFrame:
    """One optimizer-update kernel per trainable parameter tensor (see module docstring)."""
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for name, param in trainable_params(graph).items():
        values = update_row_values(name, param.tensor, param.consumers, config)
        for c in COLUMNS:
            cols[c].append(values[c])
    return frame(cols)


def training_rows(graph: Graph, config: RunConfig) -> pd.DataFrame:
    """Backward rows then update rows."""
    return pd.concat([backward_rows(graph, config), update_rows(graph, config)],
                     ignore_index=True)
