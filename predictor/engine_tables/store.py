"""The shipped engine tables and the lookup of featurized kernel rows in them.

``load()``: ``tables.npz`` + ``metadata.json`` of ``DATA_DIR`` (``build`` writes them; None when
absent). ``EngineTables.times(X, versions)``: seconds per row of a featurized table, NaN where
no table applies. A row is looked up when its device (catalog id) has tables of its runtime at
the version the runtime's profile names (``versions``: runtime -> version) and its kernel is one
the tables time: a ``Gemm`` [m, k] x [k, n] at its dtype (grid over m, n, k); a fused
``Attention`` row carrying the ``ATTENTION_COLUMNS`` the LLM step builder adds, looked up in the
generation table (one query per sequence, keys = context) or the context table (a prompt
attending only itself), keyed by heads, KV heads, head dim, window and the attention / KV
dtypes, over (sequences, tokens); an MoE module row carrying ``MOE_COLUMNS`` (over tokens).
Times: ``Grid.at`` for GEMMs and MoE (interpolated; rows, columns or tokens past the last
measured line split into kernels of that size, a reduction is never extrapolated),
``Grid.at_sequences`` for attention (sequences past a measured line split). fp16 rows read the
bf16 tables (``SAME_RATE``: same bytes, same tensor-core rate on every device they hold).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.predictor.engine_tables.grid import Grid
from roofcast.predictor.llm.layer import MOE_OP

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "engine_tables"
FILE, METADATA = "tables.npz", "metadata.json"
#: store name -> aiconfigurator table of the attention grids.
ATTENTION_TABLES: dict[str, str] = {"context": "context_attention",
                                    "generation": "generation_attention"}
#: key fields of an attention grid (codes first, then shape integers).
ATTENTION_KEY: tuple[str, ...] = ("device", "runtime", "attn_dtype", "kv_dtype", "num_heads",
                                  "num_key_value_heads", "head_dim", "window_size")
#: key fields of an MoE grid (``build._moe_rows``: the expert width one device runs).
MOE_KEY: tuple[str, ...] = ("device", "runtime", "math_dtype", "hidden_size", "inter_local",
                            "topk", "num_experts", "gated")
#: workload columns of an MoE module row (``predictor.llm.kernels``, no expert parallelism):
#: tokens, hidden size, expert width on the device, experts per token, experts, gated (1/0).
MOE_COLUMNS: tuple[str, ...] = ("moe_tokens", "moe_hidden", "moe_inter", "moe_topk",
                                "moe_experts", "moe_gated")
#: grid axes of each store table.
AXES: dict[str, tuple[str, ...]] = {"gemm": ("m", "n", "k"), "context": ("batch", "tokens"),
                                    "generation": ("batch", "tokens"), "moe": ("tokens",)}
#: workload columns of a fused attention row (``predictor.llm.kernels``): sequences, queries
#: and keys per sequence, heads, KV heads, head dim, sliding window (0: none), KV dtype.
ATTENTION_COLUMNS: tuple[str, ...] = ("attn_batch", "attn_queries", "attn_keys", "attn_heads",
                                      "attn_kv_heads", "attn_head_dim", "attn_window",
                                      "attn_kv_dtype")

#: dtype of a row -> the table dtype timed at the same rate (the tables hold bf16 only).
SAME_RATE: dict[str, str] = {"fp16": "bf16"}


@dataclass(frozen=True)
class EngineTables:
    """The tables (module docstring): ``meta`` from metadata.json, ``arrays`` from the npz."""

    meta: dict
    arrays: Mapping[str, np.ndarray]
    _grids: dict = field(default_factory=dict, repr=False, compare=False)

    def code(self, names: str, value: str) -> int:
        """Code of ``value`` in metadata list ``names`` (-1: not in the tables)."""
        found = self.meta[names]
        value = SAME_RATE.get(value, value) if names == "dtypes" else value
        return found.index(value) if value in found else -1

    def version(self, device: str, runtime: str) -> str | None:
        """The engine version of ``device``'s tables of ``runtime`` (None: no tables)."""
        return self.meta["versions"].get(f"{device}|{runtime}")

    def grid(self, table: str, key: tuple[int, ...]) -> Grid | None:
        """The grid of ``table`` (gemm, context, generation) under ``key`` (codes + shape)."""
        cache_key = (table, key)
        if cache_key not in self._grids:
            keys = self.arrays[f"{table}_keys"]
            hit = np.flatnonzero((keys == np.asarray(key, keys.dtype)).all(axis=1))
            axes = AXES[table]
            self._grids[cache_key] = None if not len(hit) else _measured_grid(
                [self.arrays[f"{table}_{a}"].astype(float) for a in axes],
                np.exp(self.arrays[f"{table}_log_us"][hit[0]].astype(float)) * 1e-6)
        return self._grids[cache_key]

    def times(self, X: pd.DataFrame, versions: Mapping[str, str]) -> np.ndarray:
        """Seconds per row of featurized ``X`` where a table applies, else NaN (module doc)."""
        out = np.full(len(X), np.nan)
        pairs = X["device"].astype(str) + "|" + X["runtime"].astype(str)
        ok = _per_value(pairs, lambda p: versions.get(p.split("|")[1]) is not None
                        and self.meta["versions"].get(p) == versions.get(p.split("|")[1]))
        ok = ok.astype(bool)
        if not ok.any():
            return out
        ok &= _weights_at_dtype(X)
        op = X["op_type"].astype(str).to_numpy(object)
        gemm = ok & (op == "Gemm") & (X["gemm_batch"].fillna(1).to_numpy(float) == 1)
        self._fill(out, X, gemm, "gemm", ("gemm_m", "gemm_n", "gemm_k"), ())
        if "attn_batch" in X:
            attn = ok & (op == "Attention") & X["attn_batch"].notna().to_numpy()
            q = X["attn_queries"].to_numpy(float)
            keys = X["attn_keys"].to_numpy(float)
            fields = ("attn_kv_dtype", "attn_heads", "attn_kv_heads", "attn_head_dim",
                      "attn_window")
            self._fill(out, X, attn & (q == 1), "generation", ("attn_batch", "attn_keys"),
                       fields)
            self._fill(out, X, attn & (q > 1) & (q == keys), "context",
                       ("attn_batch", "attn_queries"), fields)
        if "moe_tokens" in X:
            moe = ok & (op == MOE_OP) & X["moe_tokens"].notna().to_numpy()
            self._fill(out, X, moe, "moe", ("moe_tokens",), MOE_COLUMNS[1:])
        return out

    def _fill(self, out: np.ndarray, X: pd.DataFrame, rows: np.ndarray, table: str,
              point_cols: tuple[str, ...], key_cols: tuple[str, ...]) -> None:
        """Look ``rows`` of ``X`` up in ``table``: grouped by their grid key, one ``at`` each."""
        idx = np.flatnonzero(rows)
        if not len(idx):
            return
        sub = X.iloc[idx]
        def coded(col: str, names: str) -> np.ndarray:
            return _per_value(sub[col].astype(str), lambda v: self.code(names, v))

        codes = pd.DataFrame({
            "d": coded("device", "devices"), "r": coded("runtime", "runtimes"),
            "t": coded("dtype", "dtypes"),
            **{c: (coded(c, "dtypes") if c == "attn_kv_dtype"
                   else sub[c].fillna(0).astype(int).to_numpy()) for c in key_cols}})
        points = sub[list(point_cols)].to_numpy(float)
        n_codes = 4 if "attn_kv_dtype" in key_cols else 3  # device, runtime, dtype(s)
        for key, pos in codes.groupby(list(codes.columns), sort=False).indices.items():
            if min(key[:n_codes]) < 0:
                continue
            grid = self.grid(table, tuple(int(k) for k in key))
            if grid is None:
                continue
            if table in ATTENTION_TABLES:
                out[idx[pos]] = grid.at_sequences(points[pos])
            else:  # a GEMM's rows and columns (an MoE module's tokens) are independent work
                out[idx[pos]] = grid.at(points[pos], split=(0, 1) if table == "gemm" else (0,))


