"""Public GPU kernel timings (``../shared/data/gpu_kernels/*.csv.gz``, or their packaged copy
``training_data/public/kernels.parquet``) as tidy tables.

Sources (third-party, see the data README; keep source and licence with anything derived):
NeuSight (MIT, sitar-lab/NeuSight) fp32 ``bmm``/``linear``/``conv2d`` and vector ops on P4, P100,
T4, V100, A100; DeepBench (Apache-2.0, baidu-research/DeepBench) GEMM and conv (fwd, bwd-data,
bwd-filter) in fp32/fp16/int8 on many devices.

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.public_kernels).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from roofcast.graph_import.costs import cost_of
from roofcast.graph_import.costs.gemm_dims import gemm_dims
from roofcast.graph_import.costs.inner_dims import inner_elems_or_nan
from roofcast.graph_import.types import OpNode, TensorInfo
from roofcast.graph_import.workload_schema import WORKLOAD_COLUMN_NAMES
from roofcast.training_data.packed_kernels import (
    PACKED_DIR,
    TABLE_FILE,
    PackedDataError,
    read_packed,
)

ENV_VAR = "ROOFCAST_SHARED_DATA"
KERNEL_FILES = ("neusight_gemm_kernels.csv.gz", "neusight_conv_kernels.csv.gz",
                "neusight_vec_kernels.csv.gz", "deepbench_kernels.csv.gz")
SKIPPED_WORKLOADS = ("gru", "lstm", "rnn_vanilla", "allreduce", "sparse_gemm")
UNIT_TO_S = {"ms": 1e-3, "us": 1e-6, "s": 1.0}

# publisher's vector-op name -> (ONNX op, family, second operand: "tensor" | "scalar" | None)
VEC_OPS: dict[str, tuple[str, str, str | None]] = {
    "add": ("Add", "elementwise", "tensor"), "addu": ("Add", "elementwise", "scalar"),
    "mul": ("Mul", "elementwise", "tensor"), "mulu": ("Mul", "elementwise", "scalar"),
    "div": ("Div", "elementwise", "tensor"), "divu": ("Div", "elementwise", "scalar"),
    "pow": ("Pow", "elementwise", "tensor"), "powu": ("Pow", "elementwise", "scalar"),
    "relu": ("Relu", "elementwise", None), "gelu": ("Gelu", "elementwise", None),
    "tanh": ("Tanh", "elementwise", None), "softmax": ("Softmax", "softmax", None),
    "ln": ("LayerNormalization", "normalization", None),
}
# publisher's precision text -> (compute precision, bytes per stored input element)
PRECISIONS_RAW: dict[str, tuple[str, int]] = {
    "fp32": ("fp32", 4),
    "fp32 (cudnn.allow_tf32 default=True -> TF32 possible on A100)": ("fp32", 4),
    "fp16 in/fp16 mul/fp32 acc (tensor cores where available)": ("fp16", 2),
    "fp16 storage, fp32 math": ("fp32", 2),
    "int8 (int32 accum)": ("int8", 1),
    "int8 in, 32-bit math": ("int8", 1),
}
_ONNX_DTYPE = {4: "float", 2: "float16", 1: "int8"}
_DIRECTION = {"time": "fwd", "latency": "fwd", "time_fwd": "fwd", "time_bwd_data": "bwd_data",
              "time_bwd_filter": "bwd_filter"}


class PublicDataError(ValueError):
    """The public data folder or a file in it is missing or malformed."""


@dataclass(frozen=True)
class KernelTable:
    """Tidy kernel rows plus what was left out (see module docstring)."""

    kernels: pd.DataFrame
    skipped: dict[str, int] = field(default_factory=dict)
    unmapped: dict[str, int] = field(default_factory=dict)
    origin: str = ""
    """Where the rows were read: the full files' folder or the packaged table's path."""


def shared_data_dir(path: str | Path | None = None) -> Path:
    """The public data folder: ``path``, else ``$ROOFCAST_SHARED_DATA``, else ``../shared/data``
    beside the repository checkout."""
    if path is not None:
        return Path(path)
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def full_files_dir(data_dir: str | Path | None = None) -> Path | None:
    """The folder ``load_kernels`` reads the full public files from, or None for the packaged
    copy (``training_data.packed_kernels``): ``data_dir`` or ``$ROOFCAST_SHARED_DATA`` when
    given (they must hold the files), else ``../shared/data`` beside the checkout when it holds
    ``gpu_kernels/``, else None. Both give the same rows (the copy is a test-checked snapshot)."""
    if data_dir is not None or os.environ.get(ENV_VAR):
        return shared_data_dir(data_dir)
    beside = shared_data_dir()
    return beside if (beside / "gpu_kernels").is_dir() else None


def _read(folder: Path, name: str) -> pd.DataFrame:
    p = folder / "gpu_kernels" / name
    if not p.exists():
        p = folder / name
    if not p.exists():
        raise PublicDataError(
            f"public kernel file {name} not found under {folder}; set {ENV_VAR} to the folder "
            "that holds gpu_kernels/")
    return pd.read_csv(p, low_memory=False)


def _resolve_devices(names: pd.Series) -> tuple[pd.Series, dict[str, int]]:
    from roofcast.hw_catalog.catalog import resolve_name
    from roofcast.hw_catalog.errors import HardwareSpecError

    ids: dict[str, str | None] = {}
    for name in names.unique():
        try:
            ids[name] = resolve_name(str(name))
        except HardwareSpecError:
            ids[name] = None
    dev = names.map(ids)
    counts = names[dev.isna()].value_counts()
    return dev, {str(k): int(v) for k, v in counts.items()}


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    return (
        pd.to_numeric(df[col], errors="coerce")
        if col in df.columns
        else pd.Series(np.nan, index=df.index)
    )


def _tidy(df: pd.DataFrame, dataset: str) -> pd.DataFrame:
    out = pd.DataFrame(index=df.index)
    out["dataset"] = dataset
    out["source"] = df["source"].astype(str)
    notes = df["notes"].astype(object).fillna("").astype(str)
    out["split"] = np.select([notes.str.startswith("train_set"), notes.str.startswith("test_set")],
                             ["train", "test"], "")
    out["kernel_name"] = notes.str.extract(r"kernel=([^;\s]+)", expand=False).fillna("")
    out["workload"] = df["workload"].astype(str)
    out["hardware"] = df["hardware"].astype(str)
    out["precision_raw"] = df["precision"].astype(str)
    unknown = sorted(set(out["precision_raw"]) - set(PRECISIONS_RAW))
    if unknown:
        raise PublicDataError(
            f"{dataset}: unknown precision texts {unknown}; add them to PRECISIONS_RAW"
        )
    out["precision"] = out["precision_raw"].map(lambda s: PRECISIONS_RAW[s][0])
    out["storage_bytes"] = out["precision_raw"].map(lambda s: PRECISIONS_RAW[s][1])
    metric = df["metric"].astype(str)
    out["direction"] = metric.map(_DIRECTION)
    scale = df["unit"].map(UNIT_TO_S)
    out["latency_s"] = pd.to_numeric(df["value"], errors="coerce") * scale
    for col in ("B", "M", "N", "K"):
        out[col] = _num(df, col)
    out["trans_a"] = df["transA"].astype(str).eq("T") if "transA" in df.columns else False
    out["trans_b"] = df["transB"].astype(str).eq("T") if "transB" in df.columns else False
    for src, dst in (("conv_N", "conv_n"), ("conv_C", "conv_c"), ("conv_H", "conv_h"),
                     ("conv_W", "conv_w"), ("conv_K", "conv_k"), ("conv_R", "conv_r"),
                     ("conv_S", "conv_s")):
        out[dst] = _num(df, src)
    out["stride_h"] = _num(df, "stride_h").fillna(_num(df, "stride"))
    out["stride_w"] = _num(df, "stride_w").fillna(_num(df, "stride"))
    out["pad_h"] = _num(df, "pad_h").fillna(_num(df, "pad"))
    out["pad_w"] = _num(df, "pad_w").fillna(_num(df, "pad"))
    out["vec_b"] = _num(df, "B") if dataset == "neusight-vec" else np.nan
    out["vec_h"] = _num(df, "H")
    return out


def load_kernels(data_dir: str | Path | None = None) -> KernelTable:
    """All modelled public kernel rows with catalog device ids (see module docstring), from the
    full files or the packaged copy (``full_files_dir``)."""
    folder = full_files_dir(data_dir)
    if folder is None:
        return packed_table()
    parts = []
    skipped: dict[str, int] = {}
    for name, dataset in zip(KERNEL_FILES, ("neusight-gemm", "neusight-conv", "neusight-vec",
                                            "deepbench"), strict=True):
        raw = _read(folder, name)
        skip = raw["workload"].isin(SKIPPED_WORKLOADS) | ~raw["metric"].isin(list(_DIRECTION))
        for wl, cnt in raw.loc[skip, "workload"].value_counts().items():
            skipped[str(wl)] = skipped.get(str(wl), 0) + int(cnt)
        parts.append(_tidy(raw.loc[~skip], dataset))
    kernels = pd.concat(parts, ignore_index=True)
    fam = {"bmm": "matmul", "linear": "matmul", "gemm": "matmul", "conv2d": "conv",
           **{k: v[1] for k, v in VEC_OPS.items()}}
    unknown = sorted(set(kernels["workload"]) - set(fam))
    if unknown:
        raise PublicDataError(f"unknown workload names {unknown}; add them to VEC_OPS or skip them")
    kernels["family"] = kernels["workload"].map(fam)
    kernels["device"], unmapped = _resolve_devices(kernels["hardware"])
    bad_latency = ~(kernels["latency_s"] > 0)
    if bad_latency.any():
        skipped["non-positive or missing latency"] = int(bad_latency.sum())
    kernels = kernels.loc[kernels["device"].notna() & ~bad_latency].reset_index(drop=True)
    kernels["op_type"] = _op_types(kernels)
    return KernelTable(kernels, skipped, unmapped, str(folder))


def packed_table() -> KernelTable:
    """The packaged copy of ``load_kernels``'s table (``training_data.packed_kernels``)."""
    try:
        kernels, meta = read_packed()
    except PackedDataError as exc:
        raise PublicDataError(str(exc)) from exc
    return KernelTable(kernels, meta["skipped"], meta["unmapped"], str(PACKED_DIR / TABLE_FILE))


