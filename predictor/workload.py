"""Graph -> workload table: one row per kernel execution.

Contract: ``graph_import.workload_schema`` plus ``workload_rows.EXTRA_COLUMNS``.
``workload_table(graph, config, profile)``: (1) forward rows, one per costed non-free OpNode in
topological order, bytes rescaled to ``config.precision`` (FLOPs unchanged; a ``config.dims``
that contradicts the bound dims is an error); (2) the runtime's kernel plan
(``runtimes.build_plan``: its patterns, plus its fusions when ``config.fusion`` — None: the
profile's default) applied by ``fusion.apply_plan``; a precision the runtime does not run is a
``PredictionError``; (3) in ``train`` mode, backward and update rows (``predictor.training``).
An op's family is its op-registry entry's (``other`` without one).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.graph_import.costs.gemm_dims import gemm_dims
from roofcast.graph_import.costs.inner_dims import inner_elems_or_nan
from roofcast.graph_import.costs.registry import op_family
from roofcast.graph_import.types import Engine, Graph
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.fusion import apply_plan
from roofcast.predictor.precision import compute_dtype, rescale_cost
from roofcast.predictor.runtimes import ExecutionProfile, get_runtime, runtime_names
from roofcast.predictor.runtimes.patterns import KernelPlan
from roofcast.predictor.runtimes.rules import build_plan
from roofcast.predictor.workload_rows import COLUMNS, GEMM_COLUMNS, frame


def check_complete(graph: Graph) -> None:
    """PredictionError when some nodes have no cost (unsupported ops or unresolved shapes).

    A prediction that silently drops work would look faster than the model is; the user either
    binds the missing dims or accepts an incomplete prediction (``allow_incomplete=True``).
    """
    problems = []
    if graph.unresolved:
        names = sorted(graph.unresolved)
        problems.append(
            f"{len(names)} node(s) without concrete shapes (e.g. {names[0]!r}: "
            f"{graph.unresolved[names[0]]})"
        )
    if graph.unsupported:
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(graph.unsupported.items()))
        problems.append(f"op types without a cost rule: {ops}")
    if graph.unbound_dims:
        problems.append(f"unbound symbolic dims {', '.join(graph.unbound_dims)}")
    if problems:
        raise PredictionError(
            f"model {graph.name!r} cannot be fully costed: " + "; ".join(problems)
            + ". Bind dims with --dim NAME=VALUE (or --batch N), or accept an incomplete "
            "prediction (--allow-incomplete) that leaves that work out"
        )


def check_dims(graph: Graph, config: RunConfig) -> None:
    """PredictionError when ``config.dims`` contradicts the dims the graph was imported with."""
    for name, size in config.dims.items():
        bound = graph.dims.get(name)
        if bound is not None and int(bound) != int(size):
            raise PredictionError(
                f"config dim {name}={size} but graph {graph.name!r} was imported with "
                f"{name}={bound}; re-import the model with the dims of the run"
            )


def forward_rows(graph: Graph, config: RunConfig, allow_incomplete: bool = False) -> pd.DataFrame:
    """One row per non-free costed node, in topological order, at ``config.precision``."""
    if not allow_incomplete:
        check_complete(graph)
    check_dims(graph, config)
    dtype = compute_dtype(config.precision)
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for node in graph.ops():
        if node.cost is None or node.cost.engine == Engine.FREE:
            continue
        cost = rescale_cost(node, config.precision)
        dims = gemm_dims(node)
        gemm = (np.nan,) * 4 if dims is None else tuple(float(d) for d in dims)
        values = {
            "node": node.name, "op_type": node.op_type, "family": op_family(node),
            "phase": "forward", "engine": str(cost.engine.value), "dtype": dtype,
            "flops": float(cost.flops), "bytes_read": float(cost.bytes_read),
            "bytes_written": float(cost.bytes_written), "weight_bytes": float(cost.weight_bytes),
            **dict(zip(GEMM_COLUMNS, gemm, strict=True)),
            "fused_nodes": node.name, "inner_elems": inner_elems_or_nan(node),
            "key": f"forward:forward:{node.name}",
            "kernel": "forward", "domain": node.domain, "grad_of": "",
        }
        for c in COLUMNS:
            cols[c].append(values[c])
    return frame(cols)


def check_precision(profile: ExecutionProfile, precision: str) -> None:
    """PredictionError when ``profile`` does not run ``precision``, naming the runtimes that do."""
    if precision in profile.precisions:
        return
    others = [n for n in runtime_names() if precision in get_runtime(n).precisions]
    raise PredictionError(
        f"runtime {profile.name!r} does not run {precision} (it runs "
        f"{', '.join(profile.precisions)}); runtimes that run {precision}: "
        f"{', '.join(others) or 'none'}")


def kernel_plan(graph: Graph, config: RunConfig, profile: ExecutionProfile | str) -> KernelPlan:
    """The kernel plan of ``graph`` under ``profile`` for ``config`` (precision checked)."""
    prof = get_runtime(profile)
    check_precision(prof, config.precision)
    return build_plan(graph, prof, config.fusion)


def workload_table(graph: Graph, config: RunConfig, profile: ExecutionProfile | str,
                   allow_incomplete: bool = False, plan: KernelPlan | None = None,
                   forward: pd.DataFrame | None = None) -> pd.DataFrame:
    """The workload of one run of ``graph`` under ``config`` as ``profile`` runs it (forward
    rows mapped to the runtime's kernels [+ training]). ``plan``: the ``kernel_plan`` when the
    caller already built it; ``forward``: the mapped forward rows (``forward_kernels``) when
    the caller already built them (they do not depend on the mode: a sweep builds them once
    for ``infer`` and ``train``)."""
    if forward is None:
        forward = forward_kernels(graph, config, profile, allow_incomplete, plan)
    if config.mode == "train":
        from roofcast.predictor.training import training_rows

        return pd.concat([forward, training_rows(graph, config)], ignore_index=True)
    return forward


def forward_kernels(graph: Graph, config: RunConfig, profile: ExecutionProfile | str,
                    allow_incomplete: bool = False, plan: KernelPlan | None = None
                    ) -> pd.DataFrame:
    """The forward rows of ``graph`` at ``config.precision`` mapped to the kernels ``profile``
    launches (``plan``: its ``kernel_plan``, built when None); the same for every mode."""
    rows = forward_rows(graph, config, allow_incomplete=allow_incomplete)
    plan = kernel_plan(graph, config, profile) if plan is None else plan
    return apply_plan(graph, rows, plan, config.precision)
