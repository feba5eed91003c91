"""Measurements & retrain: measured op times from the measurement store or an uploaded file,
compared with the predictions; retrain the learned predictor on them and compare held-out errors
with the current model before adopting.

Sources: the measurement store at ``training_data.store.default_path()`` — the one store every
part of roofcast uses by default (``roofcast measure``, ``roofcast data import``, ``roofcast
train --source store``; ``$ROOFCAST_DATA_DIR`` moves it) — filtered by device and dataset; or a
CSV/Parquet file, validated row by row (``training_data.schema``): one bad row rejects it, with
every bad line listed. Measured rows become featurized rows
(``predictor.learned.data.measurement_set``) on which any estimator predicts; rows of a device
the catalog cannot give (an uncalibrated ``local``) are listed but not predicted, and the page
says so. Errors are APE = |predicted - measured| / measured.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from roofcast.app import charts, controls, state, wording
from roofcast.defaults import GRAPH_ESTIMATOR
from roofcast.predictor.errors import PredictionError
from roofcast.predictor.estimator_registry import estimator_names, make_estimator
from roofcast.training_data.errors import MeasurementError
from roofcast.training_data.importers import read_checked
from roofcast.training_data.store import Store

SOURCES = ("measurement store", "file")
#: most store rows compared at once (a random, seeded sample beyond it; the page says so)
MAX_STORE_ROWS = 20_000
#: the name under which "Adopt the new model" installs the retrained model (roofcast models list)
ADOPTED_NAME = "app"


def store_stamp(path: Path) -> str:
    """Size and modification time of the store file: part of cache keys, so rows that
    ``roofcast measure`` just appended are read at once."""
    return f"{path.stat().st_size}:{path.stat().st_mtime_ns}" if path.is_file() else "absent"


@st.cache_data(max_entries=8, show_spinner=False)
def store_stats(path: str, stamp: str) -> pd.DataFrame:
    """Rows per device, runtime, dataset and family of the store at ``path`` (``Store.stats``)."""
    del stamp  # cache key only
    return Store(path).stats()


@st.cache_data(max_entries=8, show_spinner="Reading the measurement store…")
def store_rows(path: str, stamp: str, devices: tuple[str, ...], datasets: tuple[str, ...]):
    """The store's rows of ``devices`` and ``datasets`` (at most ``MAX_STORE_ROWS``, a seeded
    sample beyond), the stored row count, and the training set of the rows whose device the
    catalog knows, with the devices it does not (id -> reason)."""
    from roofcast.hw_catalog import get_device
    from roofcast.predictor.learned.data import measurement_set

    del stamp  # cache key only
    rows = Store(path).read(device=list(devices), source=list(datasets))
    stored = len(rows)
    if stored > MAX_STORE_ROWS:
        rows = rows.sample(MAX_STORE_ROWS, random_state=0).sort_index()
    unknown = {}
    for dev in sorted(rows["device_id"].unique()):
        try:
            get_device(dev)
        except state.USER_ERRORS as exc:
            unknown[dev] = str(exc)
    known = rows[~rows["device_id"].isin(list(unknown))]
    ts = measurement_set(known, f"store:{Path(path).name}") if len(known) else None
    return rows, stored, ts, unknown


@st.cache_data(max_entries=8, show_spinner="Validating the measurements…")
def load_measurements(name: str, digest: str, _data: bytes):
    """Validated tidy rows of an uploaded CSV/Parquet and their training set (featurized)."""
    from roofcast.predictor.learned.data import measurement_set

    del digest  # cache key only
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", Path(name).name) or "measurements.csv"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / safe
        path.write_bytes(_data)
        try:
            frame = read_checked(path)
        except MeasurementError as exc:
            raise MeasurementError(
                str(exc).replace("nothing was written", "nothing was used")
            ) from None
    return frame, measurement_set(frame, f"file:{safe}")


def ape_pct(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return 100.0 * np.abs(pred - meas) / meas


def predictions_table(ts, estimators: list[str]) -> pd.DataFrame:
    """Per measured row: family, op type, device, measured seconds and each estimator's."""
    X = ts.X
    out = pd.DataFrame({"family": X["family"].astype(str), "op_type": X["op_type"].astype(str),
                        "device_id": X["device"].astype(str), "measured_s": ts.y_s})
    for name in estimators:
        out[f"{name}_s"] = make_estimator(name).predict(X)
    return out