def load_unmodelled(data_dir: str | Path | None = None) -> pd.DataFrame:
    """The rows ``load_kernels`` leaves out as ``skipped`` (RNN/LSTM/GRU, all-reduce, sparse GEMM,
    other metrics), tidied the same way (``direction`` is NaN for metrics outside ``_DIRECTION``)
    plus the publisher's ``metric, mode, num_devices, batch, shape_or_config, rnn_hidden,
    rnn_timesteps`` and ``device`` (catalog id, NaN when the name does not resolve)."""
    folder = shared_data_dir(data_dir)
    parts = []
    for name, dataset in zip(KERNEL_FILES, ("neusight-gemm", "neusight-conv", "neusight-vec",
                                            "deepbench"), strict=True):
        raw = _read(folder, name)
        raw = raw.loc[
            raw["workload"].isin(SKIPPED_WORKLOADS) | ~raw["metric"].isin(list(_DIRECTION))
        ]
        if raw.empty:
            continue
        part = _tidy(raw, dataset)
        for col in ("metric", "mode", "shape_or_config"):
            part[col] = raw[col].astype(str) if col in raw.columns else ""
        for col in ("num_devices", "batch", "rnn_hidden", "rnn_timesteps"):
            part[col] = _num(raw, col)
        parts.append(part)
    if not parts:
        return pd.DataFrame(columns=["dataset", "workload", "hardware", "device", "latency_s"])
    rows = pd.concat(parts, ignore_index=True)
    rows["device"], _ = _resolve_devices(rows["hardware"])
    return rows


