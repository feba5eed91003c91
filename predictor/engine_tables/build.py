"""Build the shipped engine tables from aiconfigurator's per-op tables (run once, offline).

    ROOFCAST_SHARED_DATA=../shared/data python -m roofcast.predictor.engine_tables.build

Reads ``training_data.public.aiconfigurator.load_kernels`` (every row, no cap; its ``LEFT_OUT``
rules apply here too) and the engine version of each (device, engine) from its rows. A
shape timed more than once (several kernels or repeats) keeps its fastest time, the kernel an
engine's autotuner keeps. GEMM: one grid per (device, engine, dtype) over (m, n, k); attention:
one grid per (device, engine, attention dtype, KV dtype, heads, KV heads, head dim, window) over
(sequences, tokens): a context row's prompt length (``isl``), a generation row's keys (``isl +
step``); MoE modules without expert parallelism (``_moe_rows``) one grid per (device, engine,
dtype, hidden, expert width per device, top-k, experts, gated) over tokens. Stored as
``log(microseconds)`` in float16 (at most 0.4 % off) in one ``tables.npz`` (no pickles) with
``metadata.json`` naming the codes, versions and sources.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.dtypes import DTYPE_NAMES
from roofcast.predictor.engine_tables.store import (
    ATTENTION_KEY,
    ATTENTION_TABLES,
    DATA_DIR,
    FILE,
    METADATA,
    MOE_KEY,
)
from roofcast.training_data.public.aiconfigurator import DEVICES, RUNTIMES, SUBDIR, load_kernels
from roofcast.training_data.public_kernels import PublicDataError, shared_data_dir

#: latent cache channels of the MLA the tables time (DeepSeek-V3's kv_lora_rank 512 + rope 64).
MLA_CACHE_WIDTH = 576
SOURCE = ("NVIDIA aiconfigurator per-op tables (ai-dynamo/aiconfigurator, Apache-2.0): GEMM and "
          "context/generation attention timed with CUDA graphs inside each engine's container")


def _codes(values: pd.Series, names: list[str]) -> np.ndarray:
    for v in sorted(set(values) - set(names)):
        names.append(v)
    return values.map({n: i for i, n in enumerate(names)}).to_numpy(np.int32)


def _grids(rows: pd.DataFrame, key: list[str], axes: list[str]
           ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """(keys (G, len(key)), union axes, log-us values (G, *axis lengths), NaN: not measured)."""
    best = rows.groupby([*key, *axes], as_index=False)["latency_s"].min()
    ax = [np.unique(best[a].to_numpy(np.int64)) for a in axes]
    groups = best.groupby(key, sort=True)
    keys = np.array([k if isinstance(k, tuple) else (k,) for k in groups.groups], np.int32)
    values = np.full((len(keys), *(len(a) for a in ax)), np.nan, np.float16)
    for g, (_, part) in enumerate(groups):
        idx = tuple(np.searchsorted(a, part[c].to_numpy(np.int64)) for a, c in zip(ax, axes,
                                                                                  strict=True))
        values[(g, *idx)] = np.log(part["latency_s"].to_numpy(float) * 1e6).astype(np.float16)
    return keys, ax, values


def _moe_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """MoE modules without expert parallelism, keyed by each device's expert width
    ``inter_size / moe_tp_size`` (the kernel a tensor-parallel rank runs: every token on every
    expert's slice), integer shape columns."""
    moe = rows[(rows["table"] == "moe") & (rows["moe_ep_size"] == 1)
               & (rows["inter_size"] % rows["moe_tp_size"] == 0)]
    moe = moe.assign(inter_local=moe["inter_size"] // moe["moe_tp_size"])
    return moe.astype(dict.fromkeys(["num_tokens", *MOE_KEY[3:]], int))


def _mla_rows(folder: Path, versions: dict[str, str], names: dict[str, list[str]]
              ) -> tuple[pd.DataFrame, dict[str, int]]:
    """The engines' MLA decode kernels (``generation_mla_perf``: the attention op over the
    latent cache, RoPE and cache append inside, the absorb BMMs timed apart) as generation
    attention grids: ``num_heads`` query heads (per device) over one KV head of
    ``MLA_CACHE_WIDTH`` channels. Rows of an engine version other than the device's other
    tables are left out and counted."""
    index = pd.read_csv(folder / "INDEX.csv")
    parts, skipped = [], {}
    for rel in index.loc[index["table"] == "generation_mla_perf", "path"]:
        df = pd.read_parquet(folder / rel)
        dev = df["device"].map(DEVICES)
        rt = df["framework"].str.upper().map(RUNTIMES)
        key = dev.astype(str) + "|" + rt.astype(str)
        keep = key.map(versions).eq(df["version"].astype(str))
        if (~keep).any():
            skipped[f"MLA rows of another engine version: {rel}"] = int((~keep).sum())
        df, dev, rt = df[keep], dev[keep], rt[keep]
        parts.append(pd.DataFrame({
            "dev": _codes(dev, names["devices"]), "rt": _codes(rt, names["runtimes"]),
            "dt": _codes(df["mla_dtype"].map(DTYPE_NAMES), names["dtypes"]),
            "kv": _codes(df["kv_cache_dtype"].map(DTYPE_NAMES), names["dtypes"]),
            "num_heads": df["num_heads"].astype(int), "num_key_value_heads": 1,
            "head_dim": MLA_CACHE_WIDTH, "window_size": 0, "batch_size": df["batch_size"],
            "tokens": df["isl"] + df["step"], "latency_s": df["latency"] * 1e-3}))
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), skipped


def _versions(rows: pd.DataFrame) -> dict[str, str]:
    """``device|runtime`` -> the engine version of its kept rows; two versions of one device's
    engine would make the tables ambiguous: refused."""
    found = rows.groupby(["device", "runtime"])["version"].unique()
    mixed = {k: list(v) for k, v in found.items() if len(v) > 1}
    if mixed:
        raise PublicDataError(f"tables of several engine versions {mixed}; keep one each")
    return {f"{d}|{r}": str(v[0]) for (d, r), v in found.items()}


def build(data_dir: str | Path | None = None, out_dir: Path = DATA_DIR) -> dict:
    """Write ``tables.npz`` and ``metadata.json`` to ``out_dir``; returns the metadata."""
    ops = load_kernels(data_dir, cap=None)
    rows = ops.rows
    names: dict[str, list[str]] = {"devices": [], "runtimes": [], "dtypes": []}
    rows = rows.assign(dev=_codes(rows["device"], names["devices"]),
                       rt=_codes(rows["runtime"], names["runtimes"]),
                       dt=_codes(rows["math_dtype"], names["dtypes"]),
                       kv=_codes(rows["kv_dtype"], names["dtypes"]),
                       tokens=rows["isl"] + rows["step"].fillna(0))
    arrays, counts = {}, {}
    gemm = rows[rows["table"] == "gemm"]
    keys, ax, vals = _grids(gemm, ["dev", "rt", "dt"], ["m", "n", "k"])
    arrays.update(gemm_keys=keys, gemm_m=ax[0], gemm_n=ax[1], gemm_k=ax[2], gemm_log_us=vals)
    counts["gemm"] = len(gemm)
    moe = _moe_rows(rows)
    keys, ax, vals = _grids(moe, ["dev", "rt", "dt", *MOE_KEY[3:]], ["num_tokens"])
    arrays.update(moe_keys=keys, moe_tokens=ax[0], moe_log_us=vals)
    counts["moe"] = len(moe)
    versions = _versions(rows)
    mla, skipped = _mla_rows(shared_data_dir(data_dir) / SUBDIR, versions, names)
    for name, table in ATTENTION_TABLES.items():
        part = rows[rows["table"] == table]
        if name == "context":
            part = part[part["step"].fillna(0) == 0]
        else:
            part = pd.concat([part, mla], ignore_index=True)
        keys, ax, vals = _grids(part.astype(dict.fromkeys(ATTENTION_KEY[4:], int)),
                                ["dev", "rt", "dt", "kv", *ATTENTION_KEY[4:]],
                                ["batch_size", "tokens"])
        arrays.update({f"{name}_keys": keys, f"{name}_batch": ax[0], f"{name}_tokens": ax[1],
                       f"{name}_log_us": vals})
        counts[name] = len(part)
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out_dir / FILE, **arrays)
    meta = {"kind": "engine-tables", "built_on": dt.date.today().isoformat(),
            "source": SOURCE, "origin": str(SUBDIR), **names, "rows": counts,
            "versions": versions, "skipped": {**ops.skipped, **skipped}}
    (out_dir / METADATA).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return meta


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="folder holding aiconfigurator/ (default: "
                    "$ROOFCAST_SHARED_DATA or ../shared/data)")
    ap.add_argument("--out", type=Path, default=DATA_DIR, help="output folder")
    args = ap.parse_args(argv)
    meta = build(args.data, args.out)
    print(json.dumps(meta["rows"]), "->", args.out)


if __name__ == "__main__":
    main()
