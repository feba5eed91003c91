"""Training on a Parquet export of the measurement store, in process or on a Dask cluster.

``roofcast train --from DIR --scheduler local|dask-local:N|dask://HOST:PORT`` on a
``roofcast data export --format parquet --partition-by device`` folder. Both schedulers run the
same steps: read and featurize each Parquet file (sorted path order, so row order and XGBoost's
row subsampling agree), stack the parts, then ``training.train`` unchanged; on a cluster the
``xgboost`` candidate is fitted with ``xgboost.dask`` (``DaskFitter``) on features kept on the
workers, ``ridge``/``median`` in the client. A fit of at most ``ONE_WORKER_MAX_ROWS`` (100,000)
rows runs as one partition on one worker and reproduces local training bit for bit; larger fits
are spread (XGBoost's merged sketches give other trees, within the tested tolerance). The client
still holds about 1.8 kB per featurized row: this scales the fits, not the client's memory.

Design notes: ``docs/design/module-notes.md`` (roofcast.predictor.learned.distributed).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pandas as pd

from roofcast.predictor import dask_client
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.learned.data import SourceUse, TrainingSet, combine, measurement_set
from roofcast.predictor.learned.features import FEATURES, learned_features
from roofcast.predictor.learned.model import XGB_PARAMS, FamilyModel, harness_floor, reference_time

#: a fit of at most this many rows runs on one worker (module docstring: "Small fits")
ONE_WORKER_MAX_ROWS = 100_000
#: what every worker of a ``dask://`` cluster must import (``dask_client.open_client``)
WORKER_MODULES = ("roofcast.predictor.learned.distributed", "xgboost.dask")
#: XGBRegressor parameter names -> ``xgboost.train`` names (the rest are the same).
_BOOSTER_NAMES = {"random_state": "seed"}
#: local settings a cluster fit drops: ``n_jobs`` (each worker uses its own thread count,
#: ``xgboost.dask``'s default; 2 threads on a 1-thread worker made a 0.4 s fit take 23 s).
_LOCAL_ONLY = ("n_jobs",)


# ----------------------------------------------------------------------------- schedulers
@contextmanager
def open_client(scheduler: str) -> Iterator[Any]:
    """A ``distributed.Client`` for a Dask ``scheduler`` text (``dask_client.open_client``,
    closed on exit), once ``xgboost.dask`` is known to import here; the client is the current
    one inside the context (``Client.as_current``: ``xgboost.dask`` looks it up)."""
    spec = dask_client.parse_scheduler(scheduler)
    if not spec.is_dask:
        raise PredictionError("the local scheduler has no Dask client")
    try:
        import distributed  # noqa: F401
        import xgboost.dask  # noqa: F401
    except ImportError as exc:
        raise PredictionError(f"--scheduler {scheduler} needs dask[distributed] ({exc}); "
                              "pip install 'dask[distributed]'") from exc
    with dask_client.open_client(spec, WORKER_MODULES) as client, client.as_current():
        yield client


# ----------------------------------------------------------------------------- reading
def _featurize(frame: pd.DataFrame, source: str, origin: str) -> TrainingSet | None:
    """One file's tidy rows -> training set (None when it has no usable row)."""
    frame = frame.reset_index(drop=True)
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


def read_part(folder: str | Path, path: str | Path) -> TrainingSet | None:
    """One Parquet file of the export at ``folder`` -> its training set (None when it has no
    usable row): the file's rows plus its Hive partition column(s) (``key=value`` folders
    between ``folder`` and the file, URI-decoded as pyarrow decodes them), featurized. The same
    function reads a file in process and on a worker (module docstring, point 1)."""
    import pyarrow.parquet as pq

    folder, path = Path(folder), Path(path)
    df = pq.ParquetFile(path).read().to_pandas()
    for segment in path.relative_to(folder).parts[:-1]:
        key, sep, value = segment.partition("=")
        if sep:
            df[key] = unquote(value)
    return _featurize(df, f"dataset:{folder.name}", str(folder))


def read_local(folder: str | Path) -> TrainingSet:
    """The export as one training set, in process (module docstring, point 1)."""
    folder = Path(folder)
    return _stack([read_part(folder, path) for path in dataset_files(folder)], folder)


@dataclass
class ClusterData:
    """The featurized export on a cluster: the training set (client side) and its learned
    features as a Dask frame persisted on the workers, indexed by training-set row number."""

    ts: TrainingSet
    features: Any  # dask.dataframe.DataFrame of FEATURES, index = row number in ts.X


def read_cluster(folder: str | Path, client: Any) -> ClusterData:
    """The export read and featurized one Parquet file per task on the workers (``read_part``,
    the files in ``dataset_files`` order, as ``read_local``; module docstring, point 1)."""
    import dask
    import dask.dataframe as dd

    folder = Path(folder)
    files = dataset_files(folder)  # manifest and files checked before the cluster reads any
    tasks = [dask.delayed(read_part)(str(folder), str(path)) for path in files]
    futures = client.compute(tasks)
    parts = client.gather(futures)
    ts = _stack(parts, folder)
    # the learned features of each partition, computed where the partition was featurized,
    # indexed by the row number it has in the stacked training set
    offsets = np.cumsum([0] + [len(p) for p in parts if p is not None])[:-1]
    kept = [f for f, p in zip(futures, parts, strict=True) if p is not None]
    feats = [dask.delayed(_features_of)(f, int(o)) for f, o in zip(kept, offsets, strict=True)]
    meta = pd.DataFrame({c: pd.Series(dtype=float) for c in FEATURES})
    frame = client.persist(dd.from_delayed(feats, meta=meta, verify_meta=False))
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
    workers' feature partitions (module docstring, point 2); other candidates as locally. A
    fit of at most ``one_worker_max_rows`` rows runs on one worker (module docstring, "Small
    fits"; 0: every fit spread over the workers that hold its rows)."""

    client: Any
    data: ClusterData
    one_worker_max_rows: int = ONE_WORKER_MAX_ROWS

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
        if len(labels) <= self.one_worker_max_rows:  # one partition, in row order: one worker
            rows = rows.repartition(npartitions=1)
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

    if not dask_client.parse_scheduler(scheduler).is_dask:
        return train(read_local(folder), **train_kwargs)
    with open_client(scheduler) as client:
        data = read_cluster(folder, client)
        return train(data.ts, fit=DaskFitter(client, data), **train_kwargs)
