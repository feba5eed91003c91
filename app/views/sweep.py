"""Sweep explorer: a sweep's Parquet dataset loaded, filtered, and its Pareto front drawn.

A sweep is what ``roofcast sweep SPEC.toml --output DIR`` writes: one row per (model, device,
runtime, batch, precision, mode) cell (``predictor.sweeps.types.CELL_COLUMNS``). The page
loads it from a folder path under the working directory or from an uploaded zip of the folder
— both validated by ``app.sweep_files`` (no path outside what the user gave, size, file and
row caps, the columns checked) — filters it by model, device, precision and mode (and, if
asked, to the cells that fit in memory), and shows:

* the Pareto chart: per model, latency (``time_s``) against cost of throughput
  (``usd_per_throughput`` = list price / samples per s), the front from
  ``predictor.sweeps.output.pareto_front`` (the cells no other cell of the model beats on
  both), at most ``MAX_POINTS`` other cells drawn (a seeded sample; the caption says so);
* the summary per model x device (``predictor.sweeps.output.summary``), the front's cells,
  the filtered cells (first ``MAX_TABLE_ROWS``; all of them in the CSV download) and the
  cells with an error, grouped by message.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from roofcast.app import charts, state
from roofcast.app.sweep_files import (
    MAX_ZIP_BYTES,
    LoadedSweep,
    load_zip,
    parquet_files,
    read_sweep,
    resolve_folder,
)
from roofcast.predictor.sweeps.output import pareto_front, summary

SOURCES = ("Folder path", "Zipped folder")
#: the filters: cell column -> label
FILTERS = {"model": "Models", "device": "Devices", "precision": "Precisions", "mode": "Modes"}
#: cells drawn on the Pareto chart besides the front (a seeded sample beyond)
MAX_POINTS = 5_000
#: cells shown in the table (the download has all the filtered cells)
MAX_TABLE_ROWS = 1_000
DEFAULTS: dict[str, Any] = {"sweep_source": SOURCES[0], "sweep_path": "", "sweep_fits": False}
FRONT_SHOWN = ("model", "device", "runtime", "batch", "precision", "mode", "time_s",
               "throughput_samples_per_s", "usd_per_throughput", "memory_bytes", "fits")


@st.cache_data(max_entries=4, show_spinner="Reading the sweep…")
def _read_folder(folder: str, stamp: str) -> LoadedSweep:
    """The sweep in ``folder`` (cached per folder and its files' sizes and times)."""
    del stamp  # cache key only
    return read_sweep(parquet_files(Path(folder)), Path(folder))


@st.cache_data(max_entries=2, show_spinner="Reading the zipped sweep…")
def _read_zip(digest: str, _data: bytes) -> LoadedSweep:
    """The sweep in an uploaded zip (cached per content hash)."""
    del digest  # cache key only
    return load_zip(_data)


def load() -> tuple[LoadedSweep, str] | None:
    """The sweep the user chose and a label for it, or None (with a hint) if none yet."""
    source = st.radio("Sweep", SOURCES, key="sweep_source", horizontal=True)
    if source == SOURCES[0]:
        text = st.text_input("Sweep folder (under the working directory)", key="sweep_path",
                             placeholder="runs/my-sweep",
                             help="the folder `roofcast sweep SPEC.toml --output DIR` wrote")
        if not text.strip():
            st.info("Type the folder a sweep wrote (`roofcast sweep SPEC.toml --output DIR`), "
                    "or upload it zipped.")
            return None
        folder = resolve_folder(text)
        files = parquet_files(folder)
        stamp = ";".join(f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
        return _read_folder(str(folder), stamp), text.strip()
    upload = st.file_uploader(f"Zipped sweep folder (at most {MAX_ZIP_BYTES // 2**20} MB)",
                              type=["zip"], key="sweep_zip")
    if upload is None:
        st.info("Upload a zip of a sweep's output folder (`zip -r sweep.zip DIR`).")
        return None
    data = upload.getvalue()
    return _read_zip(hashlib.sha256(data).hexdigest(), data), upload.name


def filters(cells: pd.DataFrame, label: str) -> pd.DataFrame:
    """The filter widgets (reset to everything when another sweep is loaded) and the cells
    they keep."""
    s = st.session_state
    if s.get("sweep_loaded") != label + f":{len(cells)}":
        s["sweep_loaded"] = label + f":{len(cells)}"
        for col in FILTERS:
            s[f"sweep_f_{col}"] = sorted(cells[col].unique().tolist())
    keep = pd.Series(True, index=cells.index)
    for col, box in zip(FILTERS, st.columns(len(FILTERS)), strict=True):
        options = sorted(cells[col].unique().tolist())
        chosen = box.multiselect(FILTERS[col], options, key=f"sweep_f_{col}")
        keep &= cells[col].isin(chosen)
    if st.checkbox("Only cells that fit in the device's memory", key="sweep_fits"):
        keep &= cells["fits"]
    return cells[keep]


def pareto(cells: pd.DataFrame) -> None:
    """The Pareto chart and the front's table."""
    ok = cells[cells["error"] == ""]
    front = pareto_front(ok)
    priced = ok["usd_per_throughput"].notna() & (ok["usd_per_throughput"] > 0)
    others = ok[priced & ~ok["cell_id"].isin(front["cell_id"])]
    drawn = others.sample(MAX_POINTS, random_state=0) if len(others) > MAX_POINTS else others
    st.plotly_chart(charts.sweep_pareto(drawn, front), width="stretch")
    notes = [f"{len(front)} cells on the front of {ok['model'].nunique()} model(s)",
             f"{len(drawn):,} of the other {len(others):,} priced cells drawn"
             + (" (a seeded sample)" if len(drawn) < len(others) else "")]
    if (~priced).any():
        notes.append(f"{int((~priced).sum()):,} cells of devices without a list price have no "
                     "$/throughput and are not drawn")
    st.caption("; ".join(notes) + ".")
    shown = front[[c for c in FRONT_SHOWN if c in front.columns]]
    st.dataframe(shown, hide_index=True, width="stretch",
                 column_config=_number_format(shown))


def _number_format(df: pd.DataFrame) -> dict:
    return {c: st.column_config.NumberColumn(format="%.4g")
            for c in df.columns if df[c].dtype.kind == "f"}


def render() -> None:
    state.init_state("sweep")
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, value)
    st.title("Sweep explorer")
    st.caption("Load a sweep's Parquet output, filter its cells and compare latency with the "
               "cost of throughput: per model, the Pareto front of cells no other beats on "
               "both.")
    try:
        loaded = load()
    except state.USER_ERRORS as exc:
        state.show_error(exc)
        return
    if loaded is None:
        return
    sweep, label = loaded
    cells = sweep.cells
    st.session_state["sweep_label"] = label
    cols = st.columns(4)
    cols[0].metric("Cells", f"{len(cells):,}")
    cols[1].metric("Models", cells["model"].nunique())
    cols[2].metric("Devices", cells["device"].nunique())
    cols[3].metric("Cells with an error", f"{int((cells['error'] != '').sum()):,}")
    read = f"{len(sweep.files)} Parquet file(s) read"
    if sweep.skipped:
        read += f"; skipped (not .parquet): {', '.join(sweep.skipped[:5])}"
        read += "…" if len(sweep.skipped) > 5 else ""
    st.caption(read + ".")
    shown = filters(cells, label)
    if not len(shown):
        st.info("No cell matches the filters: select at least one value of each.")
        return
    st.subheader(f"Pareto front ({len(shown):,} cells selected)")
    pareto(shown)
    st.subheader("Per model and device")
    table = summary(shown)
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config=_number_format(table))
    st.subheader("Cells")
    st.dataframe(shown.head(MAX_TABLE_ROWS), hide_index=True, width="stretch",
                 column_config=_number_format(shown))
    st.download_button(f"Download the {len(shown):,} selected cells (CSV)",
                       lambda: shown.to_csv(index=False).encode(),  # built on click only
                       file_name="roofcast_sweep_cells.csv",
                       mime="text/csv")
    errors = shown[shown["error"] != ""]
    if len(errors):
        with st.expander(f"Cells with an error ({len(errors):,})"):
            st.dataframe(errors.groupby("error").size().rename("cells").reset_index()
                         .sort_values("cells", ascending=False), hide_index=True)


if __name__ == "__main__":
    render()
