"""NVIDIA aiconfigurator's per-op tables (``$ROOFCAST_SHARED_DATA/aiconfigurator``), one tidy table.

Source: ai-dynamo/aiconfigurator (Apache-2.0): GEMM, context / generation attention and MoE
modules timed with CUDA graphs inside TensorRT-LLM, vLLM and SGLang containers (``latency`` in
ms). ``load_kernels`` -> :class:`OpTable`: ``rows``, one per kept measurement: ``table`` (gemm,
context_attention, generation_attention, moe: balanced routing only, ``gated`` unless the kernel
is a ``nongated`` one), ``device`` (catalog id, from the ``device`` column, not the folder),
``runtime`` (profile name), ``version`` (the engine release), ``math_dtype`` / ``kv_dtype``
(``roofcast.dtypes`` names), ``latency_s`` and the shape (``SHAPE_COLUMNS``); ``skipped``:
reason -> rows left out (devices not in the catalog, dtypes ``roofcast.dtypes`` lacks,
weight-only GEMMs, the ``LEFT_OUT`` rules), never dropped silently. At most ``cap`` rows per
(device, table, dtypes, runtime), drawn with ``seed`` (``table_caps``: another cap for some
tables). Costing and featurizing: ``predictor.learned.aiconfigurator``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.dtypes import DTYPE_NAMES, DTYPES
from roofcast.training_data.public_kernels import PublicDataError, shared_data_dir

SUBDIR = Path("aiconfigurator")
TABLES: dict[str, str] = {"gemm_perf": "gemm", "context_attention_perf": "context_attention",
                          "generation_attention_perf": "generation_attention",
                          "moe_perf": "moe"}
#: ``device`` column -> catalog id (the Intel Arc Pro B60 is not in the catalog: skipped).
DEVICES: dict[str, str] = {
    "NVIDIA A100-SXM4-80GB": "a100-80gb-sxm", "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H200": "h200", "NVIDIA B200": "b200", "NVIDIA GB200": "gb200", "NVIDIA L40S": "l40s",
}
#: ``framework`` column -> runtime name (predictor/runtimes/profiles; SGLang has no profile).
RUNTIMES: dict[str, str] = {"TRTLLM": "tensorrt-llm", "VLLM": "vllm", "SGLANG": "sglang"}
DEFAULT_CAP = 400
#: shape columns kept (GEMM: m, n, k; attention; MoE; NaN where a table has none).
SHAPE_COLUMNS: tuple[str, ...] = ("m", "n", "k", "batch_size", "isl", "num_heads",
                                  "num_key_value_heads", "head_dim", "step", "window_size",
                                  "num_tokens", "hidden_size", "inter_size", "topk",
                                  "num_experts", "moe_tp_size", "moe_ep_size", "gated")
#: the MoE routing the LLM road models (uniform: ``predictor.llm.kernels.busiest_share``).
MOE_DISTRIBUTION = "balanced"
_DTYPE_COLUMNS = ("gemm_dtype", "moe_dtype", "attn_dtype")


@dataclass(frozen=True)
class LeftOut:
    """Rows of one (table, runtime, math dtype), on ``devices`` (catalog ids; empty: every
    device), that do not time what an engine's CUDA-graph step runs; ``why`` is their
    ``skipped`` reason. Evidence for each rule: docs/design/kernel-model.md."""

    table: str
    runtime: str
    math_dtype: str
    why: str
    devices: frozenset[str] = frozenset()

    def matches(self, df: pd.DataFrame) -> pd.Series:
        """The rows of ``df`` the rule leaves out."""
        hit = ((df["table"] == self.table) & (df["runtime"] == self.runtime)
               & (df["math_dtype"] == self.math_dtype))
        return hit & df["device_id"].isin(list(self.devices)) if self.devices else hit


#: rows left out of every use. vLLM 0.24's block-scaled fp8 GEMM wrappers take a flat 60-90 us
#: (H100/H200), 180-500 (B200, GB200, L40S) at every small shape, where SGLang's DeepGEMM rows of
#: the same shapes take 5-37 us (the two agree within 5 % above 0.5 ms). vLLM 0.24's per-tensor
#: fp8 MoE (ModelOpt -> FlashInfer CUTLASS) on Hopper takes 2.0-2.4x the bf16 module of the same
#: shape (median of 4,401 H100 shapes), where its block-fp8 Triton path takes 0.6-0.7x, TensorRT-
#: LLM's fp8 0.5x and the same path on Blackwell 0.84x.
LEFT_OUT: tuple[LeftOut, ...] = (
    LeftOut("gemm", "vllm", "fp8_block", "timed with a host floor"),
    LeftOut("moe", "vllm", "fp8", "slower than its bf16 module (Hopper fp8 MoE path)",
            frozenset({"h100-sxm", "h200"})),
)


@dataclass(frozen=True)
class OpTable:
    """Kept rows and what was left out (module docstring)."""

    rows: pd.DataFrame
    skipped: dict[str, int] = field(default_factory=dict)
    origin: str = ""


def _files(folder: Path) -> pd.DataFrame:
    index = folder / "INDEX.csv"
    if not index.is_file():
        raise PublicDataError(f"{index} not found: set ROOFCAST_SHARED_DATA to the folder holding "
                              "aiconfigurator/ (see its README)")
    files = pd.read_csv(index)
    return files[files["table"].isin(list(TABLES))]


def _read(folder: Path, path: str, skipped: Counter, cap: int | None, seed: int
          ) -> pd.DataFrame:
    """One table file's usable rows, capped; what is left out is counted in ``skipped``."""
    df = pd.read_parquet(folder / path)
    df["table"] = TABLES[Path(path).stem]
    df["device_id"] = df["device"].map(DEVICES)
    df["runtime"] = df["framework"].str.upper().map(RUNTIMES)
    dcol = next(c for c in _DTYPE_COLUMNS if c in df)
    df["math_dtype"] = df[dcol].map(DTYPE_NAMES)
    df["kv_dtype"] = df["kv_cache_dtype"].map(DTYPE_NAMES) if "kv_cache_dtype" in df else "bf16"
    known = df["math_dtype"].isin(list(DTYPES)) & df["kv_dtype"].isin(list(DTYPES))
    dropped = pd.Series(False, index=df.index)
    for reason, bad, col in (("device not in the catalog", df["device_id"].isna(), "device"),
                             ("engine without a runtime name", df["runtime"].isna(), "framework"),
                             ("dtype not modelled", ~known, dcol),
                             ("no positive latency", ~(df["latency"] > 0), "table"),
                             *((f"{rule.why} (LEFT_OUT)", rule.matches(df), "framework")
                               for rule in LEFT_OUT),
                             ("MoE routing not uniform", _skewed(df), "distribution")):
        for value, n in df.loc[bad & ~dropped, col].value_counts().items():
            skipped[f"{reason}: {value}"] += int(n)
        dropped |= bad
    df = df[~dropped]
    return _capped(df, cap, seed)


