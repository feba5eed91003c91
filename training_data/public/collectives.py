"""Package the public collective-communication curves the product reads.

    python -m roofcast.training_data.public.collectives [--data-dir DIR]

Reads ``DIR/collectives/vidur_collectives.csv.gz`` (microsoft/vidur ``data/profiling/network/``,
MIT: time per rank in ms vs ``size`` in bytes) and ``DIR/collectives/azure_nccl_allreduce.csv``
(Azure/AI-benchmarking-guide, MIT: NCCL all-reduce bus bandwidth in GB/s, 8 GPUs) and writes
``predictor/data/collectives/curves.csv``: one row per (system, collective, n_ranks,
ranks_per_node, size_bytes) with ``time_s`` and the ``source`` and ``licence`` kept.

* Vidur: ``time_s`` = the slowest rank's median; ``ranks_per_node`` = its ``devices_per_node``
  (1 means every rank on its own node). Sizes are thinned to about four per octave.
* Azure: algorithm bandwidth = bus bandwidth / (2(n-1)/n) (nccl-tests' definition), so
  ``time_s`` = size_bytes / (busbw_GBps * 1e9 * n / (2(n-1))).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.training_data.public_kernels import shared_data_dir

OUT_PATH = Path(__file__).resolve().parents[2] / "predictor" / "data" / "collectives" / "curves.csv"
LICENCE = "MIT"
AZURE_SYSTEMS = {"ND A100 v4": "azure_nd_a100_v4", "ND H100 v5": "azure_nd_h100_v5",
                 "ND H200 v5": "azure_nd_h200_v5"}
COLUMNS = ["system", "collective", "n_ranks", "ranks_per_node", "size_bytes", "time_s", "source",
           "licence"]
PER_OCTAVE = 4


def _thin(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep the first size in each 1/PER_OCTAVE octave bin of each curve."""
    keys = ["system", "collective", "n_ranks", "ranks_per_node"]
    bins = np.floor(np.log2(frame["size_bytes"]) * PER_OCTAVE)
    return frame.assign(_bin=bins).drop_duplicates([*keys, "_bin"]).drop(columns="_bin")


def vidur_curves(path: Path) -> pd.DataFrame:
    raw = pd.read_csv(path)
    keys = ["source", "system", "collective", "num_workers", "devices_per_node", "size"]
    g = raw.groupby(keys, as_index=False)["median_ms"].max()
    out = pd.DataFrame({"system": g["system"], "collective": g["collective"],
                        "n_ranks": g["num_workers"], "ranks_per_node": g["devices_per_node"],
                        "size_bytes": g["size"].astype("int64"), "time_s": g["median_ms"] / 1e3,
                        "source": g["source"], "licence": LICENCE})
    return _thin(
        out.sort_values(["system", "collective", "n_ranks", "ranks_per_node", "size_bytes"])
    )


def _read_azure(path: Path) -> pd.DataFrame:
    """The file's ``system`` field holds an unquoted comma; rejoin the middle fields."""
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    rows = []
    for line in lines[1:]:
        parts = line.split(",")
        tail = len(header) - 2
        rows.append([parts[0], ",".join(parts[1:-tail]), *parts[-tail:]])
    raw = pd.DataFrame(rows, columns=header)
    return raw.astype({"gpus": int, "size_bytes": "int64", "busbw_GBps": float})


def azure_curves(path: Path) -> pd.DataFrame:
    raw = _read_azure(path)
    system = raw["system"].map(
        lambda s: next(v for k, v in AZURE_SYSTEMS.items() if s.startswith(k))
    )
    n = raw["gpus"].astype(int)
    algbw = raw["busbw_GBps"] * 1e9 * n / (2 * (n - 1))
    return pd.DataFrame({"system": system, "collective": raw["collective"], "n_ranks": n,
                         "ranks_per_node": n, "size_bytes": raw["size_bytes"].astype("int64"),
                         "time_s": raw["size_bytes"] / algbw, "source": raw["source"],
                         "licence": LICENCE})


def drop_copies(table: pd.DataFrame) -> pd.DataFrame:
    """Drop a curve whose times equal another system's curve point for point (Vidur's
    ``h100_pairwise_nvlink/send_recv.csv`` repeats ``a100_pairwise_nvlink``'s): kept twice, it
    would sit on both sides of a leave-one-system-out split."""
    keys = ["collective", "n_ranks", "ranks_per_node"]
    drop = pd.Series(False, index=table.index)
    seen: dict[tuple, str] = {}
    for (system, *key), rows in table.groupby(["system", *keys], sort=True):
        sig = (tuple(key), tuple(rows.size_bytes), tuple(rows.time_s.round(9)))
        if sig in seen:
            print(f"dropped {system} {key}: a copy of {seen[sig]}")
            drop[rows.index] = True
        else:
            seen[sig] = system
    return table[~drop]


def build(data_dir: Path) -> pd.DataFrame:
    folder = data_dir / "collectives"
    table = pd.concat([vidur_curves(folder / "vidur_collectives.csv.gz"),
                       azure_curves(folder / "azure_nccl_allreduce.csv")], ignore_index=True)
    return drop_copies(table)[COLUMNS].reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, help="folder holding collectives/")
    p.add_argument("--out", type=Path, default=OUT_PATH)
    args = p.parse_args(argv)
    table = build(shared_data_dir(args.data_dir))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False, float_format="%.6g")
    print(f"{args.out}: {len(table)} rows, {args.out.stat().st_size / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