def _op_types(k: pd.DataFrame) -> pd.Series:
    op = k["workload"].map({"bmm": "MatMul", "linear": "Gemm", "gemm": "Gemm", "conv2d": "Conv",
                            **{n: v[0] for n, v in VEC_OPS.items()}})
    int8 = k["precision"].eq("int8")
    op = op.mask(int8 & k["workload"].eq("gemm"), "MatMulInteger")
    op = op.mask(int8 & k["workload"].eq("conv2d"), "ConvInteger")
    return op


# ----------------------------------------------------------------- workload rows via cost rules
def _t(name: str, shape: tuple[int, ...], dtype: str) -> TensorInfo:
    return TensorInfo(name, tuple(int(d) for d in shape), dtype)


def _node(op_type: str, inputs: list[TensorInfo], output: TensorInfo, attrs: dict | None = None,
          weights: tuple[str, ...] = ()) -> OpNode:
    return OpNode(name=op_type.lower(), op_type=op_type, domain="", inputs=tuple(inputs),
                  outputs=(output,), attrs=attrs or {}, weight_inputs=frozenset(weights))


def _gemm_node(r: Any) -> OpNode:
    dt = _ONNX_DTYPE[int(r.storage_bytes)]
    m, n, k = int(r.M), int(r.N), int(r.K)
    if r.workload == "bmm":
        b = int(r.B)
        return _node(
            "MatMul", [_t("a", (b, m, k), dt), _t("b", (b, k, n), dt)], _t("y", (b, m, n), dt)
        )
    if r.workload == "linear":
        return _node("Gemm", [_t("x", (m, k), dt), _t("w", (n, k), dt), _t("bias", (n,), dt)],
                     _t("y", (m, n), dt), {"transB": 1}, weights=("w", "bias"))
    a_shape = (k, m) if r.trans_a else (m, k)
    b_shape = (n, k) if r.trans_b else (k, n)
    if r.op_type == "MatMulInteger":
        return _node("MatMulInteger", [_t("a", (m, k), "int8"), _t("b", (k, n), "int8")],
                     _t("y", (m, n), "int32"))
    return _node("Gemm", [_t("a", a_shape, dt), _t("b", b_shape, dt)], _t("y", (m, n), dt),
                 {"transA": int(r.trans_a), "transB": int(r.trans_b)})


