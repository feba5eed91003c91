"""Graph -> workload table: one row per kernel execution (contract: ``predictor.workload_schema``).

``workload_table(graph, config)`` builds:

1. **forward rows**, one per costed OpNode in topological order. Ops on the ``free`` engine
   (shape/view ops in ``graph_import.costs.FREE_OPS``) do zero work and launch no kernel, so
   they get no row. Dims were bound at import (``import_model(..., dims=...)``); a
   ``config.dims`` entry that contradicts the graph's bound dims is an error, never ignored.
   Bytes are rescaled to ``config.precision`` by ``predictor.precision.rescale_cost`` (float
   tensors at the precision's width, integer tensors kept); FLOPs never change with precision.
2. with ``config.fusion``: forward rows merged into fused groups (``predictor.fusion``);
3. with ``config.mode == "train"``: backward and optimizer-update rows
   (``predictor.training``).

Family of an op (``op_family``): data, not dispatch. ``FAMILY_BY_OP`` names an op type's family
explicitly where the cost module that registered its rule is not the right family;
otherwise the family is the name of that cost module (``graph_import/costs/<family>.py``: the
registry is organised by family, see DESIGN.md) via ``FAMILY_BY_COST_MODULE``. An op whose rule
lives outside those modules is family ``other`` (listed in ``Prediction.notes``).

Extra columns beyond the contract (used by fusion, training and graph timing):
``key`` unique row id ``"<phase>:<kernel>:<node>"``; ``kernel`` (``forward``, ``grad_input``,
``grad_weight``, ``grad``, ``sgd_momentum``, ``adam``); ``domain``; ``grad_of``
('+'-joined graph nodes whose backward must finish before an update row may run; '' otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from roofcast.graph_import.costs.registry import lookup
from roofcast.graph_import.types import Engine, Graph, OpNode
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.gemm_dims import gemm_dims
from roofcast.predictor.inner_dims import inner_elems_or_nan
from roofcast.predictor.precision import compute_dtype, rescale_cost
from roofcast.predictor.workload_schema import FAMILIES, WORKLOAD_COLUMN_NAMES

#: cost-rule module (last dotted component) -> family.
FAMILY_BY_COST_MODULE: dict[str, str] = {
    "matmul": "matmul",
    "conv": "conv",
    "elementwise": "elementwise",
    "normalization": "normalization",
    "softmax": "softmax",
    "reduction": "reduction",
    "pooling": "pooling",
    "data_movement": "data_movement",
    "recurrent": "recurrent",
    "attention": "attention",
    "quantization": "quantization",
}

#: op_type -> family where the registering module is not the right family.
FAMILY_BY_OP: dict[str, str] = {
    # com.microsoft RotaryEmbedding is costed beside the attention ops but is an elementwise
    # rotation (a few FLOPs per element, no matmul): its backward is elementwise, not 2x.
    "RotaryEmbedding": "elementwise",
}

#: Columns this module adds beyond the contract, in order.
EXTRA_COLUMNS: tuple[str, ...] = ("key", "kernel", "domain", "grad_of")
COLUMNS: tuple[str, ...] = WORKLOAD_COLUMN_NAMES + EXTRA_COLUMNS
_GEMM_COLS = ("gemm_batch", "gemm_m", "gemm_n", "gemm_k")


def op_family(node: OpNode) -> str:
    """The family of ``node``'s op type (see module docstring)."""
    family = FAMILY_BY_OP.get(node.op_type)
    if family is not None:
        return family
    rule = lookup(node.op_type, node.domain)
    if rule is None:
        return "other"
    module = rule.__module__.rsplit(".", 1)[-1]
    family = FAMILY_BY_COST_MODULE.get(module, "other")
    assert family in FAMILIES
    return family


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
            **dict(zip(_GEMM_COLS, gemm, strict=True)),
            "fused_nodes": node.name, "inner_elems": inner_elems_or_nan(node),
            "key": f"forward:forward:{node.name}",
            "kernel": "forward", "domain": node.domain, "grad_of": "",
        }
        for c in COLUMNS:
            cols[c].append(values[c])
    return frame(cols)


def frame(cols: Mapping[str, list]) -> pd.DataFrame:
    """A workload DataFrame with ``COLUMNS`` in order and float numeric columns."""
    df = pd.DataFrame({c: cols[c] for c in COLUMNS})
    for c in ("flops", "bytes_read", "bytes_written", "weight_bytes", *_GEMM_COLS, "inner_elems"):
        df[c] = df[c].astype(float)
    return df


def workload_table(graph: Graph, config: RunConfig, allow_incomplete: bool = False) -> pd.DataFrame:
    """The workload of one run of ``graph`` under ``config`` (forward [+ fused] [+ training])."""
    from roofcast.predictor.fusion import fuse_rows
    from roofcast.predictor.training import training_rows

    rows = forward_rows(graph, config, allow_incomplete=allow_incomplete)
    if config.fusion:
        rows = fuse_rows(graph, rows, config)
    if config.mode == "train":
        rows = pd.concat([rows, training_rows(graph, config)], ignore_index=True)
    return rows