def _per_value(values: pd.Series, fn) -> np.ndarray:
    """``fn`` of each row's value, evaluated once per distinct value."""
    return values.map({v: fn(v) for v in values.unique()}).to_numpy()


def _weights_at_dtype(X: pd.DataFrame) -> np.ndarray:
    """Per row: whether its weights are stored at its math dtype's width (within 25 %), as in
    the tables' kernels. A W4A16 or W8A16 projection (int4/int8 weights dequantised to fp16)
    reads 1/4 or 1/2 of the bf16 kernel's weight bytes: another kernel, not the table's.
    Weights per row: ``n k`` (a GEMM, per batch), ``(2 or 3) x hidden x width`` per touched
    expert (an MoE module: up (x2 gated) and down); rows without weights pass."""
    w = X["weight_bytes"].to_numpy(float)
    elems = (X["gemm_batch"].fillna(1) * X["gemm_n"] * X["gemm_k"]).to_numpy(float)
    if "moe_tokens" in X:
        moe = X["moe_tokens"].notna().to_numpy()
        per = (2.0 + X["moe_gated"].fillna(0)) * X["moe_hidden"] * X["moe_inter"]
        elems = np.where(moe, X["gemm_batch"].to_numpy(float) * per.to_numpy(float), elems)
    width = X["elem_bytes"].to_numpy(float)  # featurize's bytes per element of the dtype
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = w / (elems * width)
    return (w <= 0) | ~np.isfinite(elems) | ((ratio > 0.8) & (ratio < 1.25))


def _measured_grid(axes: list[np.ndarray], values: np.ndarray) -> Grid:
    """The grid over the axis values this table measured (the stored axes are the union over
    every table: a value another engine measured is no cell here)."""
    for d in range(values.ndim):
        other = tuple(i for i in range(values.ndim) if i != d)
        keep = np.isfinite(values).any(axis=other)
        axes[d], values = axes[d][keep], np.compress(keep, values, axis=d)
    return Grid(tuple(axes), values)


@lru_cache(maxsize=4)
def load(folder: Path = DATA_DIR) -> EngineTables | None:
    """The tables of ``folder`` (None when it has none)."""
    if not (folder / FILE).is_file() or not (folder / METADATA).is_file():
        return None
    with np.load(folder / FILE, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return EngineTables(json.loads((folder / METADATA).read_text()), arrays)