def errors_by_family(table: pd.DataFrame, estimators: list[str]) -> pd.DataFrame:
    rows = []
    for fam, part in table.groupby("family"):
        row = {"family": fam, "rows": len(part)}
        for name in estimators:
            row[name] = float(np.median(ape_pct(part[f"{name}_s"].to_numpy(),
                                                part["measured_s"].to_numpy())))
        rows.append(row)
    return pd.DataFrame(rows)


@st.cache_resource(max_entries=4, show_spinner=False)
def train_cached(data_hash: str, _ts):
    """A learned model trained on the uploaded set (quick settings), shared across reruns."""
    from roofcast.predictor.learned.training import train

    del data_hash  # cache key only
    return train(_ts, quick=True)


def current_learned_errors(ts) -> pd.Series | None:
    """Median APE per model key of the current learned model on the uploaded rows (new data for
    it, so held out), or None when no current model can be loaded."""
    try:
        pred = make_estimator("learned").predict(ts.X)
    except (PredictionError, ImportError, OSError):
        return None
    from roofcast.predictor.learned.features import model_keys

    keys = model_keys(ts.X)
    e = ape_pct(pred, ts.y_s)
    return pd.Series({k: float(np.median(e[keys == k])) for k in np.unique(keys)})


def _retrain(ts) -> None:
    st.subheader("Retrain the learned predictor")
    try:
        from roofcast.predictor.learned import training  # noqa: F401
    except ImportError:
        st.info("Retraining arrives with the learned predictor (predictor.learned), which this "
                "installation does not have.")
        return
    st.caption("Trains per-family efficiency regressors on these rows with grouped "
               "cross-validation; the errors below are out-of-fold (held out). The current "
               "model's errors are on the same rows, which it has never seen.")
    clicked = st.button("Retrain on these measurements", key="retrain", type="primary")
    if not clicked and st.session_state.get("trained_hash") != ts.data_hash:
        return
    try:
        with st.spinner("Training (quick settings)…"):
            res = train_cached(ts.data_hash, ts)
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    st.session_state["trained_hash"] = ts.data_hash
    from roofcast.predictor.learned.training import validation_tables

    fam = validation_tables(res)["per_family"]
    if fam.empty:
        st.warning("No op family has enough rows for a learned model "
                   f"({'; '.join(res.notes) or 'too few rows'}); nothing to adopt.")
        return
    table = fam[["key", "candidate", "rows", "cv", "learned_median_ape_pct",
                 "analytical_median_ape_pct", "coverage_pct"]].rename(columns={
                     "learned_median_ape_pct": "new model median APE %",
                     "analytical_median_ape_pct": "analytical median APE %",
                     "coverage_pct": "interval coverage %"})
    current = current_learned_errors(ts)
    table["current model median APE %"] = (table["key"].map(current) if current is not None
                                            else np.nan)
    st.dataframe(table, hide_index=True, width="stretch")
    for note in res.notes:
        st.caption(note)
    new_err = float(np.median(table["new model median APE %"]))
    cur_err = float(np.nanmedian(table["current model median APE %"])) if current is not None \
        else float("nan")
    verdict = ("no current learned model to compare with" if np.isnan(cur_err) else
               f"current model {cur_err:.1f}% → new model {new_err:.1f}% (median over families)")
    st.markdown(f"**Held-out error:** {verdict}")
    if st.button("Adopt the new model", key="adopt"):
        from roofcast.predictor.learned.estimator import MODEL_ENV
        from roofcast.predictor.learned.installed import install

        folder = install(res.model, ADOPTED_NAME)  # atomic; becomes the active model
        st.success(f"Adopted: installed as model '{ADOPTED_NAME}' ({folder}) and made active: "
                   "the learned and auto estimators here, `roofcast predict` and the Python "
                   f"API use it. `roofcast models use default` returns to the shipped model.")
        if os.environ.get(MODEL_ENV):
            st.warning(f"${MODEL_ENV}={os.environ[MODEL_ENV]} is set for this server and "
                       "overrides the active model; unset it to use the adopted one.")


