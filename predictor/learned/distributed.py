"""Training on a Parquet export of the measurement store, in process or on a Dask cluster.

``roofcast train --from DIR --scheduler local|dask-local:N|dask://HOST:PORT``; ``DIR`` is a
``roofcast data export --format parquet --partition-by device --output DIR`` dataset
(``training_data.partitioned``).

Both schedulers run the same steps, so their results differ only where XGBoost's own
distributed algorithm differs:

1. **Read and featurize per partition**: one task per Parquet file (``dask.dataframe.
   read_parquet(DIR).to_delayed()``; in process: the same files read with pyarrow, in the same
   order), each turning its tidy rows into a training set (``data.measurement_set``, the
   featurization of ``--from store``). The partitions are stacked (``data.combine``: the data
   hash is the hash over the partitions' hashes, the same for both schedulers).
2. **Fit, cross-validate, calibrate**: ``training.train``, unchanged: the same keys, grouped
   folds, candidates (``model.CANDIDATES``), scores, intervals, OOD sets and validation tables.
   On a cluster it is given ``DaskFitter``: the ``xgboost`` candidate — nearly all the work —
   is fitted with ``xgboost.dask.train`` on a ``DaskDMatrix`` whose feature rows stay on the
   workers that featurized them (the learned features of every partition are computed there and
   kept as a persisted Dask frame; a fit sends the workers only the selected row numbers, the
   targets and the weights); ``ridge`` and ``median`` (closed forms on one key's rows) are
   fitted in the client as locally.
3. The model is saved as now (XGBoost UBJ + JSON, ``persistence``).

What differs on a cluster: XGBoost's distributed ``hist`` builds its quantile sketch from
per-worker sketches and draws ``subsample``/``colsample_bytree`` per worker, so the trees are
not bit-identical to a single-process fit; the tests bound the effect on the validation
figures (``tests/predictor/learned/test_distributed.py``). The client still holds one row of
featurized inputs per measurement (validation needs every out-of-fold prediction); the fits
and the featurization are what moves to the workers.

Schedulers (``SCHEDULERS`` registry, prefix -> client factory): ``local`` (no Dask),
``dask-local:N`` (a ``distributed.LocalCluster`` of N single-threaded worker processes, closed
afterwards), ``dask://HOST:PORT`` (an existing scheduler; ``CONNECT_TIMEOUT_S`` to connect).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned.data import SourceUse, TrainingSet, combine, measurement_set
from roofcast.predictor.learned.features import FEATURES, learned_features
from roofcast.predictor.learned.model import XGB_PARAMS, FamilyModel, harness_floor, reference_time

CONNECT_TIMEOUT_S = 10
MAX_LOCAL_WORKERS = 64
#: XGBRegressor parameter names -> ``xgboost.train`` names (the rest are the same).
_BOOSTER_NAMES = {"random_state": "seed"}
#: local settings a cluster fit drops: ``n_jobs`` (each worker uses its own thread count,
#: ``xgboost.dask``'s default; 2 threads on a 1-thread worker made a 0.4 s fit take 23 s).
_LOCAL_ONLY = ("n_jobs",)


# ----------------------------------------------------------------------------- schedulers
def _local_cluster(arg: str) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    try:
        n = int(arg)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_LOCAL_WORKERS:
        raise PredictionError(f"dask-local:{arg}: give a worker count 1..{MAX_LOCAL_WORKERS}, "
                              "e.g. --scheduler dask-local:2")
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def _remote(arg: str) -> Iterator[Any]:
    from distributed import Client

    if not arg or ":" not in arg:
        raise PredictionError(f"dask://{arg}: give the scheduler as dask://HOST:PORT")
    address = f"tcp://{arg}"
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise PredictionError(f"cannot reach the Dask scheduler at {address} within "
                              f"{CONNECT_TIMEOUT_S} s ({exc}); check the address and that "
                              "`dask scheduler` runs there") from exc
    with client:
        yield client


#: ``--scheduler`` prefix -> generator yielding a ``distributed.Client`` (``open_client``).
SCHEDULERS: dict[str, Callable[[str], Iterator[Any]]] = {
    "dask-local": _local_cluster, "dask": _remote}


def parse_scheduler(text: str) -> tuple[str, str]:
    """``local`` -> ("local", ""); ``dask-local:2`` -> ("dask-local", "2");
    ``dask://h:8786`` -> ("dask", "h:8786"); PredictionError for anything else."""
    text = (text or "local").strip()
    if text == "local":
        return "local", ""
    if text.startswith("dask://"):
        return "dask", text[len("dask://"):]
    prefix, _, arg = text.partition(":")
    if prefix in SCHEDULERS and prefix != "dask":
        return prefix, arg
    raise PredictionError(f"unknown scheduler {text!r}; give local, dask-local:N or "
                          "dask://HOST:PORT")


