"""aiconfigurator's GEMM, attention and MoE rows (``training_data.public.aiconfigurator``) as a
training set, costed by the project's rules and featurized on each row's catalog device.

GEMM: a ``Gemm`` node [m, k] x [k, n] (family matmul): FLOPs ``2·m·n·k``, bytes A and B at the
math dtype, C in bf16. Attention: the fused ``Attention`` node the LLM road builds
(``predictor.llm.layer``): ``isl`` queries per sequence ending at ``isl + step`` keys, FLOPs of
the ``graph_import`` rule scaled by the mean attended keys over the span (``attended_keys``:
causal, sliding window), Q at the attention dtype, K/V at the KV-cache dtype, O in bf16. Bytes
per element from ``roofcast.dtypes`` (block scales included). MoE: the LLM road's module row
(``predictor.llm.layer.expert_module_terms``) of the busiest of ``moe_ep`` groups
(``busiest_share``), ``inter / moe_tp`` per expert, bf16 activations. Every row was timed with CUDA
graphs: its runtime's per-kernel floor is the device's launch overhead (``dispatch_floor_s``),
and it learns with the GPU road of ``learned_from`` (``training``: one model per family).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofcast.dtypes import DTYPES
from roofcast.graph_import.costs import cost_of
from roofcast.graph_import.costs.gemm_dims import gemm_dims
from roofcast.graph_import.types import OpNode, TensorInfo
from roofcast.graph_import.workload_schema import WORKLOAD_COLUMN_NAMES
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.kernels import busiest_share
from roofcast.predictor.llm.layer import MOE_FAMILY, MOE_OP, attended_keys, expert_module_terms
from roofcast.predictor.llm.precision import weight_bytes_per_element

SOURCE = "aiconfigurator"
OUTPUT_DTYPE = "bf16"  # GEMM and attention outputs of these engines
#: the runtime whose road graph-captured rows train (``roads``: their floor is their own).
LEARNED_FROM = "pytorch-eager"
_F = "float"  # tensors are built as 4-byte floats; bytes come from the dtype table
_GEMM_KEY = ("m", "n", "k", "math_dtype")
#: raw attention shape columns ``featurized`` keeps beside the features.
SHAPE_COLUMNS = ("batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim",
                 "window_size", "kv_dtype", "num_tokens", "topk", "num_experts")
_ATTN_KEY = ("table", "batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim",
             "math_dtype", "kv_dtype", "step", "window_size")
_MOE_KEY = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
            "moe_ep_size", "gated", "math_dtype")


def _bytes(t: TensorInfo, dtype: str) -> float:
    return float(np.prod(t.shape)) * DTYPES[dtype].bytes_per_element


def _row(node: OpNode, family: str, dtype: str, read: float, written: float,
         weight: float) -> dict:
    cost = cost_of(node)
    if cost is None:
        raise PredictionError(f"no cost rule for {node.op_type}; the cost registry is incomplete")
    dims = gemm_dims(node) or (np.nan,) * 4
    return {"op_type": node.op_type, "family": family, "engine": cost.engine.value,
            "dtype": dtype, "flops": float(cost.flops), "bytes_read": read,
            "bytes_written": written, "weight_bytes": weight,
            **dict(zip(("gemm_batch", "gemm_m", "gemm_n", "gemm_k"), dims, strict=True)),
            "inner_elems": np.nan}


def gemm_row(m: int, n: int, k: int, dtype: str) -> dict:
    """Workload values of a GEMM [m, k] x [k, n] at ``dtype`` (module docstring)."""
    a, b = TensorInfo("x", (m, k), _F), TensorInfo("w", (k, n), _F)
    y = TensorInfo("y", (m, n), _F)
    node = OpNode("gemm", "Gemm", "", (a, b), (y,), {})
    w = _bytes(b, dtype)
    return _row(node, "matmul", dtype, _bytes(a, dtype) + w, _bytes(y, OUTPUT_DTYPE), w)


def attention_row(batch: int, queries: int, context: int, heads: int, kv_heads: int,
                  head_dim: int, window: int, dtype: str, kv_dtype: str) -> dict:
    """Workload values of one fused attention kernel (module docstring)."""
    span, mean = attended_keys(context, queries, window)
    q = TensorInfo("q", (batch, heads, queries, head_dim), _F)
    k = TensorInfo("k", (batch, kv_heads, span, head_dim), _F)
    o = TensorInfo("o", q.shape, _F)
    node = OpNode("attn", "Attention", "", (q, k, TensorInfo("v", k.shape, _F)), (o,), {})
    row = _row(node, "attention", dtype, _bytes(q, dtype) + 2 * _bytes(k, kv_dtype),
               _bytes(o, OUTPUT_DTYPE), 0.0)
    row["flops"] *= mean / span
    return row


def moe_row(tokens: int, hidden: int, inter: int, topk: int, experts: int, tp: int, ep: int,
            gated: bool, dtype: str) -> dict:
    """Workload values of one MoE module on one of ``tp x ep`` devices (module docstring)."""
    touched, pairs = busiest_share(experts, topk, tokens, ep)
    d_ff = max(inter // tp, 1)
    act = DTYPES[OUTPUT_DTYPE].bytes_per_element
    terms = expert_module_terms(pairs, touched, hidden, d_ff, (2 if gated else 1) * d_ff,
                                weight_bytes_per_element(dtype, hidden), act, act)
    return {"op_type": MOE_OP, "family": MOE_FAMILY, "engine": "matrix", "dtype": dtype,
            **terms, "inner_elems": np.nan}


def _gemm(r) -> dict:
    return gemm_row(int(r.m), int(r.n), int(r.k), r.math_dtype)


def _attention(r) -> dict:
    queries = int(r.isl)
    return attention_row(int(r.batch_size), queries, queries + int(r.step), int(r.num_heads),
                         int(r.num_key_value_heads), int(r.head_dim), int(r.window_size),
                         r.math_dtype, r.kv_dtype)


def _moe(r) -> dict:
    return moe_row(int(r.num_tokens), int(r.hidden_size), int(r.inter_size), int(r.topk),
                   int(r.num_experts), int(r.moe_tp_size), int(r.moe_ep_size), bool(r.gated),
                   r.math_dtype)


#: table -> (its shape key: rows costed once per distinct key, builder of one row's values).
BUILDERS = {"gemm": (_GEMM_KEY, _gemm), "context_attention": (_ATTN_KEY, _attention),
            "generation_attention": (_ATTN_KEY, _attention), "moe": (_MOE_KEY, _moe)}


def workload(rows: pd.DataFrame) -> pd.DataFrame:
    """Workload rows (``graph_import.workload_schema``) of the table's rows, same index; each
    distinct shape is costed once."""
    parts = []
    for table, part in rows.groupby("table", sort=True):
        cols, build = BUILDERS[str(table)]
        keys = part.groupby(list(cols), sort=False, dropna=False).ngroup().to_numpy()
        _, first = np.unique(keys, return_index=True)
        costs = pd.DataFrame([build(r) for r in part.iloc[first].itertuples(index=False)])
        parts.append(costs.iloc[keys].set_index(part.index))
    out = pd.concat(parts).loc[rows.index]
    out["node"] = SOURCE + ":" + rows["table"] + ":" + rows.index.astype(str)
    out["fused_nodes"] = out["node"]
    out["phase"] = "forward"
    return out[list(WORKLOAD_COLUMN_NAMES)]


def featurized(rows: pd.DataFrame) -> pd.DataFrame:
    """``featurize`` of the rows on their devices, with the runtime columns of graph-captured
    kernels (module docstring) and ``table`` kept; same order as ``rows``."""
    from roofcast.hw_catalog.catalog import get_device
    from roofcast.predictor.features import featurize

    work = workload(rows)
    parts = []
    for dev, idx in rows.groupby("device").groups.items():
        hw = get_device(str(dev))
        f = featurize(work.loc[idx], hw, RunConfig())
        f["dispatch_floor_s"] = float(hw.launch_overhead_s)
        parts.append(f)
    X = pd.concat(parts).loc[rows.index]
    X["runtime"] = rows["runtime"].to_numpy()
    X["learned_from"] = LEARNED_FROM
    X["table"] = rows["table"].to_numpy()
    for col in SHAPE_COLUMNS:  # attention shapes, for experiments (not model inputs)
        if col in rows.columns:
            X[col] = rows[col].to_numpy()
    return X
