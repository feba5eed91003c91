"""Collective curves from aiconfigurator's measured tables (``data/<gpu>/comm/``, Apache-2.0).

``nccl_perf`` (nccl-tests in the engines' containers: all_reduce, all_gather, reduce_scatter,
alltoall over 2-8 GPUs of one node) -> curve rows of ``AIC_SYSTEMS[gpu]``; ``message_size`` is
an element count, ``size_bytes = elements x 2`` (``half``). ``custom_allreduce_perf`` (the
engines' own all-reduce kernels under CUDA graphs: TensorRT-LLM, vLLM and SGLang graph mode)
-> collective ``CUSTOM_ALL_REDUCE``, the median over the engines per size, up to
``CUSTOM_MAX_BYTES`` (beyond, the engines hand over to NCCL). The newest NCCL version per GPU,
the newest version per engine; latency ms -> ``time_s``. Build-time only (benchmarks/).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

#: aiconfigurator GPU folder -> (curve system name, catalog system it was measured on).
AIC_SYSTEMS: dict[str, tuple[str, str]] = {
    "a100_sxm": ("aic_a100_sxm", "dgx-a100"),
    "h100_sxm": ("aic_h100_sxm", "hgx-h100"),
    "h200_sxm": ("aic_h200_sxm", "hgx-h200"),
    "b200_sxm": ("aic_b200_sxm", "dgx-b200"),
    "gb200": ("aic_gb200", "gb200-nvl72"),
    "l40s": ("aic_l40s", "l40s-8-pcie"),
}
#: the engines' all-reduce kernels timed as one curve (``model.engine_time_s``' fastest).
CUSTOM_ALL_REDUCE = "custom_all_reduce"
CUSTOM_MAX_BYTES = 16 * 2**20
HALF_BYTES = 2.0
SOURCE = "ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/systems/data@095f58a5"
LICENCE = "Apache-2.0"
_OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
        "reduce_scatter": "reduce_scatter", "alltoall": "all_to_all"}


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0
                 for p in path.parent.name.replace("rc", ".").replace("post", ".").split("."))


def _newest(paths: list[Path]) -> list[Path]:
    """The newest version folder per engine folder."""
    by_engine: dict[Path, Path] = {}
    for p in paths:
        engine = p.parent.parent
        if engine not in by_engine or _version_key(p) > _version_key(by_engine[engine]):
            by_engine[engine] = p
    return sorted(by_engine.values())


def _rows(frame: pd.DataFrame, system: str, collective: pd.Series, path: Path) -> pd.DataFrame:
    n = frame["num_gpus"].astype(int)
    return pd.DataFrame({
        "system": system, "collective": collective.to_numpy(), "n_ranks": n.to_numpy(),
        "ranks_per_node": n.to_numpy(),
        "size_bytes": frame["message_size"].to_numpy(float) * HALF_BYTES,
        "time_s": frame["latency"].to_numpy(float) * 1e-3,
        "source": f"{SOURCE}/{path.parts[-5]}/comm/{path.parts[-3]}/{path.parts[-2]}",
        "licence": LICENCE})


def nccl_curves(gpu_dir: Path, system: str) -> pd.DataFrame:
    """The newest ``nccl_perf`` table of one GPU folder as curve rows (module docstring)."""
    paths = _newest(sorted(gpu_dir.glob("comm/nccl/*/nccl_perf.parquet")))
    if not paths:
        return pd.DataFrame()
    path = paths[0]
    t = pd.read_parquet(path)
    t = t[(t["nccl_dtype"] == "half") & t["op_name"].isin(list(_OPS))]
    if "version" in t.columns:
        t = t[t["version"] == t["version"].max()]
    t = t.groupby(["op_name", "num_gpus", "message_size"], as_index=False)["latency"].median()
    return _rows(t, system, t["op_name"].map(_OPS), path)


def custom_curves(gpu_dir: Path, system: str) -> pd.DataFrame:
    """The engines' graph-mode custom all-reduce, median over engines per (GPUs, size)."""
    parts = []
    for path in _newest(sorted(gpu_dir.glob("comm/*/*/custom_allreduce_perf.parquet"))):
        t = pd.read_parquet(path)
        if "backend" in t.columns:
            t = t[t["backend"].astype(str).str.contains("graph")]
        parts.append(t[["num_gpus", "message_size", "latency"]])
    if not parts:
        return pd.DataFrame()
    t = pd.concat(parts).groupby(["num_gpus", "message_size"], as_index=False)["latency"].median()
    t = t[t["message_size"] * HALF_BYTES <= CUSTOM_MAX_BYTES]
    rows = _rows(t, system, pd.Series(CUSTOM_ALL_REDUCE, index=t.index), path)
    return rows.assign(source=f"{SOURCE}/{gpu_dir.name}/comm/*/custom_allreduce_perf (median)")


def aic_curves(data_dir: Path) -> pd.DataFrame:
    """Every ``AIC_SYSTEMS`` GPU's NCCL and custom all-reduce curves under ``data_dir``
    (aiconfigurator's ``data/``)."""
    parts = []
    for gpu, (system, _) in AIC_SYSTEMS.items():
        gpu_dir = data_dir / gpu
        parts += [nccl_curves(gpu_dir, system), custom_curves(gpu_dir, system)]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