@contextmanager
def open_client(scheduler: str) -> Iterator[Any]:
    """A ``distributed.Client`` for a Dask ``scheduler`` string (closed on exit)."""
    prefix, arg = parse_scheduler(scheduler)
    if prefix == "local":
        raise PredictionError("the local scheduler has no Dask client")
    try:
        import distributed  # noqa: F401
        import xgboost.dask  # noqa: F401
    except ImportError as exc:
        raise PredictionError(f"--scheduler {scheduler} needs dask[distributed] ({exc}); "
                              "pip install 'dask[distributed]'") from exc
    yield from SCHEDULERS[prefix](arg)


# ----------------------------------------------------------------------------- reading
def _featurize(frame: pd.DataFrame, source: str, origin: str) -> TrainingSet | None:
    """One partition's tidy rows -> training set (None when it has no usable row)."""
    frame = frame.reset_index(drop=True)
    for c in frame.columns:
        if isinstance(frame[c].dtype, pd.CategoricalDtype):  # the Hive partition column
            frame[c] = frame[c].astype(str)
    if frame.empty:
        return None
    try:
        return measurement_set(frame, source, origin=origin)
    except PredictionError as exc:
        if "no usable measurement rows" in str(exc):
            return None
        raise


def dataset_files(folder: str | Path) -> list[Path]:
    """The Parquet files of an export, in the order Dask reads them (sorted paths)."""
    from roofcast.training_data.errors import MeasurementError
    from roofcast.training_data.partitioned import read_manifest

    folder = Path(folder)
    try:
        read_manifest(folder)
    except MeasurementError as exc:
        raise PredictionError(str(exc)) from exc
    files = sorted(p for p in folder.rglob("*.parquet") if not p.name.startswith((".", "_")))
    if not files:
        raise PredictionError(f"{folder}: the export holds no Parquet files; export again")
    return files


def _stack(parts: list[TrainingSet | None], folder: Path) -> TrainingSet:
    sets = [p for p in parts if p is not None]
    if not sets:
        raise PredictionError(f"{folder}: no usable measurement rows in the export")
    ts = sets[0] if len(sets) == 1 else combine(sets)
    return replace(ts, source=sets[0].source,
                   used=(SourceUse(sets[0].source, len(ts), str(folder)),))


def read_local(folder: str | Path) -> TrainingSet:
    """The export as one training set, in process (module docstring, point 1)."""
    import pyarrow.dataset as ds

    folder = Path(folder)
    files = dataset_files(folder)
    dataset = ds.dataset(folder, format="parquet", partitioning="hive")
    by_file = {Path(f.path).resolve(): f for f in dataset.get_fragments()}
    parts = []
    for path in files:
        frag = by_file[path.resolve()]
        parts.append(_featurize(_with_partition(frag), f"dataset:{folder.name}", str(folder)))
    return _stack(parts, folder)


def _with_partition(fragment) -> pd.DataFrame:
    """A fragment's rows plus its Hive partition column(s), as Dask reads them."""
    import pyarrow.dataset as ds

    df = fragment.to_table().to_pandas()
    keys = ds.get_partition_keys(fragment.partition_expression)
    for k, v in keys.items():
        df[k] = str(v)
    return df


@dataclass
class ClusterData:
    """The featurized export on a cluster: the training set (client side) and its learned
    features as a Dask frame persisted on the workers, indexed by training-set row number."""

    ts: TrainingSet
    features: Any  # dask.dataframe.DataFrame of FEATURES, index = row number in ts.X