def _conv_node(r: Any) -> OpNode:
    dt = _ONNX_DTYPE[int(r.storage_bytes)]
    n, c, h, w = int(r.conv_n), int(r.conv_c), int(r.conv_h), int(r.conv_w)
    k, kr, ks = int(r.conv_k), int(r.conv_r), int(r.conv_s)
    sh, sw, ph, pw = int(r.stride_h), int(r.stride_w), int(r.pad_h), int(r.pad_w)
    ho, wo = (h + 2 * ph - kr) // sh + 1, (w + 2 * pw - ks) // sw + 1
    out_dt = "int32" if r.op_type == "ConvInteger" else dt
    return _node(r.op_type, [_t("x", (n, c, h, w), dt), _t("w", (k, c, kr, ks), dt)],
                 _t("y", (n, k, ho, wo), out_dt),
                 {"strides": [sh, sw], "pads": [ph, pw, ph, pw], "kernel_shape": [kr, ks]},
                 weights=("w",))


def _vec_node(r: Any) -> OpNode:
    op, _, second = VEC_OPS[r.workload]
    shape = (int(r.vec_b), int(r.vec_h))
    x = _t("x", shape, "float")
    y = _t("y", shape, "float")
    if op == "LayerNormalization":
        h = (shape[1],)
        return _node(op, [x, _t("scale", h, "float"), _t("bias", h, "float")], y, {"axis": -1},
                     weights=("scale", "bias"))
    if op == "Softmax":
        return _node(op, [x], y, {"axis": -1})
    if second == "tensor":
        return _node(op, [x, _t("x2", shape, "float")], y)
    if second == "scalar":
        return _node(op, [x, _t("s", (), "float")], y, weights=("s",))
    return _node(op, [x], y)


def _bwd(fwd: dict[str, float], r: Any, direction: str) -> dict[str, float]:
    """Conv backward rows from the forward conv's tensors (module docstring)."""
    e = float(r.storage_bytes)
    n, c, h, w = r.conv_n, r.conv_c, r.conv_h, r.conv_w
    k, kr, ks = r.conv_k, r.conv_r, r.conv_s
    ho = (h + 2 * r.pad_h - kr) // r.stride_h + 1
    wo = (w + 2 * r.pad_w - ks) // r.stride_w + 1
    x_b, w_b, y_b = n * c * h * w * e, k * c * kr * ks * e, n * k * ho * wo * e
    row = dict(fwd)
    if direction == "bwd_data":
        row.update(bytes_read=y_b + w_b, bytes_written=x_b, weight_bytes=w_b,
                   gemm_batch=1.0, gemm_m=n * h * w, gemm_n=c, gemm_k=k * kr * ks)
    else:
        row.update(bytes_read=x_b + y_b, bytes_written=w_b, weight_bytes=0.0,
                   gemm_batch=1.0, gemm_m=k, gemm_n=c * kr * ks, gemm_k=n * ho * wo)
    return row