def _from_store():
    """Pick devices and datasets of the default store: their training set, or None."""
    store = Store()
    st.caption(f"Store `{store.path}`: where `roofcast measure` and `roofcast data import` write "
               "by default (`ROOFCAST_DATA_DIR` moves it).")
    stats = store_stats(str(store.path), store_stamp(store.path))
    if stats.empty:
        st.info("The measurement store holds no rows yet: `roofcast measure MODEL` or "
                "`roofcast data import FILE` fills it, or choose a file above.")
        return None
    st.dataframe(stats, hide_index=True, width="stretch",
                 column_config={"median_latency_s": st.column_config.NumberColumn(
                     format="%.4g")})
    c1, c2 = st.columns(2)
    devices = c1.multiselect("Devices", sorted(stats["device_id"].unique()),
                             default=sorted(stats["device_id"].unique()), key="meas_devices")
    datasets = c2.multiselect("Datasets", sorted(stats["dataset"].unique()),
                              default=sorted(stats["dataset"].unique()), key="meas_datasets")
    if not devices or not datasets:
        st.info("Pick at least one device and one dataset.")
        return None
    rows, stored, ts, unknown = store_rows(str(store.path), store_stamp(store.path),
                                           tuple(devices), tuple(datasets))
    sample = f" (a random {len(rows):,} of them compared)" if stored > len(rows) else ""
    st.success(f"{stored:,} stored rows of {', '.join(devices)}{sample}")
    with st.expander("Stored rows"):
        st.dataframe(rows, hide_index=True, width="stretch")
    for dev, why in unknown.items():
        st.warning(f"{dev}: its rows are listed but not predicted — {wording.in_app_words(why)}",
                   icon=":material/warning:")
    return ts


def _from_file():
    """An uploaded CSV/Parquet, validated: its training set, or None."""
    up = st.file_uploader("Measurement file", type=["csv", "gz", "parquet"], key="meas_upload")
    if up is None:
        st.info("No file yet. Export some with `roofcast data export` or measure with "
                "`roofcast measure`.")
        return None
    data = up.getvalue()
    try:
        frame, ts = load_measurements(up.name, hashlib.sha256(data).hexdigest(), data)
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return None
    st.success(f"{len(frame)} rows valid; {len(ts)} usable for prediction"
               + (f" (dropped: {ts.dropped})" if ts.dropped else ""))
    return ts


def _compare(ts) -> None:
    """Measured vs predicted for an estimator, errors by family, and retraining."""
    names = list(estimator_names())
    chosen = st.selectbox("Estimator", names, index=names.index(GRAPH_ESTIMATOR),
                          key="meas_estimator")
    compare = [chosen] + (["roofline"] if chosen != "roofline" else [])
    try:
        table = predictions_table(ts, compare)
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    left, right = st.columns([3, 2])
    left.plotly_chart(charts.measured_vs_predicted(table, f"{chosen}_s",
                                                   f"Measured vs predicted ({chosen})"),
                      width="stretch")
    fam = errors_by_family(table, compare)
    right.plotly_chart(charts.error_by_family(fam, compare, "Error by op family"),
                       width="stretch")
    overall = float(np.median(ape_pct(table[f"{chosen}_s"].to_numpy(),
                                      table["measured_s"].to_numpy())))
    st.metric(f"Median |error| of {chosen}", f"{overall:.1f} %")
    with st.expander("Rows"):
        st.dataframe(table, hide_index=True, width="stretch")
    st.divider()
    _retrain(ts)


def render() -> None:
    controls.page_header("measurements", "Measurements & retrain",
                         "Measured per-op times from the measurement store or a file (CSV or "
                         "Parquet with at least op_type, device_id, dtype and latency_s; FLOPs "
                         "and bytes per row as written by `roofcast measure` or `roofcast data "
                         "export`), against the predictions.")
    s = st.session_state
    if "meas_source" not in s:  # the store when it holds rows
        s["meas_source"] = SOURCES[0] if Store().count() else SOURCES[1]
    source = st.radio("Measurements from", SOURCES, horizontal=True, key="meas_source")
    try:
        ts = _from_store() if source == SOURCES[0] else _from_file()
    except state.USER_ERRORS as exc:  # e.g. a store file that is not a roofcast store
        state.show_error(exc)
        return
    if ts is not None:
        _compare(ts)


if __name__ == "__main__":
    render()
