"""Training sets for the learned predictors: featurized rows + measured seconds + CV groups.

Sources (``roofcast train --from``):

* ``public``: the public GPU kernels (``training_data.public_kernels``: NeuSight, DeepBench; the
  full files when ``$ROOFCAST_SHARED_DATA`` or ``../shared/data`` holds them, else their
  packaged copy), GPU devices only by default, at most ``cap`` rows per (family, device) drawn
  at random with a fixed seed (the cap keeps training within minutes on 2 cores);
* ``bundled``: the bundled CPU dataset (``training_data/bundled/cpu_measurements.csv.gz``),
  featurized on the device recorded in its ``cpu_metadata.json`` calibration (the machine it was
  measured on), never on the machine training runs on;
* ``store``: rows of the measurement store; a CSV/Parquet FILE of tidy rows (``schema``);
* ``aiconfigurator``: NVIDIA aiconfigurator's CUDA-graph GEMM and attention tables
  (``predictor.learned.aiconfigurator``; shared data folder only).
Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.learned.data).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from roofcast.graph_import.workload_schema import FAMILIES, WORKLOAD_COLUMN_NAMES
from roofcast.predictor.config import RunConfig
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned.roads import runtime_column
from roofcast.predictor.precision import STORAGE_BYTES

BUNDLED_DIR = Path(__file__).resolve().parents[2] / "training_data" / "bundled"
BUNDLED_ROWS = "cpu_measurements.csv.gz"
BUNDLED_META = "cpu_metadata.json"
DEFAULT_CAP = 1500
#: rows per (device, table, dtypes, runtime) of the aiconfigurator source ...
AICONF_CAP = 150
#: ... but for the MoE modules, the ``gpu/moe`` family's only data (28,000 rows at 1000).
AICONF_TABLE_CAPS = {"moe": 1000}
#: the runtime the public GPU kernels were timed under (NeuSight's PyTorch harness, DeepBench's
#: cuDNN/cuBLAS calls through it) and the one the bundled CPU rows were measured with.
PUBLIC_RUNTIME = "pytorch-eager"
BUNDLED_RUNTIME = "onnxruntime-cpu"
#: a measured runtime name: what ``predictor.runtimes`` profile names allow.
RUNTIME_NAME = r"^[A-Za-z0-9_.-]{1,64}$"


@dataclass(frozen=True)
class SourceUse:
    """One training source as loaded: its name, the rows it gave, where they were read."""

    name: str
    rows: int
    origin: str


@dataclass(frozen=True)
class TrainingSet:
    """Featurized rows ``X`` with measured ``y_s``; ``X`` carries ``_group`` (CV group),
    ``_run`` (run id) and ``_e2e_s`` (end-to-end latency of the run, NaN if unknown);
    ``used``: the sources it was loaded from (``load_sources``)."""

    X: pd.DataFrame
    y_s: np.ndarray
    source: str
    data_hash: str
    dropped: dict[str, int] = field(default_factory=dict)
    used: tuple[SourceUse, ...] = ()

    def __len__(self) -> int:
        return len(self.X)

    def subset(self, mask: np.ndarray) -> TrainingSet:
        return TrainingSet(self.X.loc[mask].copy(), self.y_s[mask], self.source, self.data_hash,
                           self.dropped, self.used)


def combine(sets: list[TrainingSet]) -> TrainingSet:
    """Stack several training sets (hash over their hashes)."""
    X = pd.concat([s.X for s in sets], ignore_index=True)
    y = np.concatenate([s.y_s for s in sets])
    h = hashlib.sha256("".join(s.data_hash for s in sets).encode()).hexdigest()
    dropped: dict[str, int] = {}
    for s in sets:
        for k, v in s.dropped.items():
            dropped[k] = dropped.get(k, 0) + v
    return TrainingSet(X, y, "+".join(s.source for s in sets), h, dropped,
                       tuple(u for s in sets for u in s.used))


def _hash(frame: pd.DataFrame) -> str:
    h = hashlib.sha256()
    h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return h.hexdigest()


def _group(kind: np.ndarray, device: np.ndarray, model: np.ndarray) -> np.ndarray:
    model = np.where(pd.isna(model) | (model.astype(str) == ""), "micro", model.astype(str))
    return np.where(kind == "cpu", "model:" + model, "device:" + device.astype(str))


# ----------------------------------------------------------------------------- public kernels
def public_set(
    devices: list[str] | None = None,
    cap: int | None = DEFAULT_CAP,
    seed: int = 0,
    data_dir: str | Path | None = None,
    kinds: tuple[str, ...] = ("gpu",),
) -> TrainingSet:
    """The public GPU kernels as a training set (module docstring)."""
    from roofcast.hw_catalog.catalog import get_device
    from roofcast.predictor.features import featurize
    from roofcast.training_data.public_kernels import PublicDataError, kernel_workload, load_kernels

    try:
        table = load_kernels(data_dir)
    except PublicDataError as exc:
        raise PredictionError(str(exc)) from exc
    kernels = table.kernels
    specs = {d: get_device(d) for d in kernels["device"].unique()}
    if devices:
        wanted = {get_device(d).id for d in devices}
        kernels = kernels[kernels["device"].isin(wanted)]
    else:
        kernels = kernels[kernels["device"].map(lambda d: specs[d].kind).isin(kinds)]
    if kernels.empty:
        raise PredictionError("no public kernel rows for the devices asked; see `roofcast hw list`")
    if cap:
        rng = np.random.default_rng(seed)
        keep = [idx if len(idx) <= cap else rng.choice(idx, cap, replace=False)
                for idx in kernels.groupby(["family", "device"]).indices.values()]
        kernels = kernels.iloc[np.sort(np.concatenate(keep))]
    work = kernel_workload(kernels)
    work["_group"] = "device:" + kernels["device"].astype(str)
    work["_run"] = kernels["dataset"].astype(str)
    work["_e2e_s"] = np.nan
    parts = [featurize(work.loc[idx], specs[str(dev)], RunConfig())
             for dev, idx in kernels.groupby("device").groups.items()]
    X = pd.concat(parts).loc[kernels.index].reset_index(drop=True)
    X["runtime"] = PUBLIC_RUNTIME
    X["dispatch_floor_s"] = _eager_floors(X)
    y = kernels["latency_s"].to_numpy(float)
    key = kernels[["dataset", "workload", "device", "precision", "direction", "latency_s"]]
    return TrainingSet(
        X, y, "public", _hash(key), used=(SourceUse("public", len(y), table.origin),)
    )


def _eager_floors(X: pd.DataFrame) -> np.ndarray:
    """The ``PUBLIC_RUNTIME`` profile's per-kernel floor on each row's device (what featurize
    gives a row predicted under it)."""
    from roofcast.predictor.runtimes import get_runtime

    profile = get_runtime(PUBLIC_RUNTIME)
    return np.array([profile.dispatch_floor_s(k, lo) for k, lo in
                     zip(X["device_kind"], X["launch_overhead_s"].astype(float), strict=True)])


# ----------------------------------------------------------------------------- tidy rows
def _engine(rows: pd.DataFrame) -> np.ndarray:
    has_gemm = rows["gemm_m"].notna().to_numpy() & (rows["gemm_m"].fillna(0).to_numpy() > 0)
    no_flops = rows["flops"].fillna(0).to_numpy() <= 0
    return np.where(has_gemm, "matrix", np.where(no_flops, "data", "vector"))


def measurement_workload(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """Workload rows (+ ``_group``-less extras) for tidy measurement rows (module docstring)."""
    rows = rows.copy()
    for c in ("flops", "bytes_read", "bytes_written", "weight_bytes", "gemm_batch", "gemm_m",
              "gemm_n", "gemm_k", "inner_elems", "latency_s", "e2e_latency_s", "threads_intra"):
        rows[c] = pd.to_numeric(rows.get(c, np.nan), errors="coerce")
    dropped: dict[str, int] = {}
    bad_cost = rows[["flops", "bytes_read", "bytes_written"]].isna().any(axis=1)
    bad_lat = ~(rows["latency_s"] > 0)
    if bad_cost.any():
        dropped["no FLOPs/bytes recorded"] = int(bad_cost.sum())
    if (bad_lat & ~bad_cost).any():
        dropped["no positive latency"] = int((bad_lat & ~bad_cost).sum())
    rows = rows[~bad_cost & ~bad_lat]
    dtype = rows["dtype"].astype(str)
    prec = rows.get("precision", pd.Series("fp32", index=rows.index)).astype(str)
    dtype = dtype.where(dtype.isin(list(STORAGE_BYTES)),
                        prec.where(prec.isin(list(STORAGE_BYTES)), "fp32"))
    fam = rows["family"].astype(str).where(rows["family"].astype(str).isin(FAMILIES), "other")
    node = rows.get("node", pd.Series("", index=rows.index)).fillna("").astype(str)
    out = pd.DataFrame({
        "node": node.where(node != "", rows["op_type"].astype(str)),
        "op_type": rows["op_type"].astype(str), "family": fam,
        "phase": np.where(rows.get("direction", pd.Series("fwd", index=rows.index)).fillna("fwd")
                          .astype(str).str.startswith("bwd"), "backward", "forward"),
        "engine": _engine(rows), "dtype": dtype,
        "flops": rows["flops"], "bytes_read": rows["bytes_read"],
        "bytes_written": rows["bytes_written"],
        "weight_bytes": rows["weight_bytes"].fillna(0.0),
        "gemm_batch": rows["gemm_batch"], "gemm_m": rows["gemm_m"], "gemm_n": rows["gemm_n"],
        "gemm_k": rows["gemm_k"], "inner_elems": rows["inner_elems"],
    }, index=rows.index)
    out["fused_nodes"] = out["node"]
    out = out[list(WORKLOAD_COLUMN_NAMES)]
    model = rows.get("model", pd.Series("", index=rows.index)).fillna("").astype(str)
    out["_model"] = model
    out["_device"] = rows["device_id"].astype(str)
    out["_threads"] = rows["threads_intra"]
    run = rows.get("run_id", pd.Series("", index=rows.index)).fillna("").astype(str)
    out["_run"] = run
    out["_e2e_s"] = rows.get("e2e_latency_s", np.nan)
    out["_latency_s"] = rows["latency_s"]
    return out, dropped


def _measured_runtime(rows: pd.DataFrame, default: np.ndarray, runtime: str | None,
                      source: str) -> np.ndarray:
    """The runtime each row was measured under: its ``runtime`` column where set, else
    ``runtime``, else ``default`` (the device kind's default runtime)."""
    fill = default if runtime is None else np.full(len(rows), runtime, dtype=object)
    if "runtime" not in rows.columns:
        return fill
    given = rows["runtime"].fillna("").astype(str).str.strip().to_numpy()
    bad = sorted({g for g in given if g and not pd.Series([g]).str.match(RUNTIME_NAME).iloc[0]})
    if bad:
        raise PredictionError(f"{source}: runtime values {bad[:5]} are not runtime names (1-64 "
                              "letters, digits, '-', '_' or '.'); see `roofcast runtimes`")
    return np.where(given != "", given, fill).astype(object)


def measurement_set(rows: pd.DataFrame, source: str, specs: dict | None = None,
                    origin: str = "", runtime: str | None = None) -> TrainingSet:
    """Tidy measurement rows -> training set; ``specs``: device id -> HardwareSpec overrides
    (e.g. ``local`` = the calibration recorded with the data); ``origin``: where the rows
    were read; ``runtime``: the runtime of rows whose ``runtime`` column is empty or missing
    (None: the device kind's default runtime)."""
    from roofcast.hw_catalog.catalog import get_device
    from roofcast.predictor.features import featurize

    work, dropped = measurement_workload(rows)
    if work.empty:
        raise PredictionError(f"{source}: no usable measurement rows (dropped: {dropped})")
    parts = []
    for (dev, threads), part in work.groupby(["_device", "_threads"], dropna=False):
        hw = (specs or {}).get(dev) or get_device(dev)
        t = None if pd.isna(threads) or hw.kind != "cpu" else int(threads)
        f = featurize(part, hw, RunConfig(threads=t))
        parts.append(f)
    X = pd.concat(parts).loc[work.index].reset_index(drop=True)
    X["runtime"] = _measured_runtime(rows.loc[work.index], runtime_column(X, "runtime"),
                                     runtime, source)
    X["_group"] = _group(X["device_kind"].astype(str).to_numpy(), X["device"].to_numpy(),
                         X["_model"].to_numpy())
    y = X.pop("_latency_s").to_numpy(float)
    key = rows.loc[work.index, [c for c in ("op_type", "model", "node", "device_id", "run_id",
                                            "threads_intra", "latency_s") if c in rows.columns]]
    return TrainingSet(X, y, source, _hash(key.astype(str)), dropped,
                       (SourceUse(source, len(y), origin),))


def bundled_spec(meta_path: Path):
    """The HardwareSpec of the machine the bundled CPU data was measured on."""
    from roofcast.hw_catalog.schema import doc_to_spec

    meta = json.loads(meta_path.read_text())
    doc = meta.get("calibration")
    if not doc:
        raise PredictionError(
            f"{meta_path}: no calibration recorded; the bundled CPU data cannot be "
            "featurized without its machine's measured peaks"
        )
    return doc_to_spec(doc, origin="local", path=str(meta_path))


def bundled_set(folder: str | Path | None = None) -> TrainingSet:
    """The bundled CPU dataset (module docstring)."""
    folder = Path(folder) if folder else BUNDLED_DIR
    rows_path, meta_path = folder / BUNDLED_ROWS, folder / BUNDLED_META
    if not rows_path.is_file() or not meta_path.is_file():
        raise PredictionError(
            f"bundled CPU data not found in {folder} ({BUNDLED_ROWS}, "
            f"{BUNDLED_META}); build it with python tools/bundled/build_dataset.py"
        )
    rows = pd.read_csv(rows_path, low_memory=False)
    return measurement_set(rows, "bundled", {"local": bundled_spec(meta_path)}, str(rows_path),
                           runtime=BUNDLED_RUNTIME)


def file_set(path: str | Path) -> TrainingSet:
    """A user's CSV/Parquet of tidy rows, validated by ``training_data.schema`` first."""
    from roofcast.training_data.importers import read_checked

    frame = read_checked(path)  # streamed, within the import limits; MeasurementError if bad
    return measurement_set(frame, f"file:{Path(path).name}", origin=str(path))


def store_set(path: str | Path | None = None, devices: list[str] | None = None) -> TrainingSet:
    """Rows of the measurement store (optionally only ``devices``)."""
    from roofcast.training_data.store import Store

    store = Store(path)
    rows = store.read(device=devices) if devices else store.read()
    if rows.empty:
        raise PredictionError(
            "the measurement store holds no rows; add some with `roofcast measure` "
            "or `roofcast data import`"
        )
    return measurement_set(rows, "store", origin=str(store.path))


def aiconfigurator_set(devices: list[str] | None = None, cap: int | None = None,
                       seed: int = 0, data_dir: str | Path | None = None) -> TrainingSet:
    """aiconfigurator's GEMM, attention and MoE rows (``predictor.learned.aiconfigurator``), at
    most ``cap`` per (device, table, dtypes, runtime); no ``cap``: ``AICONF_CAP``, and
    ``AICONF_TABLE_CAPS`` for the tables it names."""
    from roofcast.predictor.learned.aiconfigurator import SOURCE, featurized
    from roofcast.training_data.public.aiconfigurator import load_kernels
    from roofcast.training_data.public_kernels import PublicDataError

    try:
        table = load_kernels(data_dir, cap=cap or AICONF_CAP, seed=seed,
                             table_caps=None if cap else AICONF_TABLE_CAPS)
    except PublicDataError as exc:
        raise PredictionError(str(exc)) from exc
    rows = table.rows
    if devices:
        from roofcast.hw_catalog.catalog import get_device

        rows = rows[rows["device"].isin({get_device(d).id for d in devices})]
    if rows.empty:
        raise PredictionError(f"{SOURCE}: no rows for the devices asked")
    X = featurized(rows).reset_index(drop=True)
    X["_group"] = "device:" + X["device"].astype(str)
    X["_run"] = SOURCE + ":" + X["runtime"].astype(str)
    X["_e2e_s"] = np.nan
    y = rows["latency_s"].to_numpy(float)
    skipped = {f"{SOURCE} {k}": v for k, v in table.skipped.items()}
    return TrainingSet(X, y, SOURCE, _hash(rows.astype(str)), skipped,
                       (SourceUse(SOURCE, len(y), table.origin),))


#: ``roofcast train --from`` names -> loader(devices, store_path, cap, seed).
LOADERS = {
    "bundled": lambda devices, store_path, cap, seed: bundled_set(),
    "public": lambda devices, store_path, cap, seed: public_set(devices=devices, cap=cap,
                                                                seed=seed),
    "store": lambda devices, store_path, cap, seed: store_set(store_path, devices),
    "aiconfigurator": lambda devices, store_path, cap, seed: aiconfigurator_set(devices, None,
                                                                                seed),
}
SOURCES: tuple[str, ...] = tuple(LOADERS)
#: sources that filter by device themselves.
_SELF_FILTERED = ("public", "aiconfigurator")


def load_sources(sources: list[str], *, devices: list[str] | None = None,
                 store_path: str | Path | None = None, cap: int | None = DEFAULT_CAP,
                 seed: int = 0, say=None) -> TrainingSet:
    """One training set from ``sources`` (``SOURCES`` names or file paths), stacked."""
    sets = []
    for src in sources:
        if src in LOADERS:
            ts = LOADERS[src](devices, store_path, cap, seed)
        elif Path(src).suffix.lower() in (".csv", ".parquet", ".pq", ".gz") or Path(src).exists():
            ts = file_set(src)
        else:
            raise PredictionError(
                f"unknown training source {src!r}; give one of {', '.join(SOURCES)} "
                "or a CSV/Parquet file of measurement rows"
            )
        if devices and src not in _SELF_FILTERED:
            from roofcast.hw_catalog.catalog import get_device

            wanted = {get_device(d).id for d in devices}
            ts = ts.subset(ts.X["device"].isin(wanted).to_numpy())
            ts = replace(ts, used=tuple(replace(u, rows=len(ts)) for u in ts.used))
        if say:
            origin = ts.used[0].origin if ts.used else ""
            say(f"{src}: {len(ts)} rows from {origin}"
                + (f" (dropped {ts.dropped})" if ts.dropped else ""))
        sets.append(ts)
    out = sets[0] if len(sets) == 1 else combine(sets)
    if len(out) == 0:
        raise PredictionError("no training rows left after the --devices filter")
    return out