_BUILDERS: dict[str, Callable[[Any], OpNode]] = {
    "matmul": _gemm_node, "conv": _conv_node, "elementwise": _vec_node, "softmax": _vec_node,
    "normalization": _vec_node,
}
_KEY_COLS = ("workload", "op_type", "family", "direction", "precision", "storage_bytes", "B", "M",
             "N", "K", "trans_a", "trans_b", "conv_n", "conv_c", "conv_h", "conv_w", "conv_k",
             "conv_r", "conv_s", "stride_h", "stride_w", "pad_h", "pad_w", "vec_b", "vec_h")


def _row_cost(r: Any) -> dict[str, float]:
    node = _BUILDERS[r.family](r)
    cost = cost_of(node)
    if cost is None:
        raise PublicDataError(
            f"no cost rule for {node.op_type}; the graph_import cost registry is incomplete"
        )
    dims = gemm_dims(node)
    row = {"flops": cost.flops, "bytes_read": cost.bytes_read, "bytes_written": cost.bytes_written,
           "weight_bytes": cost.weight_bytes, "engine": str(cost.engine),
           "gemm_batch": np.nan, "gemm_m": np.nan, "gemm_n": np.nan, "gemm_k": np.nan,
           "inner_elems": inner_elems_or_nan(node)}
    if dims is not None:
        row.update(zip(("gemm_batch", "gemm_m", "gemm_n", "gemm_k"), dims, strict=True))
    if r.direction in ("bwd_data", "bwd_filter"):
        row = _bwd(row, r, r.direction)
        row["engine"] = "matrix"
    return row


def _distinct(kernels: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """(row -> distinct-shape number, one row per distinct shape in that order)."""
    keys = kernels.groupby(list(_KEY_COLS), dropna=False, sort=False).ngroup().to_numpy()
    _, first = np.unique(keys, return_index=True)
    return keys, kernels.iloc[first][list(_KEY_COLS)]


def kernel_nodes(kernels: pd.DataFrame) -> pd.Series:
    """The ONNX-like node each row is modelled as (the forward op for conv backward rows), same
    index; one :class:`OpNode` object per distinct shape, shared between rows."""
    keys, uniq = _distinct(kernels)
    nodes = [_BUILDERS[r.family](r) for r in uniq.itertuples(index=False)]
    return pd.Series([nodes[k] for k in keys], index=kernels.index, dtype=object)


def kernel_workload(kernels: pd.DataFrame) -> pd.DataFrame:
    """Workload rows (``graph_import.workload_schema``) for ``kernels``, same index.

    Each distinct shape is costed once by the project's cost rules and reused for every device.
    """
    keys, uniq = _distinct(kernels)
    costs = pd.DataFrame([_row_cost(r) for r in uniq.itertuples(index=False)])
    table = costs.iloc[keys].set_index(kernels.index)
    out = pd.DataFrame(index=kernels.index)
    out["node"] = kernels["dataset"] + ":" + kernels.index.astype(str)
    out["op_type"] = kernels["op_type"]
    out["family"] = kernels["family"]
    out["phase"] = np.where(kernels["direction"].eq("fwd"), "forward", "backward")
    out["engine"] = table["engine"]
    out["dtype"] = kernels["precision"]
    for col in ("flops", "bytes_read", "bytes_written", "weight_bytes", "gemm_batch", "gemm_m",
                "gemm_n", "gemm_k", "inner_elems"):
        out[col] = table[col].astype(float)
    out["fused_nodes"] = out["node"]
    return out[list(WORKLOAD_COLUMN_NAMES)]


def describe(table: KernelTable) -> str:
    """One line per dataset/device with row counts, plus skipped and unmapped counts."""
    g = table.kernels.groupby(["dataset", "device"]).size()
    lines = [f"{ds:14s} {dev:16s} {n:7d}" for (ds, dev), n in g.items()]
    if table.skipped:
        lines.append("skipped: " + ", ".join(f"{k}={v}" for k, v in sorted(table.skipped.items())))
    if table.unmapped:
        lines.append(
            "unmapped hardware: " + ", ".join(f"{k}={v}" for k, v in sorted(table.unmapped.items()))
        )
    return "\n".join(lines)


