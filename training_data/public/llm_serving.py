"""Argonne's LLM-Inference-Bench serving measurements (``$ROOFCAST_SHARED_DATA/llm/argonne``) as
one tidy table.

Source: argonne-lcf/LLM-Inference-Bench ``Plots/*.csv`` (BSD-3-Clause; Chitty-Venkata et al.
2024, arXiv:2411.00136). Keep the source and licence with anything derived.

``load_serving(data_dir=None)`` -> :class:`ServingTable`: ``rows``, one per single-device
measurement (device and engine as catalog/runtime names, model as the bundled config, tokens,
``batch`` and ``requests``, ``latency_s`` of the whole batch, ``throughput_tok_s``, dtypes,
``ttft_s``, ``avg_power_W``), and ``excluded``: reason -> rows left out (multi-device rows,
contexts over the model's maximum, unknown labels), never dropped silently.

Rationale: ``docs/design/module-notes.md`` (roofcast.training_data.public.llm_serving).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from roofcast.training_data.public_kernels import PublicDataError, shared_data_dir

SUBDIR = Path("llm") / "argonne"
#: publisher's hardware label -> catalog id. The A100s are ALCF Polaris's A100-SXM4-40GB; the H100
#: form factor is not stated (SXM: its batch-1 decode exceeds the PCIe part's bandwidth); the
#: MI250 and Max 1550 labels are whole cards; see each device file's notes for the evidence.
DEVICES: dict[str, str] = {
    "Nvidia A100 GPU": "a100-40gb-sxm", "Nvidia H100 GPU": "h100-sxm",
    "Nvidia GH200 GPU": "gh200", "AMD MI250 GPU": "mi250", "AMD MI300X GPU": "mi300x",
    "Habana Gaudi2": "gaudi2", "Intel PVC GPU": "intel-max-1550",
    "Intel Max 1550": "intel-max-1550",
}
#: publisher's framework label -> runtime name (predictor/runtimes/profiles). Absent labels
#: (``Deepspeed`` on Gaudi2: Habana's DeepSpeed fork; ``sambaflow``) have no engine profile.
ENGINES: dict[str, str] = {"vLLM": "vllm-2024", "TensorRT-LLM": "tensorrt-llm-2024",
                           "llama.cpp": "llama.cpp", "Deepspeed-MII": "deepspeed-mii"}
FILES: dict[str, str] = {
    "all": "All_results.csv", "quant": "Fig_3_A100_H100_quant_all_results.csv",
    "ttft": "Fig_22_all_results_TTFT_ITL.csv", "power": "Fig_16_a_b_power_results.csv",
}
COLUMNS: tuple[str, ...] = (
    "figure",
    "hardware",
    "device",
    "n_devices",
    "engine_raw",
    "engine",
    "model_ref",
    "model",
    "input_tokens",
    "output_tokens",
    "batch",
    "requests",
    "latency_s",
    "throughput_tok_s",
    "weights",
    "kv_cache",
    "ttft_s",
    "avg_power_W",
)
_QUANT = re.compile(r"^\s*Weight\s*=\s*(\w+)\s*,\s*KV Cache\s*=\s*(\w+)\s*$")
MW_TO_W = 1e-3


@dataclass(frozen=True)
class ServingTable:
    """Tidy serving rows plus what was left out (module docstring)."""

    rows: pd.DataFrame
    excluded: dict[str, int] = field(default_factory=dict)
    origin: str = ""

    @property
    def data_hash(self) -> str:
        """sha256 of the tidy rows (CSV, 10 significant digits): what a fit on them records."""
        text = self.rows.to_csv(index=False, float_format="%.10g", lineterminator="\n")
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def summary(self) -> str:
        """Rows kept per figure and every exclusion with its count (for printing)."""
        kept = self.rows.groupby("figure").size().to_dict()
        lines = [f"read {self.origin}: kept " + ", ".join(f"{k} {v}" for k, v in kept.items())]
        lines += [f"  excluded {n:5d}: {why}" for why, n in sorted(self.excluded.items(),
                                                                   key=lambda kv: -kv[1])]
        return "\n".join(lines)


def _read_csv(folder: Path, name: str) -> pd.DataFrame:
    path = folder / name
    if not path.is_file():
        raise PublicDataError(f"{path} not found: set ROOFCAST_SHARED_DATA to the folder holding "
                              f"{SUBDIR}/ (the public data folder, see its README)")
    frame = pd.read_csv(path, skip_blank_lines=True)
    frame.columns = [c.strip() for c in frame.columns]
    return frame.dropna(how="all")


def _tidy(raw: pd.DataFrame, figure: str) -> pd.DataFrame:
    """The publisher's columns of one file -> the tidy columns (before mapping)."""
    out = pd.DataFrame({
        "figure": figure, "hardware": raw["Hardware"].str.strip(),
        "n_devices": raw["Num of Hardware"].astype(int), "engine_raw": raw["Framework"].str.strip(),
        "model_ref": raw["Model"].str.strip(), "batch": raw["Batch Size"].astype(int),
    }, index=raw.index)
    length = raw["Input Output Length"] if "Input Output Length" in raw else raw["Input Length"]
    out["input_tokens"] = length.astype(int)
    out["output_tokens"] = out["input_tokens"]
    lat = {"all": "Latency", "quant": "latency", "ttft": "end_latency", "power": "Latency"}[figure]
    out["latency_s"] = pd.to_numeric(raw[lat], errors="coerce")
    out["weights"], out["kv_cache"] = "fp16", "fp16"
    if figure == "quant":
        parsed = raw["kv_cache_dtype"].str.extract(_QUANT)
        if parsed.isna().any().any():
            bad = raw.loc[parsed.isna().any(axis=1), "kv_cache_dtype"].unique().tolist()
            raise PublicDataError(f"{FILES[figure]}: unreadable kv_cache_dtype values {bad}")
        out["weights"], out["kv_cache"] = parsed[0].str.lower(), parsed[1].str.lower()
    out["ttft_s"] = pd.to_numeric(raw["TTFT Latency"], errors="coerce") if figure == "ttft" \
        else float("nan")
    out["avg_power_W"] = pd.to_numeric(raw["avg_power"], errors="coerce") * MW_TO_W \
        if figure == "power" else float("nan")
    return out