def _skewed(df: pd.DataFrame) -> pd.Series:
    """Rows timed under a routing other than ``MOE_DISTRIBUTION`` (tables without routing:
    none); adds ``gated`` to MoE rows."""
    if "distribution" not in df:
        df["distribution"] = MOE_DISTRIBUTION
        return pd.Series(False, index=df.index)
    df["gated"] = (~df["kernel_source"].str.endswith("nongated")).astype(float)
    return df["distribution"] != MOE_DISTRIBUTION


def _capped(df: pd.DataFrame, cap: int | None, seed: int) -> pd.DataFrame:
    if not cap or df.empty:
        return df
    rng = np.random.default_rng(seed)
    keep = [idx if len(idx) <= cap else rng.choice(idx, cap, replace=False)
            for _, idx in sorted(df.groupby(["device_id", "table", "math_dtype", "kv_dtype",
                                              "runtime"]).indices.items())]
    return df.iloc[np.sort(np.concatenate(keep))]


def load_kernels(data_dir: str | Path | None = None, cap: int | None = DEFAULT_CAP,
                 seed: int = 0, table_caps: Mapping[str, int] | None = None) -> OpTable:
    """GEMM, attention and MoE rows of every catalog device (module docstring)."""
    folder = shared_data_dir(data_dir) / SUBDIR
    skipped: Counter = Counter()
    caps = table_caps or {}
    parts = [_read(folder, p, skipped, caps.get(TABLES[Path(p).stem], cap), seed)
             for p in sorted(_files(folder)["path"])]
    if not parts:
        raise PublicDataError(f"{folder}: no GEMM, attention or MoE tables listed in INDEX.csv")
    df = pd.concat(parts, ignore_index=True)
    df["latency_s"] = df["latency"].astype(float) * 1e-3
    for c in SHAPE_COLUMNS:
        df[c] = pd.to_numeric(df[c], errors="coerce") if c in df else np.nan
    df["window_size"] = df["window_size"].fillna(0.0)
    df["version"] = df["version"].astype(str)
    keep = ["table", "device_id", "runtime", "version", "math_dtype", "kv_dtype", "latency_s",
            *SHAPE_COLUMNS]
    return OpTable(df[keep].rename(columns={"device_id": "device"}), dict(skipped), str(folder))