def read_cluster(folder: str | Path, client: Any) -> ClusterData:
    """The export read with ``dask.dataframe.read_parquet``, featurized one partition per task
    on the workers (module docstring, point 1)."""
    import dask
    import dask.dataframe as dd

    folder = Path(folder)
    dataset_files(folder)  # manifest and files checked before the cluster reads anything
    ddf = dd.read_parquet(str(folder), ignore_metadata_file=True)
    source = f"dataset:{folder.name}"
    tasks = [dask.delayed(_featurize)(part, source, str(folder)) for part in ddf.to_delayed()]
    futures = client.compute(tasks)
    parts = client.gather(futures)
    ts = _stack(parts, folder)
    # the learned features of each partition, computed where the partition was featurized,
    # indexed by the row number it has in the stacked training set
    offsets = np.cumsum([0] + [len(p) for p in parts if p is not None])[:-1]
    kept = [f for f, p in zip(futures, parts, strict=True) if p is not None]
    feats = [dask.delayed(_features_of)(f, int(o)) for f, o in zip(kept, offsets, strict=True)]
    meta = pd.DataFrame({c: pd.Series(dtype=float) for c in FEATURES})
    frame = dd.from_delayed(feats, meta=meta, verify_meta=False).persist()
    return ClusterData(ts, frame)


def _features_of(ts: TrainingSet, offset: int) -> pd.DataFrame:
    F = learned_features(ts.X)[list(FEATURES)].astype(float)
    F.index = pd.RangeIndex(offset, offset + len(F))
    return F


# ----------------------------------------------------------------------------- fitting
def booster_params(xgb_params: dict[str, Any] | None) -> tuple[dict[str, Any], int]:
    """(``xgboost.train`` parameters, rounds) of ``model.XGB_PARAMS`` updated by
    ``xgb_params``: the XGBRegressor settings of local training, renamed (``_LOCAL_ONLY``
    dropped)."""
    merged = {**XGB_PARAMS, **(xgb_params or {})}
    rounds = int(merged.pop("n_estimators"))
    params = {_BOOSTER_NAMES.get(k, k): v for k, v in merged.items() if k not in _LOCAL_ONLY}
    params.setdefault("objective", "reg:squarederror")
    return params, rounds


def _take(part: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """The rows of a feature partition that ``labels`` (index: row numbers) names, with the
    target ``_y`` and weight ``_w`` columns joined."""
    return part.join(labels, how="inner")


@dataclass
class DaskFitter:
    """``training.Fitter`` fitting the ``xgboost`` candidate with ``xgboost.dask`` on the
    workers' feature partitions (module docstring, point 2); other candidates as locally."""

    client: Any
    data: ClusterData

    def __call__(self, key: str, candidate: str, F: pd.DataFrame, meas_s: np.ndarray,
                 t_bound: np.ndarray, groups: np.ndarray, xgb_params: dict | None = None,
                 weight: np.ndarray | None = None) -> FamilyModel:
        if candidate != "xgboost":
            return FamilyModel.fit(key, candidate, F, meas_s, t_bound, groups, xgb_params,
                                   weight)
        import xgboost.dask as dxgb

        floor = harness_floor(meas_s, t_bound, groups)
        y = np.log10(np.asarray(meas_s, float) / reference_time(t_bound, floor))
        w = np.ones(len(y)) if weight is None else np.asarray(weight, float)
        labels = pd.DataFrame({"_y": y, "_w": w}, index=F.index)  # F.index: row numbers
        meta = self.data.features._meta.join(labels.iloc[:0], how="inner")
        rows = self.data.features.map_partitions(_take, labels, meta=meta)
        dtrain = dxgb.DaskDMatrix(self.client, rows[list(FEATURES)], rows["_y"],
                                  weight=rows["_w"], feature_names=list(FEATURES))
        params, rounds = booster_params(xgb_params)
        out = dxgb.train(self.client, params, dtrain, num_boost_round=rounds)
        booster = out["booster"]
        booster.feature_names = list(FEATURES)
        fm = FamilyModel(key, candidate, booster=booster, floor_s=floor)
        seen = fm.predict_log(F)
        fm.y_range = (float(seen.min()), float(seen.max()))
        return fm


def train_dataset(folder: str | Path, scheduler: str = "local", **train_kwargs: Any):
    """Read the export at ``folder`` and train (``training.train`` with ``train_kwargs``) on
    ``scheduler``; returns ``training.TrainResult``."""
    from roofcast.predictor.learned.training import train

    prefix, _ = parse_scheduler(scheduler)
    if prefix == "local":
        return train(read_local(folder), **train_kwargs)
    with open_client(scheduler) as client:
        data = read_cluster(folder, client)
        return train(data.ts, fit=DaskFitter(client, data), **train_kwargs)