def _archs(refs: list[str]) -> dict[str, object | None]:
    """HF id -> bundled config's ``LLMArch`` (None: no config)."""
    from roofcast.graph_import.errors import ModelImportError
    from roofcast.graph_import.llm.load import load_llm

    out: dict[str, object | None] = {}
    for ref in refs:
        try:
            out[ref] = load_llm(ref)
        except ModelImportError:
            out[ref] = None
    return out


def _known_devices(ids: set[str]) -> set[str]:
    from roofcast.hw_catalog import get_device
    from roofcast.hw_catalog.errors import HardwareSpecError

    known = set()
    for dev in ids:
        try:
            get_device(dev)
            known.add(dev)
        except HardwareSpecError:
            pass
    return known


def load_serving(data_dir: str | Path | None = None) -> ServingTable:
    """Read the four Argonne files (module docstring); ``data_dir``: the public data folder
    (default ``$ROOFCAST_SHARED_DATA``, else ``../shared/data`` beside the checkout)."""
    folder = shared_data_dir(data_dir) / SUBDIR
    frames = [_tidy(_read_csv(folder, name), fig) for fig, name in FILES.items()]
    rows = pd.concat(frames, ignore_index=True)
    excluded: Counter[str] = Counter()

    def drop(mask: pd.Series, reason_of) -> pd.DataFrame:
        for why, n in rows[mask].groupby(reason_of(rows[mask])).size().items():
            excluded[str(why)] += int(n)
        return rows[~mask]

    rows = drop(rows["n_devices"] != 1, lambda r: "multi-device (" + r["hardware"] + " x"
                + r["n_devices"].astype(str) + "): parallel serving is not modelled here")
    measured = rows["ttft_s"].where(rows["figure"] == "ttft", rows["latency_s"])
    rows = drop(measured.isna() | (measured <= 0), lambda r: r["figure"] + ": no time in the row")
    rows = drop(~rows["engine_raw"].isin(list(ENGINES)),
                lambda r: "engine " + r["engine_raw"] + " has no runtime profile")
    rows["device"] = rows["hardware"].map(DEVICES)
    known = _known_devices(set(rows["device"].dropna()))
    rows = drop(~rows["device"].isin(known),
                lambda r: "device " + r["hardware"] + " is not in the hardware catalog")
    rows["engine"] = rows["engine_raw"].map(ENGINES)
    rows["requests"] = rows["batch"].where(rows["engine"] != "llama.cpp", 1)
    rows["throughput_tok_s"] = (rows["requests"] * (rows["input_tokens"] + rows["output_tokens"])
                                / rows["latency_s"])
    archs = _archs(sorted(rows["model_ref"].unique()))
    rows["model"] = rows["model_ref"].map({k: a.name for k, a in archs.items() if a})
    rows = drop(
        rows["model"].isna(), lambda r: "model " + r["model_ref"] + " has no bundled config"
    )
    limit = rows["model_ref"].map({k: a.max_context for k, a in archs.items() if a})
    rows = drop(rows["input_tokens"] + rows["output_tokens"] > limit,
                lambda r: "input + output beyond " + r["model"] + "'s maximum context: the "
                "engine stops generating (the latency is about a prefill's)")
    rows = rows.loc[:, list(COLUMNS)].reset_index(drop=True)
    return ServingTable(rows=rows, excluded=dict(excluded), origin=str(folder))
