"""Sweep explorer: a sweep's Parquet dataset loaded, filtered, and its Pareto front drawn.

A sweep is what ``roofcast sweep SPEC.toml --output DIR`` writes: one row per cell
(``predictor.sweeps.types.CELL_COLUMNS``) of the families ``graph``, ``serving`` and
``parallel``. The page loads a folder under the working directory or an uploaded zip of one
(both validated by ``app.sweep_files``), filters the cells, and shows per family and cost unit
(``PANELS``) latency (``time_s``) against the cost of throughput
(``predictor.sweeps.output.pareto_cost``: $ per sample/s or per token/s) with each work's
Pareto front (``pareto_front``; at most ``MAX_POINTS`` other cells drawn), then the front's
cells, the summary (``output.summary``), the filtered cells (first ``MAX_TABLE_ROWS``; all in
the CSV) and the errors grouped by message. Details: docs/design/app.md.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
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
from roofcast.predictor.sweeps.output import (
    SAMPLE_RATE,
    TOKEN_RATE,
    pareto_cost,
    pareto_front,
    rate_unit,
    summary,
)
from roofcast.predictor.sweeps.schedulers import hardware_of

SOURCES = ("Folder path", "Zipped folder")
#: the filters: cell column -> label (``tokens`` is ``IN:OUT`` of the LLM cells, ``-`` else)
FILTERS = {"family": "Families", "model": "Models", "device": "Devices", "system": "Systems",
           "plan": "Plans", "precision": "Precisions", "mode": "Modes",
           "tokens": "Tokens (in:out)"}
#: filter widgets per row
FILTERS_PER_ROW = 4
#: how an empty device/system value reads in a filter (a system cell has no device text; a
#: one-device cell no system)
NONE_TEXT = "(none)"
#: a Pareto chart per (family, cost unit): title, latency axis title
PANELS = {
    ("graph", SAMPLE_RATE): ("Graph cells: latency vs $/throughput",
                             "predicted time per batch (ms)"),
    ("serving", TOKEN_RATE): ("LLM serving: e2e latency vs $/(tokens/s)",
                              "end-to-end latency of a request batch, TTFT + (M-1) x TPOT (ms)"),
    ("parallel", SAMPLE_RATE): ("Parallel plans: step time vs $/throughput",
                                "predicted time per step (ms)"),
    ("parallel", TOKEN_RATE): ("Parallel plans (LLM): step time vs $/(tokens/s)",
                               "predicted time per step (ms)"),
}
#: the cost axis' unit as the chart writes it ("$ per (token/s)")
RATE_LABELS = {SAMPLE_RATE: "sample/s", TOKEN_RATE: "token/s"}
#: table columns shown only when some selected cell has a value (finite, non-zero)
OPTIONAL = ("input_tokens", "output_tokens", "tokens_per_s", "ttft_s", "tpot_s", "speedup",
            "best_tokens_per_s_per_dollar", "best_speedup")
#: cells drawn on the Pareto chart besides the front (a seeded sample beyond)
MAX_POINTS = 5_000
#: cells shown in the table (the download has all the filtered cells)
MAX_TABLE_ROWS = 1_000
DEFAULTS: dict[str, Any] = {"sweep_source": SOURCES[0], "sweep_path": "", "sweep_fits": False}
FRONT_SHOWN = ("model", "family", "mode", "hardware", "n_devices", "plan", "runtime", "batch",
               "precision", "input_tokens", "output_tokens", "time_s", "cost_usd_per_rate",
               "rate_unit", "throughput_samples_per_s", "tokens_per_s", "ttft_s", "tpot_s",
               "memory_bytes", "fits", "speedup")


@st.cache_data(max_entries=4, show_spinner="Reading the sweep…")
def _read_folder(folder: str, stamp: str) -> LoadedSweep:
    """The sweep in ``folder`` (cached per folder and its files' sizes and times)."""
    del stamp  # cache key only
    return _derived(read_sweep(parquet_files(Path(folder)), Path(folder)))


@st.cache_data(max_entries=2, show_spinner="Reading the zipped sweep…")
def _read_zip(digest: str, _data: bytes) -> LoadedSweep:
    """The sweep in an uploaded zip (cached per content hash)."""
    del digest  # cache key only
    return _derived(load_zip(_data))


def _derived(sweep: LoadedSweep) -> LoadedSweep:
    """The sweep with the columns the page derives once per load, not per rerun: ``tokens``
    (``tokens_text``) and ``hardware`` (the spec's entry, ``hardware_of``)."""
    cells = sweep.cells.assign(tokens=tokens_text(sweep.cells), hardware=hardware_of(sweep.cells))
    return replace(sweep, cells=cells)


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


def tokens_text(cells: pd.DataFrame) -> pd.Series:
    """``IN:OUT`` per cell (``-`` for a cell without tokens), as in ``cell_id``; formatted once
    per distinct pair (a sweep has a handful, its cells up to millions)."""
    key = (cells["input_tokens"].to_numpy(np.int64) << 32) | cells["output_tokens"].to_numpy(
        np.int64)
    pairs, where = np.unique(key, return_inverse=True)
    text = np.array(["-" if k == 0 else f"{k >> 32}:{k & 0xFFFFFFFF}" for k in pairs.tolist()],
                    dtype=object)
    return pd.Series(text[where] if len(key) else [], index=cells.index, dtype=object)


def filters(cells: pd.DataFrame, label: str) -> pd.DataFrame:
    """The filter widgets (reset to everything when another sweep is loaded) and the cells
    they keep (``cells`` has the ``tokens`` column)."""
    s = st.session_state
    if s.get("sweep_loaded") != label + f":{len(cells)}":
        s["sweep_loaded"] = label + f":{len(cells)}"
        for col in FILTERS:
            s[f"sweep_f_{col}"] = sorted(cells[col].unique().tolist())
    keep = pd.Series(True, index=cells.index)
    names = list(FILTERS)
    for start in range(0, len(names), FILTERS_PER_ROW):
        row = names[start:start + FILTERS_PER_ROW]
        for col, box in zip(row, st.columns(FILTERS_PER_ROW)[:len(row)], strict=True):
            options = sorted(cells[col].unique().tolist())
            chosen = box.multiselect(FILTERS[col], options, key=f"sweep_f_{col}",
                                     format_func=lambda v: v if v != "" else NONE_TEXT)
            keep &= cells[col].isin(chosen)
    if st.checkbox("Only cells that fit in the device's memory", key="sweep_fits"):
        keep &= cells["fits"]
    return cells[keep]


def _series(rows: pd.DataFrame, several: list[str]) -> pd.Series:
    """The chart's line of each row: the model, with the mode and the tokens where the panel
    has several (one front per work)."""
    out = rows["model"].astype(str)
    for col in several:
        out = out + " · " + rows[col].astype(str)
    return out


def pareto(cells: pd.DataFrame) -> None:
    """A Pareto chart per family and cost unit (``PANELS``), then the front's table."""
    ok = cells[cells["error"] == ""]
    ok = ok.assign(cost_usd_per_rate=pareto_cost(ok), rate_unit=rate_unit(ok))
    front = pareto_front(ok)
    priced = ok["cost_usd_per_rate"].notna() & (ok["cost_usd_per_rate"] > 0)
    notes = [f"{len(front)} cells on the front of {ok['model'].nunique()} model(s)"]
    for (family, unit), (title, x_title) in PANELS.items():
        here = ok[(ok["family"] == family) & (ok["rate_unit"] == unit)]
        if not len(here):
            continue
        best = front[(front["family"] == family) & (front["rate_unit"] == unit)]
        several = [c for c in ("mode", "tokens") if here[c].nunique() > 1]
        here = here.assign(series=_series(here, several))
        best = best.assign(series=_series(best, several))
        others = here[priced.loc[here.index] & ~here["cell_id"].isin(best["cell_id"])]
        drawn = others.sample(MAX_POINTS, random_state=0) if len(others) > MAX_POINTS \
            else others
        st.plotly_chart(charts.sweep_pareto(drawn, best, title=title, cost="cost_usd_per_rate",
                                            group="series", x_title=x_title,
                                            rate=RATE_LABELS[unit]),
                        width="stretch")
        notes.append(f"{family} ({unit}): {len(drawn):,} of the other {len(others):,} priced "
                     "cells drawn" + (" (a seeded sample)" if len(drawn) < len(others) else ""))
    if (~priced).any():
        notes.append(f"{int((~priced).sum()):,} cells of hardware without a list price (or "
                     "without a token rate) have no $/throughput and are not drawn")
    st.caption("; ".join(notes) + ".")
    shown = front[shown_columns(front, FRONT_SHOWN)]
    st.dataframe(shown, hide_index=True, width="stretch",
                 column_config=_number_format(shown))


def shown_columns(df: pd.DataFrame, wanted: tuple[str, ...] | list[str]) -> list[str]:
    """``df``'s ``wanted`` columns that it has, without the ``OPTIONAL`` ones that are empty
    (NaN or 0) in every row."""
    cols = []
    for c in wanted:
        if c not in df.columns:
            continue
        if c in OPTIONAL:
            values = pd.to_numeric(df[c], errors="coerce")
            if not (values.notna() & (values != 0)).any():
                continue
        cols.append(c)
    return cols


def _number_format(df: pd.DataFrame) -> dict:
    return {c: st.column_config.NumberColumn(format="%.4g")
            for c in df.columns if df[c].dtype.kind == "f"}


def render() -> None:
    state.init_state("sweep")
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, value)
    st.title("Sweep explorer")
    st.caption("Load a sweep's Parquet output, filter its cells and compare latency with the "
               "cost of throughput: per family and work, the Pareto front of cells no other "
               "beats on both (LLM serving: end-to-end latency vs $ per token/s).")
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
    cols = st.columns(5)
    cols[0].metric("Cells", f"{len(cells):,}")
    cols[1].metric("Models", cells["model"].nunique())
    cols[2].metric("Hardware", cells["hardware"].nunique(),
                   help="devices and system: entries of the sweep")
    cols[3].metric("Families", cells["family"].nunique())
    cols[4].metric("Cells with an error", f"{int((cells['error'] != '').sum()):,}")
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
    speedup = shown.loc[shown["error"] == "", "speedup"]
    if speedup.notna().any():
        best = shown.loc[speedup.idxmax()]
        st.caption(f"Best speedup over the sweep's baseline: {speedup.max():.3g}x "
                   f"({best['model']} on {best['hardware']}, "
                   f"{best['family']}, plan {best['plan']}, batch {best['batch']}).")
    st.subheader("Per model, family and hardware")
    table = summary(shown)
    table = table[shown_columns(table, list(table.columns))]
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config=_number_format(table))
    st.subheader("Cells")
    head = shown.head(MAX_TABLE_ROWS)[shown_columns(shown, list(shown.columns))]
    st.dataframe(head, hide_index=True, width="stretch", column_config=_number_format(head))
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
